"""``ingest``: run a submission over the evaluation sets and write its predictions.

Pipeline (one :class:`Ingestion` object per run): unpack -> environment
(cached) -> child process (import, load_model) -> per set: predict.py (decode,
hand over, time, validate; answers kept in memory) -> the child and every
process it started are killed -> write.py cleans the output folder and writes
every file from memory through a private folder -> ``PRED/ingestion.json`` with
the files' sha256 manifest, written last.

A faulty submission never raises here: the fault becomes one line in the log
and in ingestion.json (with the submission's traceback), the sets finished
before it stay written, and ``status`` is "failed". Bad evaluation data (a
missing file, a missing column) is the organiser's problem: ChallengeError.
An output folder that cannot be written (no space left, read-only, a file in the
way, no permission) is OutputError (exit status 3), found before the submission
runs where it can be (the folder made and a file written there at the start).

SIGINT (Ctrl-C) or SIGTERM stops the run like a fault: the submission's processes
are killed, the sets finished are written with the log, ``status`` is
"interrupted", then :class:`~challenge_welding.contract.errors.Interrupted`
propagates (exit status 130 or 143). A signal while the outputs are written
lets the writing finish. The run's temporary folders are
:class:`~challenge_welding.contract.files.OwnedFolder`: a killed run's are removed
by the next run (:func:`~challenge_welding.contract.files.remove_stale`).
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import signal
import sys
import threading
import time
import traceback
import dataclasses
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

import challenge_welding
from challenge_welding.contract.names import INPUT_COLUMNS
from challenge_welding.contract.errors import ChallengeError, Interrupted, OutputError
from challenge_welding.contract.files import OwnedFolder, make_folder, remove_stale, writing
from challenge_welding.contract.text import inert, inert_bytes
from challenge_welding.ingestion.confine import reaper, selfcheck
from challenge_welding.ingestion.confine.sandbox import Sandbox
from challenge_welding.ingestion.handover import clock
from challenge_welding.ingestion.handover.buffers import BufferPool, layout
from challenge_welding.ingestion.handover.process import CHILD_SCRIPT, Child, ChildFault
from challenge_welding.ingestion.install import environment as envmod
from challenge_welding.ingestion.install import submission as sub
from challenge_welding.ingestion.options import IngestOptions
from challenge_welding.ingestion.run.decode import buffer_bytes, default_workers, probe
from challenge_welding.ingestion.run.predict import TIMED_SETS, SetAnswers, predict_set
from challenge_welding.ingestion.run.write import (STAGE_PREFIX, clean_output, keep_elsewhere,
                                               manifest, publish, remove_entry, report_bytes,
                                               set_files, snapshot)
from challenge_welding.contract.explanation_maps import file_name as maps_file_name

REPORT_FILE = "ingestion.json"
LOG_FILE = "ingestion.log"
SUBMISSION_LOG = "submission_output.log"
INSTALL_LOG = "install.log"
TEMP_PREFIX = "cw-ingest-"  # the work folder (cw-ingest-*) and the logs' (cw-ingest-out-*)


@dataclass
class RunReport:
    """What ``PRED/ingestion.json`` says; :meth:`to_json` keeps its long-standing keys."""

    submission: str
    input_data: str
    output: str
    versions: dict
    options: dict
    status: str = "running"
    environment: dict = field(default_factory=dict)
    device: dict | None = None
    sets: dict = field(default_factory=dict)
    timings: dict = field(default_factory=lambda: {"sets": {}})
    warnings: list = field(default_factory=list)
    errors: list = field(default_factory=list)
    fault: dict | None = None
    integrity: dict = field(default_factory=dict)
    sandbox: dict = field(default_factory=dict)
    manifest: dict = field(default_factory=dict)
    logs: dict = field(default_factory=lambda: {"ingestion": LOG_FILE,
                                                "submission": SUBMISSION_LOG})
    preexisting: list = field(default_factory=list)  # top-level entries there before the run
    submission_output_bytes: int | None = None
    workdir: str | None = None
    interrupted: dict | None = None  # status "interrupted": the signal and the sets' fate

    def to_json(self) -> dict:
        out = asdict(self)
        for key in ("submission_output_bytes", "workdir", "interrupted"):
            if out[key] is None:
                del out[key]
        return out

    def error(self, line: str, log) -> None:
        line = inert(line)  # it may quote the submission (an install's output, a message)
        self.errors.append(line)
        log(f"error: {line}")

    def warn(self, line: str, log) -> None:
        line = inert(line)
        self.warnings.append(line)
        log(f"warning: {line}")


class _Log:
    """Lines to the terminal (without breaking progress bars) and to PRED/ingestion.log, made
    inert: a line may quote the submission (contract/text.py).

    A log file that cannot be written (its file system full) stops being written, the
    terminal still gets every line, and ``fault`` keeps the first error's line: a full
    temporary folder must not end the run in a traceback."""

    def __init__(self, path: Path, verbose: bool = True):
        with writing(path, "the ingestion log"):
            self.fh = open(path, "w", encoding="utf-8")
        self.path, self.verbose = path, verbose
        self.fault: str | None = None

    def __call__(self, line: str) -> None:
        from tqdm import tqdm

        line = inert(line)
        if self.verbose:
            tqdm.write(line, file=sys.stderr)
        self.file_only(line)

    def file_only(self, line: str) -> None:
        """A line for the log file alone (one the caller prints itself)."""
        line = inert(line)
        if self.fault is None:
            try:
                with writing(self.path, "the ingestion log"):
                    self.fh.write(line + "\n")
                    self.fh.flush()
            except OutputError as exc:
                self.fault = str(exc)

    def close(self) -> None:
        with contextlib.suppress(OSError):  # already said by ``fault``
            self.fh.close()


class _Signals:
    """SIGINT and SIGTERM during a run: the first raises Interrupted in the main thread (the
    ``finally`` blocks kill the submission's processes on the way out); later ones, and any
    once :meth:`disarm` ed (the outputs being written), are only noted, so the writing ends.
    Off the main thread Python delivers no signal to us: nothing is installed."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        self.armed = False
        self.received: list[int] = []
        self._old: dict = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                self._old[sig] = signal.signal(sig, self._handle)
            self.armed = True
        return self

    def _handle(self, signum, _frame):
        self.received.append(signum)
        if self.armed:
            self.armed = False
            raise Interrupted(signum)

    def disarm(self) -> None:
        self.armed = False

    def __exit__(self, *_exc):
        for sig, old in self._old.items():
            signal.signal(sig, signal.SIG_DFL if old is None else old)


def _previous_run(output: Path, sets) -> str | None:
    """One line on the run whose ingestion.json is in ``output`` (about to be replaced):
    what it finished and what this run redoes; None when there is none. The file is read
    as untrusted (a user's or anyone's): plain strings only."""
    path = output / REPORT_FILE
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > 16 << 20:
            return None
        old = json.loads(path.read_text(encoding="utf-8"))
        status = str(old["status"])
        done = sorted(str(n) for n, info in old["sets"].items() if info.get("status") == "ok")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if status == "ok":
        return None
    undone = [n for n in sets if n not in done]
    return (f"{output} holds an earlier run with status {status!r} (finished: "
            f"{', '.join(done) or 'none'}; not finished: {', '.join(undone) or 'none'}): this "
            f"run redoes every set ({', '.join(sets)}) and replaces its files")


def _load_sets(input_data: Path, names, log, report) -> dict:
    """Read every present set's metadata; check columns and files. Missing sets are skipped."""
    if not input_data.is_dir():
        raise ChallengeError(f"input data folder not found: {input_data}")
    import pandas as pd

    sets = {}
    for name in names:
        meta = input_data / name / "metadata.parquet"
        if not meta.is_file():
            msg = f"{name}: no {meta.relative_to(input_data)} in {input_data}, set skipped"
            report.warn(msg, log)
            report.sets[name] = {"status": "skipped"}
            continue
        try:
            df = pd.read_parquet(meta)
        except Exception as exc:  # pyarrow raises many types
            raise ChallengeError(f"{meta}: unreadable parquet file ({exc})") from None
        missing = [c for c in INPUT_COLUMNS if c not in df.columns]
        if missing:
            raise ChallengeError(f"{meta}: missing column(s) {missing}; expected {list(INPUT_COLUMNS)}")
        if df["sample_id"].duplicated().any():
            dup = df.loc[df["sample_id"].duplicated(), "sample_id"].iloc[0]
            raise ChallengeError(f"{meta}: duplicate sample_id {dup!r}")
        paths = _resolve_paths(df["path"], input_data / name, input_data)
        absent = [p for p in paths if not os.path.isfile(p)]
        if absent:
            raise ChallengeError(f"{meta}: {len(absent)} image file(s) not found, e.g. {absent[:3]}")
        sets[name] = (df, paths)
    if not sets:
        raise ChallengeError(f"{input_data}: none of the sets {', '.join(names)} is present "
                             "(expected <set>/metadata.parquet)")
    return sets


def _resolve_paths(paths, set_dir: Path, input_data: Path) -> list[str]:
    """Image paths as written in metadata.parquet: relative to the set's folder (the
    contract's ``images/<id>.jpeg``), else to the input-data folder, or absolute."""
    paths = [str(p) for p in paths]
    base = set_dir
    if paths and not (set_dir / paths[0]).is_file() and (input_data / paths[0]).is_file():
        base = input_data
    return [str(base / p) for p in paths]


def _meta(df) -> list[dict]:
    """Per image only what the interface promises: welding-seams and resolution [w, h]."""
    out = []
    for seam, res in zip(df["welding-seams"], df["resolution"]):
        res = None if res is None else [int(v) for v in res]
        out.append({"welding-seams": None if seam is None else str(seam), "resolution": res})
    return out


def _versions() -> dict:
    import cv2

    return {"challenge_welding": challenge_welding.__version__,
            "python": platform.python_version(), "numpy": np.__version__,
            "opencv": cv2.__version__, "platform": platform.platform()}


def _summary(report: RunReport) -> str:
    rows = [("set", "status", "images", "wall s", "img/s", "median ms/img", "p95 ms/img")]
    for name, info in report.sets.items():
        t = report.timings["sets"].get(name, {})
        rows.append((name, info["status"], str(info.get("n", "")),
                     f"{t['wall_s']:.1f}" if t else "", f"{t['images_per_s']:.1f}" if t else "",
                     f"{1000 * t['time_median']:.2f}" if t else "",
                     f"{1000 * t['time_p95']:.2f}" if t else ""))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in
                       enumerate(zip(r, widths))) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def ingest(submission, input_data, output, options: IngestOptions | None = None, **changes) -> dict:
    """Run ``submission`` (zip or folder) over ``input_data``; write predictions to ``output``.

    Returns the content of ``output/ingestion.json``. ``options``: an IngestOptions
    (options.py: each option, its default and its check), ``changes`` the options set by
    keyword on top of it (``ingest(s, i, o, batch_size=4, sets=["performance"])``).

    Every file of the output is written last, from memory, once every process of the
    submission is dead (write.py): nothing the submission did to the output folder
    survives, and ingestion.json's manifest holds each file's sha256.
    """
    options = IngestOptions(**changes) if options is None else dataclasses.replace(options, **changes)
    return Ingestion(submission, input_data, output, options).run()


