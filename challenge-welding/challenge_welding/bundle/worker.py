"""Codabench's compute worker as data: its folders, zip extraction, container options.

Facts from codalab/codabench compute_worker/compute_worker.py (Run.prepare, Run.start,
_run_program_directory, push_output) and competitions/tasks.py:

- every bundle is unpacked with ``ZipFile.extractall`` into folders the worker makes
  with ``os.makedirs`` (mode 0755 under its umask 022, owned by the worker's user);
  extractall keeps no file modes (files 0644);
- a step's containers run the image's own user, working directory /app/program,
  environment ``PYTHONUNBUFFERED=1``, ``http_proxy=``, ``https_proxy=`` (empty unless
  the worker sets COMPETITION_CONTAINER_HTTP(S)_PROXY), 14 capabilities dropped,
  ``no-new-privileges`` (a worker set up with CONTAINER_ENGINE_EXECUTABLE=podman
  passes ``label=disable`` instead; we replay the default, Docker, worker),
  ``userns_mode=host``, no ``shm_size`` (the engine's 64 MB
  /dev/shm), the network on unless COMPETITION_CONTAINER_NETWORK_DISABLED=true;
- mounts: /app/program and /app/output (":z"), the worker's data folder read-only at
  /app/data, /app/ingested_program (the submission, ingestion only), /app/input_data
  (prediction step), /app/shared and /app/input (scoring step), all read-write;
- the prediction step runs the ingestion and, when the submission has a
  ``metadata.yaml`` with a command, the submission as a second container beside it;
  a submission without metadata is copied into the prediction output;
- one alarm of ``execution_time_limit`` seconds covers a step's containers; on the
  default queue the limit is min(MAX_EXECUTION_TIME_LIMIT = 600 s, the phase's);
- after a step the worker writes the YAML file ``metadata`` (exitCode, elapsedTime,
  ingestionExitCode, ingestionElapsedTime) into the output and refuses the step if
  the output already holds one.

Everything here is pure or local-file work; dry_run.py drives an engine with it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from challenge_welding.bundle.codabench_rules import DEFAULT_QUEUE_LIMIT_S

CAP_DROP = ("AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
            "NET_BIND_SERVICE", "NET_RAW", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT")
SECURITY_OPT = ("no-new-privileges",)
WORKER_ENV = ("PYTHONUNBUFFERED=1", "http_proxy=", "https_proxy=")
WORKDIR = "/app/program"
SHM_BYTES = 64 * 1024 * 1024        # Docker's and Podman's default /dev/shm
FOLDER_MODE = 0o755
WORKER_UMASK = 0o022
WHEELHOUSE_ENV = "CHALLENGE_WELDING_WHEELHOUSE"
WHEELHOUSE_IN_CONTAINER = "/app/data/wheelhouse"
METADATA_EXISTS = ("Error, the output directory already contains a metadata file. This file is "
                   "used to store exitCode and other data, do not write to this file manually.")


@dataclass(frozen=True)
class Mount:
    host: str
    container: str
    mode: str = "rw"        # "rw", "ro" or "z" (SELinux relabel, read-write), as the worker

    def bind(self) -> str:
        return f"{self.host}:{self.container}:{self.mode}"


@dataclass
class ContainerSpec:
    """One container as the worker creates it (plus the dry run's declared additions)."""
    name: str
    image: str
    command: str
    mounts: list[Mount]
    environment: list[str] = field(default_factory=lambda: list(WORKER_ENV))
    network_disabled: bool = False
    network_mode: str | None = None    # None: the engine's default network, as the worker
    cap_drop: tuple[str, ...] = CAP_DROP
    security_opt: tuple[str, ...] = SECURITY_OPT
    shm_size: int = SHM_BYTES
    working_dir: str = WORKDIR

    def host_config(self) -> dict:
        """Keyword arguments of docker's APIClient.create_host_config."""
        cfg = dict(binds=[m.bind() for m in self.mounts], cap_drop=list(self.cap_drop),
                   security_opt=list(self.security_opt), shm_size=self.shm_size,
                   userns_mode="host", auto_remove=False)
        if self.network_mode:
            cfg["network_mode"] = self.network_mode
        return cfg

    def create_kwargs(self) -> dict:
        """Keyword arguments of APIClient.create_container (without host_config)."""
        return dict(image=self.image, name=self.name, command=self.command,
                    working_dir=self.working_dir, environment=list(self.environment),
                    volumes=[m.container for m in self.mounts],
                    network_disabled=self.network_disabled, detach=False)


def time_limit(phase_limit: int | None, *, private_queue: bool,
               default_queue_limit: int = DEFAULT_QUEUE_LIMIT_S) -> int:
    """The limit the worker applies (competitions/tasks.py _send_to_compute_worker).

    Default queue: min(MAX_EXECUTION_TIME_LIMIT, phase limit); a private queue: the
    phase's own. A phase without a limit has the model's default, 600 s.
    """
    phase_limit = int(phase_limit or 600)
    return phase_limit if private_queue else min(default_queue_limit, phase_limit)


@contextlib.contextmanager
def worker_umask():
    """Files and folders made inside get the worker's modes (0644 / 0755)."""
    old = os.umask(WORKER_UMASK)
    try:
        yield
    finally:
        os.umask(old)


def make_folder(path: Path) -> Path:
    """A folder as the worker's os.makedirs makes it (0755, owned by whoever runs us)."""
    with worker_umask():
        path.mkdir(parents=True, exist_ok=True)
    return path


def extract(zip_path: Path, dest: Path) -> Path:
    """The worker's _get_bundle: ZipFile.extractall (file modes in the zip are dropped)."""
    with worker_umask(), zipfile.ZipFile(zip_path) as zf:
        zf.extractall(make_folder(dest))
    return dest


def read_command(program_dir: Path) -> str | None:
    """The ``command`` of metadata.yaml (or legacy ``metadata``); None without one."""
    for name in ("metadata.yaml", "metadata"):
        path = program_dir / name
        if path.is_file():
            try:
                meta = yaml.safe_load(path.read_text())
            except yaml.YAMLError:
                return None
            command = meta.get("command") if isinstance(meta, dict) else None
            return command or None
    return None


def has_metadata(program_dir: Path) -> bool:
    return (program_dir / "metadata.yaml").is_file() or (program_dir / "metadata").is_file()


def _below_root(name: str) -> property:
    """The folder ``name`` under the run root (read-only attribute)."""
    return property(lambda self: self.root / name, doc=f"root / {name!r}")


@dataclass
class StepFolders:
    """A step's folders under the worker's run root (Run.__init__ and prepare)."""
    root: Path
    program = _below_root("program")
    ingestion_program = _below_root("ingestion_program")
    input_data = _below_root("input_data")
    input = _below_root("input")
    output = _below_root("output")
    shared = _below_root("shared")


def prediction_specs(run: StepFolders, *, image: str, data_dir: Path, name: str,
                     network_disabled: bool = False, network_mode: str | None = None,
                     wheelhouse: Path | None = None,
                     extra_mounts: list[Mount] = ()) -> list[ContainerSpec]:
    """The prediction step's containers: the ingestion, and the submission's own when it
    has a command (run beside the ingestion, sharing /app/output).

    ``wheelhouse`` (dry run only): mounted read-only at /app/data/wheelhouse, where an
    offline private queue's organisers put it in the worker's data folder, and named
    by CHALLENGE_WELDING_WHEELHOUSE for the ingestion.
    """
    make_folder(run.output)
    common = [Mount(str(run.output), "/app/output", "z"), Mount(str(data_dir), "/app/data", "ro")]
    if wheelhouse is not None:
        common.append(Mount(str(wheelhouse), WHEELHOUSE_IN_CONTAINER, "ro"))
    common += list(extra_mounts)
    ingestion_command = read_command(run.ingestion_program)
    if ingestion_command is None:
        raise ValueError("the ingestion program has no metadata.yaml with a command")
    env = list(WORKER_ENV) + ([f"{WHEELHOUSE_ENV}={WHEELHOUSE_IN_CONTAINER}"] if wheelhouse
                              else [])
    specs = [ContainerSpec(
        name=f"ingestion_{name}", image=image, command=ingestion_command,
        mounts=[Mount(str(run.ingestion_program), "/app/program", "z"), *common,
                Mount(str(run.program), "/app/ingested_program"),
                Mount(str(run.input_data), "/app/input_data")],
        environment=env, network_disabled=network_disabled, network_mode=network_mode)]
    submission_command = read_command(run.program)
    if submission_command is not None:
        specs.insert(0, ContainerSpec(
            name=f"program_{name}", image=image, command=submission_command,
            mounts=[Mount(str(run.program), "/app/program", "z"), *common,
                    Mount(str(run.input_data), "/app/input_data")],
            environment=list(WORKER_ENV), network_disabled=network_disabled,
            network_mode=network_mode))
    return specs


def scoring_spec(run: StepFolders, *, image: str, data_dir: Path, name: str,
                 network_disabled: bool = False, network_mode: str | None = None,
                 extra_mounts: list[Mount] = ()) -> ContainerSpec:
    """The scoring step's container: /app/program, /app/output, /app/data, /app/shared,
    /app/input (ref/ and res/)."""
    for folder in (run.output, run.shared, run.input):
        make_folder(folder)
    command = read_command(run.program)
    if command is None:
        raise ValueError("the scoring program has no metadata.yaml with a command")
    return ContainerSpec(
        name=f"scoring_{name}", image=image, command=command,
        mounts=[Mount(str(run.program), "/app/program", "z"),
                Mount(str(run.output), "/app/output", "z"),
                Mount(str(data_dir), "/app/data", "ro"), *extra_mounts,
                Mount(str(run.shared), "/app/shared"), Mount(str(run.input), "/app/input")],
        network_disabled=network_disabled, network_mode=network_mode)


def copy_submission_without_metadata(run: StepFolders) -> bool:
    """A submission without metadata is results: the worker copies it into the output.

    Returns True when copied (the worker's shutil.copytree into a not yet made output).
    """
    if has_metadata(run.program):
        return False
    shutil.copytree(run.program, run.output, dirs_exist_ok=True)
    return True


def write_metadata(output: Path, *, exit_code, elapsed, ingestion_exit_code,
                   ingestion_elapsed) -> Path:
    """push_output: the YAML ``metadata`` file; refused when the output already has one."""
    path = output / "metadata"
    if path.exists():
        raise FileExistsError(METADATA_EXISTS)
    status = {"exitCode": exit_code, "elapsedTime": elapsed or ingestion_elapsed,
              "ingestionExitCode": ingestion_exit_code, "ingestionElapsedTime": ingestion_elapsed}
    with worker_umask():
        path.write_text(yaml.dump(status, default_flow_style=False))
    return path


def pass_output(output: Path, zip_path: Path, dest: Path) -> Path:
    """The prediction output to the scoring step: zipped (make_archive), then extracted."""
    with worker_umask():
        archive = shutil.make_archive(str(zip_path.with_suffix("")), "zip", output)
    return extract(Path(archive), dest)
