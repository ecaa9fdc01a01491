"""Replay Codabench's compute worker on this machine: the prediction step, then the
scoring step, through the Docker Engine API (Docker, or Podman's compatible service).

The folders, zips, container options and the ``metadata`` file come from worker.py
(the worker's facts as data). Declared differences from the worker: the image is used
as found locally (pulled only when missing); ``--wheelhouse``, ``--mount``,
``--uv-cache`` and ``--network-mode`` add what this machine may need; the worker's
data folder (/app/data) is an empty folder unless ``--data-dir`` is given.

Exit status of ``run_dry_run``: 0 scored, 1 the submission failed (as Codabench would
mark it), and ChallengeError for bad input or an unreachable engine.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from challenge_welding.bundle import worker
from challenge_welding.bundle.bundle import (check_data, count_images, execution_time_limit, find_repo_root,
                                              program_zip, zip_tree)
from challenge_welding.bundle.worker import Mount, StepFolders
from challenge_welding.contract.checked import FileRefused, read_scores
from challenge_welding.contract.errors import ChallengeError

DEFAULT_SOCKETS = ("unix:///var/run/docker.sock", "unix:///run/podman/podman.sock")
PODMAN_HINT = ("start Docker, or Podman's Docker-compatible service: `podman system service "
               "--time=0 unix:///run/podman/podman.sock &` and pass --engine-url "
               "unix:///run/podman/podman.sock")


@dataclass
class Sources:
    """What the worker downloads for one submission: four zips, the image, the limit."""
    ingestion_program: Path
    scoring_program: Path
    input_data: Path
    reference_data: Path
    image: str | None
    phase_limit: int | None
    private_queue: bool
    phase_name: str = ""


@dataclass
class StepResult:
    exit_codes: dict[str, int | None] = field(default_factory=dict)
    elapsed: dict[str, float] = field(default_factory=dict)
    timed_out: bool = False


@dataclass
class DryRunResult:
    status: int                      # 0 scored, 1 failed
    reason: str
    prediction: StepResult | None = None
    scoring: StepResult | None = None
    scores: dict | None = None
    limit: int = 0


def engine_url(explicit: str | None) -> str:
    """--engine-url, else DOCKER_HOST, else the first existing default socket."""
    if explicit:
        return explicit
    if os.environ.get("DOCKER_HOST"):
        return os.environ["DOCKER_HOST"]
    for url in DEFAULT_SOCKETS:
        if Path(url[len("unix://"):]).exists():
            return url
    raise ChallengeError(f"no container engine socket found ({', '.join(DEFAULT_SOCKETS)}): "
                         + PODMAN_HINT)


def parse_mount(text: str) -> Mount:
    """HOST:CONTAINER[:ro|rw] -> Mount (HOST must exist)."""
    parts = text.split(":")
    if len(parts) not in (2, 3) or not parts[0] or not parts[1].startswith("/"):
        raise ChallengeError(f"--mount {text!r}: expected HOST:/container/path[:ro|rw]")
    mode = parts[2] if len(parts) == 3 else "rw"
    if mode not in ("ro", "rw"):
        raise ChallengeError(f"--mount {text!r}: mode must be ro or rw")
    host = Path(parts[0]).resolve()
    if not host.exists():
        raise ChallengeError(f"--mount {text!r}: {host} does not exist")
    return Mount(str(host), parts[1], mode)


def sources_from_bundle(bundle_zip: Path, workdir: Path, phase_index: int = 0) -> Sources:
    """The zips a phase's first task names in the bundle, as Codabench stores them."""
    if not bundle_zip.is_file():
        raise ChallengeError(f"{bundle_zip}: no such file")
    dest = workdir / "bundle"
    try:
        worker.extract(bundle_zip, dest)
    except zipfile.BadZipFile:
        raise ChallengeError(f"{bundle_zip}: not a zip file") from None
    if not (dest / "competition.yaml").is_file():
        raise ChallengeError(f"{bundle_zip}: no competition.yaml at the zip root")
    comp = yaml.safe_load((dest / "competition.yaml").read_text()) or {}
    phases = sorted(comp.get("phases") or [], key=lambda p: p.get("index", 0))
    if not 0 <= phase_index < len(phases):
        raise ChallengeError(f"{bundle_zip}: no phase {phase_index} (it has {len(phases)})")
    phase = phases[phase_index]
    tasks = {t.get("index"): t for t in comp.get("tasks") or [] if isinstance(t, dict)}
    task = tasks.get((phase.get("tasks") or [None])[0])
    if task is None:
        raise ChallengeError(f"{bundle_zip}: phase {phase_index} has no task of the bundle")
    files = {}
    for fname in ("ingestion_program", "scoring_program", "input_data", "reference_data"):
        rel = task.get(fname)
        if not rel or not (dest / rel).is_file():
            raise ChallengeError(f"{bundle_zip}: task {task.get('index')} {fname} {rel!r} is not a "
                                 "file of the bundle (a dataset key on the server? use --data)")
        files[fname] = dest / rel
    return Sources(**files, image=comp.get("docker_image"),
                   phase_limit=phase.get("execution_time_limit"),
                   private_queue=bool(comp.get("queue")), phase_name=str(phase.get("name", "")))