# Below this, what the scratch holds did not fill a file system (a full disk of ours)
FILL_MIN_BYTES = 1 << 20


def filled_by_submission(err: int | None, held: int, same_fs: bool, free: int | None,
                         scratch, what: str) -> str | None:
    """The error line when the submission filled the file system our write failed on, else
    None (the fault is ours).

    Its fault when the write failed for want of space (ENOSPC, EDQUOT), its scratch folder is
    on that file system and holds at least ``FILL_MIN_BYTES``; ``free``: bytes free there
    now (None: unknown).

    >>> filled_by_submission(28, 50 << 20, True, 0, "/tmp/w/scratch", "the submission's log")
    "the submission filled the file system: it wrote 50.0 MiB into its scratch folder /tmp/w/scratch (0 bytes left free there), so the submission's log could not be written: write less there (a run's scratch is for small temporary files)"
    >>> filled_by_submission(28, 10, True, 0, "/tmp/w/scratch", "x") is None
    True
    """
    import errno as errnos

    if err not in (errnos.ENOSPC, errnos.EDQUOT) or not same_fs or held < FILL_MIN_BYTES:
        return None
    left = f" ({_size(free)} left free there)" if free is not None else ""
    return (f"the submission filled the file system: it wrote {_size(held)} into its scratch "
            f"folder {scratch}{left}, so {what} could not be written: write less there (a "
            "run's scratch is for small temporary files)")


def _size(n: int) -> str:
    return f"{n} bytes" if n < 1024 else f"{n / 1024:.1f} KiB" if n < 1 << 20 \
        else f"{n / (1 << 20):.1f} MiB"


def _bytes_under(folder) -> int:
    """Bytes on disk under ``folder`` (blocks of regular files; links not followed)."""
    total = 0
    for dirpath, _dirs, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                pass
    return total


class Ingestion:
    """One run of ``ingest``: its options, report, log and answers, and the steps over them.

    The logs are written during the run in a private folder outside the output (the
    submission could reach anything in the output) and published with the predictions.
    """

    def __init__(self, submission, input_data, output, options: IngestOptions):
        self.opt = opt = options
        self.submission, self.input_data = Path(submission), Path(input_data)
        self.output = output = make_folder(output, "the prediction folder")
        previous = _previous_run(output, opt.sets)
        with writing(output, "the prediction folder"):
            # stale predictions from an earlier run must never be scored (files, links or folders)
            for stale in [f"{name}.parquet" for name in opt.sets] + \
                    [maps_file_name(name) for name in opt.sets] + \
                    [REPORT_FILE, INSTALL_LOG, SUBMISSION_LOG, LOG_FILE]:
                remove_entry(output / stale)
            # a killed run's staging folder goes; making one proves the folder writable now,
            # before the submission runs, not after
            swept = remove_stale(STAGE_PREFIX, output)
            OwnedFolder(STAGE_PREFIX, dir=output).remove()
        swept += remove_stale(TEMP_PREFIX)
        # the user's own files (on Codabench: the submission's copy the worker puts there)
        self.before = snapshot(output)
        self.report = RunReport(
            submission=str(submission), input_data=str(input_data), output=str(output),
            versions=_versions(),
            options={k: getattr(opt, k) for k in ("batch_size", "isolation", "installer", "no_index",
                                         "batch_timeout", "total_timeout", "load_timeout",
                                         "warmup", "exclusive_predict", "decode_stock_mb")})
        self._private = OwnedFolder(TEMP_PREFIX + "out-")  # the logs, until published
        self.private = self._private.path
        self.log = _Log(self.private / LOG_FILE, opt.verbose)
        if previous:
            self.log(f"note: {previous}")
        if swept:
            self.log(f"note: removed {len(swept)} temporary folder(s) that killed runs left: "
                     + listed(swept, 3))
        self.answers: dict[str, SetAnswers] = {}
        self.scratch: Path | None = None  # the child's scratch folder, once made
        self.deadline: float | None = None
        self.sets: dict = {}
        # the hand-over buffers, made beside the child's start (_make_pool)
        self.pool: BufferPool | None = None
        self.stock_bytes = 0
        self.pool_error: Exception | None = None
        # the sandbox (sandbox.py, selfcheck.py): every evaluator module loaded, its files hashed
        selfcheck.preload()
        self.evaluator_before = selfcheck.fingerprint()
        # what a user of its own must read where no mount namespace binds it back
        reach = [os.path.realpath(opt.python or sys.executable),
                 opt.cache_dir or envmod.default_cache_dir(), envmod.find_uv()]
        self.box = Sandbox.for_run(self.input_data, output, opt.isolation,
                                   not opt.no_network, opt.run_network,
                                   int(opt.max_processes), [CHILD_SCRIPT], reach=reach)
        self.box.unsafe = bool(opt.unsafe_unconfined)
        if not (self.box.files_confined() or self.box.unsafe):
            raise ChallengeError(self.box.refusal())
        self.log(self.box.layers_line())
        self.report.sandbox = self.box.describe()
        if self.box.warning():
            self.report.warn(self.box.warning(), self.log)

    # -- the run ----------------------------------------------------------------------------
    def run(self) -> dict:
        with _Signals() as signals:
            return self._run(signals)

    def _run(self, signals: _Signals) -> dict:
        opt, report = self.opt, self.report
        t_start, clock_start = time.perf_counter(), clock.read()
        owned = OwnedFolder(TEMP_PREFIX, dir=opt.work_parent)
        workdir = owned.path
        if opt.keep_workdir:
            report.workdir = str(workdir)
        failure = interrupted = None
        try:
            with reaper.guarded() as subreaper:
                report.integrity = {"timing": "measured by the evaluator: hand-over to answer",
                                    "subreaper": subreaper, "wire": "json-frames"}
                try:
                    self.sets = _load_sets(self.input_data, opt.sets, self.log, report)
                    self._run_submission(workdir, self.sets)
                except ChallengeError as exc:  # raised again below: the caller prints it
                    failure = exc
                    report.errors.append(str(exc))
                    self.log.file_only(f"error: {exc}")
        except Interrupted as exc:  # the submission's processes are dead (finally blocks)
            interrupted = exc
        finally:
            signals.disarm()
            if opt.keep_workdir:
                self.box.disown(workdir)  # no file of the sandbox's user outlives the run
                owned.keep()
            else:
                owned.remove()
            self.box.release()  # the ACL entries made for the run (sandbox.choose_user)
        self.box.restore_modes()  # every process of it dead; before we write (Sandbox)
        litter = report.sandbox["litter_removed"] = self.box.litter
        if litter:
            report.warn(f"the submission left {len(litter)} file(s) or folder(s) in the "
                        f"machine's shared folders (removed): {listed(litter)}", self.log)
        restored = report.sandbox["modes_restored"] = self.box.modes_restored
        if restored:
            report.warn(f"the submission changed the modes of {len(restored)} of our files and "
                        f"folders (restored): {listed(restored)}", self.log)
        for name in opt.sets:
            report.sets.setdefault(name, {"status": "not run"})
        for info in report.sets.values():
            if info["status"] == "running":
                info["status"] = "interrupted" if interrupted else "failed"
        if interrupted:
            self._note_interrupted(interrupted)
        changed = selfcheck.changes(self.evaluator_before, selfcheck.fingerprint())
        report.sandbox["evaluator_files"] = {"hashed": len(self.evaluator_before),
                                             "changed": changed}
        if changed:
            report.error(selfcheck.change_line(changed), self.log)
        report.integrity["clock"] = clock.verdict(clock_start, clock.read())
        if clock.warning(report.integrity["clock"]):
            report.warn(clock.warning(report.integrity["clock"]), self.log)
        report.status = "interrupted" if interrupted else "failed" if report.errors else "ok"
        report.timings["total_s"] = time.perf_counter() - t_start
        self._publish(failure is None)
        if failure is not None:
            raise failure
        if interrupted:
            interrupted.said = bool(self.opt.verbose)  # the error line is on the terminal
            raise interrupted
        return report.to_json()

    def _note_interrupted(self, stop: Interrupted) -> None:
        """ingestion.json's ``interrupted``, and the one line that says it."""
        sets = self.report.sets
        done = [n for n, info in sets.items() if info["status"] == "ok"]
        cut = [n for n, info in sets.items() if info["status"] == "interrupted"]
        undone = [n for n, info in sets.items() if info["status"] != "ok"]
        self.report.interrupted = {"signal": signal.Signals(stop.signum).name, "finished": done,
                                   "cut": cut, "not_finished": undone}
        self.report.error(
            f"interrupted by {signal.Signals(stop.signum).name}"
            + (f" during set {cut[0]}" if cut else "")
            + f": the sets finished are written ({', '.join(done) or 'none'}); not finished: "
            f"{', '.join(undone) or 'none'}; a re-run redoes every set", self.log)

    def _publish(self, summary: bool) -> None:
        """Every process of the submission is dead: clean the output folder, then write it."""
        report, log = self.report, self.log
        files = set_files(self.answers)
        ours = set(files) | set(self._log_names().values()) | {REPORT_FILE}
        removed, changed = clean_output(self.output, ours, self.before)
        if removed:
            report.warn(f"removed {len(removed)} entr{'ies' if len(removed) > 1 else 'y'} the "
                        f"submission left in the output folder: {listed(removed)}", log)
        if changed:
            report.error(f"the submission changed {len(changed)} file(s) that were in the output "
                         f"folder before the run: {', '.join(changed[:5])}", log)
            report.status = "failed"
        report.preexisting = sorted({p.split(os.sep)[0] for p in self.before} - ours)
        if summary:
            log("\n" + _summary(report))
            log(f"ingestion {report.status} in {report.timings['total_s']:.1f} s; "
                f"predictions in {self.output}")
        if log.fault:
            report.warnings.append(f"the ingestion log is incomplete: {log.fault}")
        log.close()
        report.manifest = manifest(files)
        report.logs = self._log_names()
        everything = {**files, **{name: inert_bytes((self.private / name).read_bytes())
                                  for name in report.logs.values()}}
        everything[REPORT_FILE] = report_bytes(report.to_json())  # moved last
        kept = False
        try:
            publish(self.output, everything)
        except OutputError as exc:  # nothing was moved: keep what the run made elsewhere
            kept = keep_elsewhere(self.private, everything)
            if not kept:
                raise
            raise OutputError(f"{exc} (this run's predictions, ingestion.json and log are kept "
                              f"in {self.private})", exc.os_error) from None
        finally:
            if kept:
                self._private.keep()
            else:
                self._private.remove()

    def _log_names(self) -> dict:
        """{kind: file name} of the logs written so far (published beside the predictions)."""
        kinds = {"ingestion": LOG_FILE, "submission": SUBMISSION_LOG, "install": INSTALL_LOG}
        return {k: name for k, name in kinds.items() if (self.private / name).is_file()}

    def _run_submission(self, workdir: Path, sets: dict) -> None:
        """Prepare the child, run the sets, and end the child and all its processes."""
        child = None
        try:
            child = self._prepare(workdir)
            if child is not None:
                self._run_sets(child, sets)
        except ChildFault as fault:  # before any set ran (import, load_model)
            self._record_fault(fault)
        except ChallengeError:
            raise
        except Exception as exc:  # any failure of ours while the submission runs
            self._record_fault(ChildFault(
                f"the evaluator failed while running the submission ({type(exc).__name__}: "
                f"{str(exc)[:200]})", traceback.format_exc(), "evaluator"))
        finally:
            if self.pool is not None:
                self.pool.close()
            if child is not None:
                if isinstance(sys.exc_info()[1], Interrupted):
                    child.kill()  # stopped mid-call, it would not read a stop message in time
                else:
                    child.stop()
                self.report.integrity["processes_killed"] = child.killed_processes
                if child.survivors:  # the sandbox's group kill did not finish
                    self.report.error(f"{child.survivors} process(es) of the submission survived "
                                      "the kill at the end of the run: its output is not "
                                      "trusted", self.log)
                self._note_output(child)

    def _record_fault(self, fault: ChildFault, set_name: str | None = None) -> None:
        report, log = self.report, self.log
        report.error(fault.line if set_name is None else f"{set_name}: {fault.line}", log)
        report.fault = {"stage": fault.stage, "set": set_name, "message": fault.line,
                        "traceback": fault.details}
        if fault.details and fault.stage != "evaluator":  # ours stays in ingestion.json only
            log("  " + "\n  ".join(fault.details.rstrip().splitlines()))

    def _note_output(self, child: Child) -> None:
        out = child.output
        self.report.submission_output_bytes = out.total
        if out.fault is not None:
            self._disk_fault(out.fault, self.private / SUBMISSION_LOG, "the submission's log")
        elif out.dropped:
            self.report.warn(f"the submission wrote {out.total / 1e6:.1f} MB to stdout/stderr; "
                             f"{SUBMISSION_LOG} keeps the first {self.opt.max_log_mb:g} MB and "
                             "the last 16 KB", self.log)

    def _disk_fault(self, exc: OSError, path: Path, what: str) -> None:
        """A write of ours failed while the submission ran: the submission's fault when its
        scratch, on the same file system, holds what filled it (one error line, the run
        failed: exit status 1); ours otherwise (one OutputError line, exit status 3)."""
        scratch = self.scratch
        held = _bytes_under(scratch) if scratch is not None else 0
        try:
            same = os.stat(scratch).st_dev == os.stat(path.parent).st_dev
            free = shutil.disk_usage(path.parent).free
        except (OSError, TypeError):
            same, free = False, None
        line = filled_by_submission(exc.errno, held, same, free, scratch, what)
        if line is None:
            with writing(path, what):
                raise exc
        self.report.error(line, self.log)

    def _prepare(self, workdir: Path) -> Child | None:  # 61 lines: the steps before a set, in order
        """Unpack, install, start the child and load the model. None when the submission is
        unusable."""
        opt, report, log = self.opt, self.report, self.log
        t0 = time.perf_counter()
        if not self.submission.exists():
            raise ChallengeError(f"submission not found: {self.submission}")
        try:
            with writing(workdir, "the submission's copy in the temporary folder"):
                root = sub.unpack(self.submission, workdir)
        except OutputError:  # our disk (a full temporary folder), not the submission
            raise
        except ChallengeError as exc:  # a broken or unsafe zip: the submission's fault
            report.error(f"submission: {exc}", log)
            return None
        problems = sub.layout_problems(root)
        report.warnings += [str(p) for p in problems if not p.fatal]
        if any(p.fatal for p in problems):
            for p in problems:
                if p.fatal:
                    report.error(f"submission layout: {p}", log)
            return None
        try:
            env = envmod.prepare_environment(
                root, workdir, isolation=opt.isolation, cache_dir=opt.cache_dir,
                installer=opt.installer, wheelhouse=opt.wheelhouse,
                no_index=opt.no_index, timeout=opt.install_timeout,
                log=log if not opt.install_progress else lambda s: (log(s), opt.install_progress(s)),
                sandbox=self.box, python=opt.python,
                allow_source_builds=opt.allow_source_builds)
        except envmod.InstallError as exc:
            report.errors.append(f"install: {exc}".splitlines()[0])
            report.fault = {"stage": "install", "set": None, "message": str(exc).splitlines()[0],
                            "traceback": str(exc)}
            log(f"error: install: {exc}")
            if (workdir / INSTALL_LOG).is_file():
                shutil.copy(workdir / INSTALL_LOG, self.private / INSTALL_LOG)
            return None
        for note in env.notes:
            log(f"note: {note}")
        report.environment = {"kind": env.kind, "installer": env.installer, "key": env.key,
                              "path": env.path, "cached": env.cached, "python": env.python,
                              "interface": env.interface, "notes": env.notes}
        report.timings["install_s"] = time.perf_counter() - t0
        device, why = (opt.device, "set by --device") if opt.device \
            else envmod.detect_device()
        report.device = {"name": device, "reason": why}
        log(f"device: {device} ({why})")
        confine = self._confinement(env, root, workdir)
        try:
            child = Child(env.python, env.pythonpath, cwd=root,
                          log_path=self.private / SUBMISSION_LOG,
                          max_log_bytes=int(opt.max_log_mb * (1 << 20)), confine=confine,
                          extra_env=confine.env, max_processes=confine.max_processes)
        except OSError as exc:
            raise ChildFault(f"could not start the submission's Python {env.python}: {exc}",
                             "", "import") from None
        t1 = time.perf_counter()
        prefill = threading.Thread(target=self._make_pool, args=(child,), name="prefill")
        prefill.start()  # while the child imports and loads its model
        try:
            ready = child.start(timeout=opt.load_timeout)
        finally:
            prefill.join()  # never during a set
        report.timings["load_model_s"] = ready["load_s"]
        report.timings["start_s"] = time.perf_counter() - t1
        report.versions["submission_python"] = ready["python"]
        report.versions["submission_numpy"] = ready["numpy"]
        report.device["passed"] = ready["accepts_device"]
        child.device = device if ready["accepts_device"] else None
        log(f"component loaded from {ready['module_file']} (python {ready['python']}, numpy "
            f"{ready['numpy']}; load_model {ready['load_s']:.2f} s; predict "
            + ("accepts device" if ready["accepts_device"] else "has no device parameter") + ")")
        return child

    def _confinement(self, env, root: Path, workdir: Path):
        """The child's sandbox: reads its environment and the submission, writes a scratch
        folder (its HOME and temp dir); what is in force goes to ingestion.json."""
        scratch = workdir / "scratch"
        (scratch / "tmp").mkdir(parents=True, exist_ok=True)
        self.scratch = scratch
        confine = self.box.run(env.path or sys.prefix, [str(root), *env.pythonpath],
                               [str(scratch)], scratch_dirs=("tmp",))
        confine.env = {"HOME": str(scratch), "TMPDIR": str(scratch / "tmp"),
                       "TEMP": str(scratch / "tmp"), "TMP": str(scratch / "tmp"),
                       "XDG_CACHE_HOME": str(scratch / ".cache")}
        self.report.sandbox["install"] = self.box.installed
        self.report.sandbox["run"] = confine.describe()
        return confine

    def _make_pool(self, child: Child) -> None:
        """The hand-over buffers (self.pool) and the decoded stock's size (self.stock_bytes);
        a stock's worth of buffers for the first set's first batch made and written now.
        Runs beside child.start(): errors are kept for _run_sets to raise."""
        opt = self.opt
        try:
            workers = int(opt.workers or default_workers())
            stock_bytes = int(float(opt.decode_stock_mb) * (1 << 20))
            # a stock decoded ahead lives in our process: only when the child cannot read it
            ahead = stock_bytes > 0 and not child.can_ptrace()
            self.report.integrity["decode_ahead"] = ahead
            self.stock_bytes = stock_bytes if ahead else 0
            # spares for the first stock, made while the child loads (buffers are never
            # reused once handed over: buffers.py)
            self.pool = BufferPool(keep=workers + 3 + self.stock_bytes // (8 << 20))
            first = next((paths[:int(opt.batch_size)] for _df, paths in self.sets.values()
                          if len(paths)), [])
            shapes = [probe(p) for p in first]
            if first and all(shapes):
                # sized for a batch of the largest of these images: with mixed resolutions
                # a smaller buffer would not fit the next full-HD batch and sit unused
                largest = max(shapes, key=lambda s: s[0] * s[1])
                size = buffer_bytes(layout([largest] * int(opt.batch_size))[1])
                # the stock, one batch held by the child, and the look-ahead of untimed sets;
                # short of memory, buffers are made when needed (and a real shortage is
                # reported there, naming the batch)
                with contextlib.suppress(OSError):
                    self.pool.prefill(size, max(self.stock_bytes // size, workers + 2) + 1)
        except Exception as exc:  # raised again in the main thread
            self.pool_error = exc

    def _run_sets(self, child: Child, sets: dict) -> None:
        """Predict the sets in turn; keep each set's answers; stop at the first fault."""
        opt, integrity = self.opt, self.report.integrity
        workers = int(opt.workers or default_workers())
        if opt.total_timeout:
            self.deadline = time.monotonic() + float(opt.total_timeout)
        if self.pool_error is not None:
            raise self.pool_error
        pool, stock_bytes = self.pool, self.stock_bytes
        pace = dict(batch_size=int(opt.batch_size), workers=workers,
                    warmup=bool(opt.warmup),
                    stock_bytes=stock_bytes, timeout=self._timeout)
        try:
            for k, (name, (df, paths)) in enumerate(sets.items()):
                if not self._predict_set(child, pool, name, df, paths, first=k == 0, **pace):
                    return
        finally:
            integrity["buffers"] = {"made": pool.made, "spares_used": pool.reused,
                                    "kind": pool.kind, "collapsed": pool.collapsed}

    def _predict_set(self, child, pool, name, df, paths, **pace) -> bool:
        """One set: predict, keep the answers, report; False when the submission failed."""
        report, log, opt = self.report, self.log, self.opt
        n = len(df)
        report.sets[name] = {"status": "running", "n": n}
        exclusive = opt.exclusive_predict == "all" or (
            opt.exclusive_predict == "timed" and name in TIMED_SETS)
        bar = _bar(name, n, opt.progress)
        try:
            ans = predict_set(child, pool, name, [str(s) for s in df["sample_id"]], paths,
                              _meta(df), exclusive=exclusive, progress=bar.update, **pace)
        except ChildFault as fault:
            report.sets[name]["status"] = "failed"
            self._record_fault(fault, name)
            return False
        finally:
            bar.close()
        self.answers[name] = ans
        for line in ans.notes.lines(f"{name}: "):
            report.warn(line, log)
        report.sets[name].update(status="ok", file=f"{name}.parquet")
        if ans.maps is not None:
            report.sets[name]["explainability"] = maps_file_name(name)
        t = dict(ans.timings)
        for key in ("warmup_s", "handover_overhead_s", "handover_batch"):
            if key in t:
                report.timings[key] = t.pop(key)
        report.timings["sets"][name] = t
        if "handover_overhead_s" in report.timings:
            report.integrity["handover_overhead_s"] = report.timings["handover_overhead_s"]
            report.integrity["handover_batch"] = report.timings["handover_batch"]
        log(f"{name}: {n} images in {t['wall_s']:.1f} s ({t['images_per_s']:.1f} img/s); "
            f"{1000 * t['time_median']:.2f} ms/img median, {1000 * t['time_p95']:.2f} p95")
        return True

    def _timeout(self) -> tuple[float | None, str]:
        """Seconds left for the next call, and which limit that is."""
        t, limit = self.opt.batch_timeout, "the per-batch time limit"
        if self.deadline is not None:
            left = max(0.0, self.deadline - time.monotonic())
            if t is None or left < float(t):
                t, limit = left, f"the total time limit of {self.opt.total_timeout:g} s"
        return t, limit


def _bar(name: str, n: int, progress: bool):
    """A live progress bar on a terminal; nothing in a log (one line per set is logged)."""
    from tqdm import tqdm

    return tqdm(total=n, desc=f"{name:>14}", unit="img", file=sys.stderr, leave=True,
                disable=not (progress and sys.stderr.isatty()), dynamic_ncols=True)


def listed(paths: list, n: int = 5) -> str:
    """The first ``n`` of ``paths`` for a note or warning line, " ..." when there are more."""
    return ", ".join(str(p) for p in paths[:n]) + (" ..." if len(paths) > n else "")