def sources_from_data(data_dir: Path, workdir: Path, repo: Path | None = None) -> Sources:
    """A build-sets folder with the repository's programs, zipped as the bundle zips them."""
    data_dir = data_dir.resolve()
    check_data(data_dir)
    repo = programs_root(repo)
    zips = worker.make_folder(workdir / "zips")
    return Sources(
        ingestion_program=program_zip(repo / "ingestion_program", zips / "ingestion_program.zip"),
        scoring_program=program_zip(repo / "scoring_program", zips / "scoring_program.zip"),
        input_data=zip_tree(data_dir / "input_data", zips / "input_data.zip"),
        reference_data=zip_tree(data_dir / "reference_data", zips / "reference_data.zip"),
        image=None, phase_limit=execution_time_limit(count_images(data_dir)),
        private_queue=False, phase_name="(DATA)")


def programs_root(start: Path | None = None) -> Path:
    """The folder holding ingestion_program/ and scoring_program/ (the repository, or an
    unpacked starting kit: no competition.yaml needed), found by the one finder."""
    return find_repo_root(start, ("ingestion_program/metadata.yaml", "scoring_program/metadata.yaml"),
                          "the dry run needs ingestion_program/ and scoring_program/ (pass --repo)")


def submission_zip(submission: Path, workdir: Path) -> Path:
    """The submission as the participant uploads it: a zip (a folder is zipped here)."""
    if submission.is_dir():
        return zip_tree(submission, workdir / "zips" / "submission.zip")
    if not submission.is_file():
        raise ChallengeError(f"{submission}: no such file or folder")
    if not zipfile.is_zipfile(submission):
        raise ChallengeError(f"{submission}: not a zip file")
    return submission


class Engine:
    """The few Docker Engine API calls the worker makes (docker.APIClient, as it does)."""

    def __init__(self, url: str):
        try:  # an optional dependency (the [dry-run] extra): imported when a dry run starts
            import docker
        except ImportError:
            raise ChallengeError("the dry run needs the Docker SDK: pip install "
                                 "'challenge-welding[dry-run]' (or: pip install docker)") from None
        self.docker = docker
        try:
            self.api = docker.APIClient(base_url=url, version="auto", timeout=120)
            self.api.ping()
        except Exception as exc:  # docker raises several kinds for an unreachable socket
            raise ChallengeError(f"no container engine at {url} ({exc.__class__.__name__}): "
                                 + PODMAN_HINT) from None
        self.url = url

    def ensure_image(self, image: str, log) -> None:
        try:
            self.api.inspect_image(image)
        except self.docker.errors.ImageNotFound:
            log(f"pulling {image} (the worker pulls it before each run)")
            try:
                self.api.pull(image)
            except self.docker.errors.APIError as exc:
                raise ChallengeError(f"image {image}: not found locally and not pullable "
                                     f"({exc.explanation})") from None

    def run_step(self, specs: list[worker.ContainerSpec], limit: int, log_dir: Path,
                 echo) -> StepResult:
        """Start the step's containers together, wait for all under one time limit.

        Each container is waited for in its own thread, so that each one's elapsed time
        is its own (the worker's asyncio.gather); past the limit all are removed.
        """
        result, started, waiters, killed = StepResult(), [], [], []
        deadline = time.monotonic() + limit
        try:
            for spec in specs:
                self._remove(spec.name)
                host_config = self.api.create_host_config(**spec.host_config())
                cid = self.api.create_container(host_config=host_config,
                                                **spec.create_kwargs())["Id"]
                self.api.start(cid)
                started.append(cid)
                kind = spec.name.split("_", 1)[0]
                threading.Thread(target=self._stream, daemon=True,
                                 args=(cid, kind, log_dir, echo)).start()
                waiter = threading.Thread(target=self._wait, daemon=True, name=kind,
                                          args=(cid, kind, time.monotonic(), limit, result))
                waiter.start()
                waiters.append(waiter)
            for waiter in waiters:
                waiter.join(timeout=max(0.0, deadline - time.monotonic()))
            killed = [w.name for w in waiters if w.is_alive()]
            result.timed_out = bool(killed)
        finally:
            for cid in started:
                self._remove(cid)
            for waiter in waiters:  # a removed container's wait returns at once
                waiter.join(timeout=30)
        for kind in killed:  # no exit status of its own: stopped by the limit
            result.exit_codes[kind] = None
        return result

    def _wait(self, cid: str, kind: str, t0: float, limit: int, result: StepResult) -> None:
        try:
            code = self.api.wait(cid, timeout=limit + 5)["StatusCode"]
        except Exception:  # removed at the time limit, or the engine went away
            code = None
        result.exit_codes[kind] = code
        result.elapsed[kind] = time.monotonic() - t0

    def _stream(self, cid: str, kind: str, log_dir: Path, echo) -> None:
        with open(log_dir / f"{kind}.log", "ab") as fh:
            try:
                for chunk in self.api.logs(cid, stream=True, follow=True):
                    fh.write(chunk)
                    fh.flush()
                    for line in chunk.decode(errors="replace").splitlines():
                        echo(f"[{kind}] {line}")
            except Exception:  # the container was removed at the time limit
                pass

    def _remove(self, name_or_id: str) -> None:
        try:
            self.api.remove_container(name_or_id, force=True)
        except self.docker.errors.APIError:
            pass


@dataclass
class DryRunOptions:
    """What ``dry-run`` was asked (the command's options)."""

    submission: Path
    out: Path
    bundle: Path | None = None
    data: Path | None = None
    image: str | None = None
    phase: int = 0
    time_limit_s: int | None = None
    no_network: bool = False
    wheelhouse: Path | None = None
    url: str | None = None
    network_mode: str | None = None
    mounts: list = field(default_factory=list)
    data_dir: Path | None = None
    uv_cache: Path | None = None
    repo: Path | None = None
    keep: bool = False


class DryRun:
    """One replayed run of the worker, in its steps (as Codabench's compute_worker):
    ``prepare`` (folders, zips, image, limit, engine), ``predict`` (the prediction step),
    ``score`` (the scoring step, run whatever the ingestion's exit code), ``push`` (the
    outputs into OUT, the work folder removed). ``run`` does them in turn."""

    def __init__(self, options: DryRunOptions, log=print, echo=print):
        self.o, self.log, self.echo = options, log, echo
        self.out = Path(options.out).resolve()
        self.pred: StepFolders | None = None
        self.sco: StepFolders | None = None

    def run(self) -> DryRunResult:
        self.prepare()
        result = self.predict()
        if result.status == 0:
            result = self.score(result)
        return self.push(result)

    def prepare(self) -> None:
        """Check the options, lay out OUT, fetch the zips and the image, start the engine."""
        o = self.o
        if (o.bundle is None) == (o.data is None):
            raise ChallengeError("give --bundle bundle.zip or --data DATA (one of them)")
        if o.wheelhouse is not None and not Path(o.wheelhouse).is_dir():
            raise ChallengeError(f"--wheelhouse {o.wheelhouse}: no such folder")
        if self.out.exists():
            for name in ("run", "predictions", "scores", "logs"):
                shutil.rmtree(self.out / name, ignore_errors=True)
        self.work = work = worker.make_folder(self.out / "run")
        self.logs = worker.make_folder(self.out / "logs")
        src = self.src = (sources_from_bundle(Path(o.bundle), work, o.phase) if o.bundle is not None
                          else sources_from_data(Path(o.data), work, o.repo))
        self.submission = submission_zip(Path(o.submission).resolve(), work)
        image = o.image or src.image
        if not image:
            raise ChallengeError("--image is required with --data (a bundle names its docker_image)")
        self.limit = o.time_limit_s or worker.time_limit(src.phase_limit, private_queue=src.private_queue)
        self._say_limits(image)
        self.engine = Engine(engine_url(o.url))
        self.engine.ensure_image(image, self.log)
        extra = list(o.mounts)
        if o.uv_cache is not None:
            extra.append(Mount(str(worker.make_folder(Path(o.uv_cache).resolve())),
                               "/var/cache/challenge-welding"))
        data_dir = worker.make_folder(Path(o.data_dir).resolve() if o.data_dir else work / "data")
        if o.wheelhouse is not None:  # its mount point inside the read-only /app/data
            worker.make_folder(data_dir / "wheelhouse")
        self.opts = dict(image=image, data_dir=data_dir, name=f"dry-run-{os.getpid()}",
                         network_mode=o.network_mode, extra_mounts=extra)

    def _say_limits(self, image: str) -> None:
        o, src = self.o, self.src
        self.log(f"dry-run: image {image}, time limit {self.limit} s per step "
                 + ("(--time-limit)" if o.time_limit_s else
                    f"(phase {src.phase_name!r}: {src.phase_limit} s; "
                    + ("private queue)" if src.private_queue else
                       f"default queue: min({worker.DEFAULT_QUEUE_LIMIT_S}, phase))")))
        if o.no_network and o.wheelhouse is None:
            self.log("dry-run: warning: --no-network without --wheelhouse: the submission's "
                     "requirements cannot be installed")
        if os.geteuid() != 0:
            self.log(f"dry-run: note: the worker's folders are owned by uid {os.geteuid()}; Codabench's "
                     "worker runs as root. Under a rootful engine run the dry run as root; rootless "
                     "Podman maps the container's root to you.")

    def predict(self) -> DryRunResult:
        """The prediction step: the submission and the ingestion program over the input data."""
        o, log = self.o, self.log
        pred = self.pred = StepFolders(self.work / "prediction")
        worker.make_folder(pred.root)
        worker.extract(self.submission, pred.program)
        worker.extract(self.src.ingestion_program, pred.ingestion_program)
        worker.extract(self.src.input_data, pred.input_data)
        if worker.copy_submission_without_metadata(pred):
            log("dry-run: the submission has no metadata.yaml: copied into the prediction output "
                "(the worker does this), the ingestion runs it")
        else:
            log("dry-run: the submission has a metadata file: the worker runs its command as a "
                "second container beside the ingestion")
        try:
            specs = worker.prediction_specs(pred, wheelhouse=Path(o.wheelhouse).resolve() if o.wheelhouse else None,
                                            network_disabled=o.no_network, **self.opts)
        except ValueError as exc:
            return DryRunResult(1, str(exc), limit=self.limit)
        log(f"== prediction step: {', '.join(s.name.split('_')[0] for s in specs)}")
        step = self.engine.run_step(specs, self.limit, self.logs, self.echo)
        result = DryRunResult(0, "", prediction=step, limit=self.limit)
        _log_step(step, log)
        if step.timed_out:
            result.status, result.reason = 1, f"Execution Time Limit exceeded. Limit was {self.limit} seconds"
            return result
        try:
            worker.write_metadata(pred.output, exit_code=step.exit_codes.get("program"),
                                  elapsed=step.elapsed.get("program"),
                                  ingestion_exit_code=step.exit_codes.get("ingestion"),
                                  ingestion_elapsed=step.elapsed.get("ingestion"))
        except FileExistsError as exc:
            result.status, result.reason = 1, str(exc)
        return result

    def score(self, result: DryRunResult) -> DryRunResult:
        """The scoring step over the prediction output (Codabench runs it whatever the ingestion's exit code)."""
        sco = self.sco = StepFolders(self.work / "scoring")
        worker.make_folder(sco.root)
        worker.extract(self.src.scoring_program, sco.program)
        worker.extract(self.src.reference_data, sco.input / "ref")
        worker.pass_output(self.pred.output, self.work / "prediction_result.zip", sco.input / "res")
        try:
            spec = worker.scoring_spec(sco, network_disabled=self.o.no_network, **self.opts)
        except ValueError as exc:
            result.status, result.reason = 1, str(exc)
            return result
        self.log("== scoring step")
        step = result.scoring = self.engine.run_step([spec], self.limit, self.logs, self.echo)
        _log_step(step, self.log)
        code = step.exit_codes.get("scoring")
        if step.timed_out:
            result.status, result.reason = 1, f"Execution Time Limit exceeded. Limit was {self.limit} seconds"
        elif code != 0:
            result.status, result.reason = 1, (f"Child task failed or non-zero return code "
                                               f"(scoring program exit status {code})")
        elif not (sco.output / "scores.json").is_file():
            result.status, result.reason = 1, "Could not find scores file, did the scoring program output it?"
        else:
            try:
                result.scores = read_scores(sco.output / "scores.json", "the scoring program wrote a bad scores.json")
            except FileRefused as exc:
                result.status, result.reason = 1, str(exc)
                return result
            worker.write_metadata(sco.output, exit_code=code, elapsed=step.elapsed.get("scoring"),
                                  ingestion_exit_code=None, ingestion_elapsed=None)
            result.reason = "scored"
        return result

    def push(self, result: DryRunResult) -> DryRunResult:
        """The step outputs into OUT/predictions and OUT/scores; the work folder removed unless --keep."""
        out = self.out
        if self.pred is not None and self.pred.output.is_dir():
            shutil.copytree(self.pred.output, out / "predictions", dirs_exist_ok=True)
        if self.sco is not None and self.sco.output.is_dir():
            shutil.copytree(self.sco.output, out / "scores", dirs_exist_ok=True)
        if not self.o.keep:
            shutil.rmtree(out / "run", ignore_errors=True)
        if result.status == 0:
            self.log(f"== scores.json ({out / 'scores' / 'scores.json'}): score {result.scores.get('score')}")
        else:
            self.log(f"dry-run: the submission failed, as Codabench would mark it: {result.reason}")
        return result


def run_dry_run(*, log=print, echo=print, **options) -> DryRunResult:
    """Both steps of the worker for one submission; outputs under ``out`` (options: DryRunOptions)."""
    return DryRun(DryRunOptions(**options), log, echo).run()


def _log_step(step: StepResult, log) -> None:
    for kind, code in step.exit_codes.items():
        log(f"== {kind}: " + (f"exit status {code}" if code is not None else
                              "removed at the time limit")
            + f" after {step.elapsed[kind]:.0f} s")
    if step.timed_out:
        log("== stopped at the time limit: the worker removes the containers")
