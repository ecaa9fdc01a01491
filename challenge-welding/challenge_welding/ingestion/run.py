"""``ingest``: run a submission over the evaluation sets and write its predictions.

Pipeline: unpack -> environment (cached) -> child process (import, load_model)
-> per set: background decode into shared memory -> predict in the child ->
validate -> ``PRED/<set>.parquet`` written atomically -> ``PRED/ingestion.json``.

A faulty submission never raises here: the fault becomes one line in the log
and in ingestion.json (with the submission's traceback), the sets finished
before it stay written, and ``status`` is "failed". Bad evaluation data (a
missing file, a missing column) is the organiser's problem: ChallengeError.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import challenge_welding
from challenge_welding.constants import INPUT_COLUMNS, PRED_COLUMNS, SET_NAMES
from challenge_welding.errors import ChallengeError
from challenge_welding.ingestion import environment as envmod
from challenge_welding.ingestion import submission as sub
from challenge_welding.ingestion.decode import DecodeStats, Prefetcher, default_workers
from challenge_welding.ingestion.process import Child, ChildFault
from challenge_welding.ingestion.protocol import SlotPool
from challenge_welding.ingestion.validate import Notes, OutputError, validate_output

# The starter kit's perform_grouped_inference() defaults to batch_size=10.
DEFAULTS = dict(
    batch_size=10, device=None, isolation=True, cache_dir=None, installer="auto",
    wheelhouse=None, no_index=False, batch_timeout=600.0, total_timeout=None,
    load_timeout=1800.0, install_timeout=1800.0, workers=None, max_log_mb=20.0, warmup=True,
    sets=None, progress=True, verbose=True, keep_workdir=False, exclusive_predict=False,
)
REPORT_FILE = "ingestion.json"
LOG_FILE = "ingestion.log"
SUBMISSION_LOG = "submission_output.log"


class _Log:
    """Lines to the terminal (without breaking progress bars) and to PRED/ingestion.log."""

    def __init__(self, path: Path, verbose: bool = True):
        self.fh = open(path, "w", encoding="utf-8")
        self.verbose = verbose

    def __call__(self, line: str) -> None:
        from tqdm import tqdm

        if self.verbose:
            tqdm.write(line, file=sys.stderr)
        self.fh.write(line + "\n")
        self.fh.flush()

    def close(self) -> None:
        self.fh.close()


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
            log(f"warning: {msg}")
            report["warnings"].append(msg)
            report["sets"][name] = {"status": "skipped"}
            continue
        try:
            df = pd.read_parquet(meta)
        except Exception as exc:  # noqa: BLE001 - pyarrow raises many types
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


def _write_parquet(path: Path, frame) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    frame.to_parquet(tmp, index=False)
    os.replace(tmp, path)  # atomic: a set file is either complete or absent


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    os.replace(tmp, path)


def _versions() -> dict:
    import cv2

    return {"challenge_welding": challenge_welding.__version__,
            "python": platform.python_version(), "numpy": np.__version__,
            "opencv": cv2.__version__, "platform": platform.platform()}


def _summary(report: dict) -> str:
    rows = [("set", "status", "images", "wall s", "img/s", "median ms/img", "p95 ms/img")]
    for name, info in report["sets"].items():
        t = report["timings"]["sets"].get(name, {})
        rows.append((name, info["status"], str(info.get("n", "")),
                     f"{t['wall_s']:.1f}" if t else "", f"{t['images_per_s']:.1f}" if t else "",
                     f"{1000 * t['time_median']:.2f}" if t else "",
                     f"{1000 * t['time_p95']:.2f}" if t else ""))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in
                       enumerate(zip(r, widths))) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def ingest(submission, input_data, output, **options) -> dict:
    """Run ``submission`` (zip or folder) over ``input_data``; write predictions to ``output``.

    Returns the content of ``output/ingestion.json``. Options (see DEFAULTS):
    batch_size, device ("cuda"/"cpu"/None = auto), isolation, cache_dir,
    installer ("auto"/"uv"/"pip"), wheelhouse, no_index, batch_timeout,
    total_timeout, load_timeout, install_timeout (seconds), workers (decode
    threads), max_log_mb, warmup, sets (subset of SET_NAMES), progress (bars),
    verbose (log lines on stderr; the log file is always written), keep_workdir,
    exclusive_predict (no decoding while predict runs: timing free of our CPU use).
    """
    unknown = set(options) - set(DEFAULTS)
    if unknown:
        raise TypeError(f"unknown ingest option(s): {sorted(unknown)}")
    opt = {**DEFAULTS, **options}
    if int(opt["batch_size"]) < 1:
        raise ChallengeError(f"batch size must be >= 1, got {opt['batch_size']}")
    submission, input_data, output = Path(submission), Path(input_data), Path(output)
    output.mkdir(parents=True, exist_ok=True)
    names = list(opt["sets"] or SET_NAMES)
    bad = [n for n in names if n not in SET_NAMES]
    if bad:
        raise ChallengeError(f"unknown set(s) {bad}; sets are {', '.join(SET_NAMES)}")
    for name in names:  # stale predictions from an earlier run must never be scored
        (output / f"{name}.parquet").unlink(missing_ok=True)
    for stale in (REPORT_FILE, "install.log", SUBMISSION_LOG):
        (output / stale).unlink(missing_ok=True)
    report = {"status": "running", "submission": str(submission), "input_data": str(input_data),
              "output": str(output), "versions": _versions(),
              "options": {k: opt[k] for k in ("batch_size", "isolation", "installer", "no_index",
                                              "batch_timeout", "total_timeout", "load_timeout",
                                              "warmup", "exclusive_predict")},
              "environment": {}, "device": None, "sets": {},
              "timings": {"sets": {}}, "warnings": [], "errors": [], "fault": None,
              "logs": {"ingestion": LOG_FILE, "submission": SUBMISSION_LOG}}
    log = _Log(output / LOG_FILE, opt["verbose"])
    t_start = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="cw-ingest-"))
    if opt["keep_workdir"]:
        report["workdir"] = str(workdir)
    child = None
    try:
        sets = _load_sets(input_data, names, log, report)
        try:
            child = _prepare(submission, workdir, output, opt, report, log)
            if child is not None:
                _run_sets(child, sets, output, opt, report, log)
        except _Stop:
            pass  # already recorded with its set
        except ChildFault as fault:
            _record_fault(report, log, fault)
        finally:
            if child is not None:
                child.stop()
                _note_output(child, report, log, opt)
    except ChallengeError as exc:
        report["status"] = "failed"
        report["errors"].append(str(exc))
        for name in names:
            info = report["sets"].setdefault(name, {"status": "not run"})
            if info["status"] == "running":
                info["status"] = "failed"
        log(f"error: {exc}")
        report["timings"]["total_s"] = time.perf_counter() - t_start
        _write_json(output / REPORT_FILE, report)
        log.close()
        raise
    finally:
        if not opt["keep_workdir"]:
            shutil.rmtree(workdir, ignore_errors=True)
    for name in names:
        report["sets"].setdefault(name, {"status": "not run"})
    report["status"] = "failed" if report["errors"] else "ok"
    report["timings"]["total_s"] = time.perf_counter() - t_start
    _write_json(output / REPORT_FILE, report)
    log("\n" + _summary(report))
    log(f"ingestion {report['status']} in {report['timings']['total_s']:.1f} s; "
        f"predictions in {output}")
    log.close()
    return report


def _record_fault(report, log, fault: ChildFault, set_name: str | None = None) -> None:
    report["errors"].append(fault.line if set_name is None else f"{set_name}: {fault.line}")
    report["fault"] = {"stage": fault.stage, "set": set_name, "message": fault.line,
                       "traceback": fault.details}
    log(f"error: {report['errors'][-1]}")
    if fault.details:
        log("  " + "\n  ".join(fault.details.rstrip().splitlines()))


def _note_output(child: Child, report, log, opt) -> None:
    out = child.output
    report["submission_output_bytes"] = out.total
    if out.dropped:
        msg = (f"the submission wrote {out.total / 1e6:.1f} MB to stdout/stderr; "
               f"{SUBMISSION_LOG} keeps the first {opt['max_log_mb']:g} MB and the last 16 KB")
        report["warnings"].append(msg)
        log(f"warning: {msg}")


def _prepare(submission, workdir, output, opt, report, log) -> Child | None:
    """Unpack, install, start the child and load the model. None when the submission is unusable."""
    t0 = time.perf_counter()
    if not submission.exists():
        raise ChallengeError(f"submission not found: {submission}")
    try:
        root = sub.unpack(submission, workdir)
    except ChallengeError as exc:  # a broken or unsafe zip: the submission's fault
        report["errors"].append(f"submission: {exc}")
        log(f"error: submission: {exc}")
        return None
    fatal = [p for p in sub.layout_problems(root) if p.fatal]
    for p in sub.layout_problems(root):
        if not p.fatal:
            report["warnings"].append(str(p))
    if fatal:
        for p in fatal:
            report["errors"].append(f"submission layout: {p}")
            log(f"error: submission layout: {p}")
        return None
    try:
        env = envmod.prepare_environment(
            root, workdir, isolation=opt["isolation"], cache_dir=opt["cache_dir"],
            installer=opt["installer"], wheelhouse=opt["wheelhouse"], no_index=opt["no_index"],
            timeout=opt["install_timeout"], log=log)
    except envmod.InstallError as exc:
        report["errors"].append(f"install: {exc}".splitlines()[0])
        report["fault"] = {"stage": "install", "set": None, "message": str(exc).splitlines()[0],
                           "traceback": str(exc)}
        log(f"error: install: {exc}")
        if (workdir / "install.log").is_file():
            shutil.copy(workdir / "install.log", output / "install.log")
        return None
    for note in env.notes:
        log(f"note: {note}")
    report["environment"] = {"kind": env.kind, "installer": env.installer, "key": env.key,
                             "path": env.path, "cached": env.cached, "python": env.python,
                             "interface": env.interface, "notes": env.notes}
    report["timings"]["install_s"] = time.perf_counter() - t0
    device, why = (opt["device"], "set by --device") if opt["device"] else envmod.detect_device()
    report["device"] = {"name": device, "reason": why}
    log(f"device: {device} ({why})")
    try:
        child = Child(env.python, env.pythonpath, cwd=root, log_path=output / SUBMISSION_LOG,
                      max_log_bytes=int(opt["max_log_mb"] * (1 << 20)))
    except OSError as exc:
        raise ChildFault(f"could not start the submission's Python {env.python}: {exc}",
                         "", "import") from None
    t1 = time.perf_counter()
    ready = child.start(timeout=opt["load_timeout"])
    report["timings"]["load_model_s"] = ready["load_s"]
    report["timings"]["start_s"] = time.perf_counter() - t1
    report["versions"]["submission_python"] = ready["python"]
    report["versions"]["submission_numpy"] = ready["numpy"]
    report["device"]["passed"] = ready["accepts_device"]
    child.device = device if ready["accepts_device"] else None
    log(f"component loaded from {ready['module_file']} (python {ready['python']}, numpy "
        f"{ready['numpy']}; load_model {ready['load_s']:.2f} s; predict "
        + ("accepts device" if ready["accepts_device"] else "has no device parameter") + ")")
    return child


def _run_sets(child: Child, sets: dict, output: Path, opt, report, log) -> None:
    import pandas as pd
    from tqdm import tqdm

    bs = int(opt["batch_size"])
    workers = int(opt["workers"] or default_workers())
    # exclusive_predict: decode only between predict calls (one batch ahead), so that the
    # submission's measured time never shares the CPU with our decoding; slower, fairer on
    # machines with few cores.
    exclusive = bool(opt["exclusive_predict"])
    lookahead = 1 if exclusive else workers + 1
    deadline = None if not opt["total_timeout"] else time.monotonic() + float(opt["total_timeout"])
    warm = bool(opt["warmup"])
    with SlotPool(lookahead + 1) as pool:
        for name, (df, paths) in sets.items():
            n = len(df)
            ids = [str(s) for s in df["sample_id"]]
            meta = _meta(df)
            batches = [paths[i:i + bs] for i in range(0, n, bs)]
            states, probs, ood, times = [], [], [], np.empty(n)
            notes, stats = Notes(), DecodeStats()
            report["sets"][name] = {"status": "running", "n": n}
            t0 = time.perf_counter()
            predict_s = 0.0
            # a log file (Codabench) gets a line every 30 s, a terminal a live bar
            bar = tqdm(total=n, desc=f"{name:>14}", unit="img", file=sys.stderr, leave=True,
                       disable=not opt["progress"], dynamic_ncols=True,
                       mininterval=0.1 if sys.stderr.isatty() else 30.0)
            prefetch = Prefetcher(batches, pool, workers, lookahead, stats)
            try:
                for batch in prefetch:
                    lo = batch.index * bs
                    b_ids = ids[lo:lo + len(batch.items)]
                    what = f"set {name}, batch {batch.index + 1}/{len(batches)} " \
                           f"(samples {b_ids[0]} .. {b_ids[-1]})"
                    msg = {"op": "batch", "id": batch.index, "shm": batch.slot.name,
                           "images": batch.items, "meta": meta[lo:lo + len(batch.items)],
                           "device": child.device}
                    if exclusive:
                        prefetch.settle()
                    try:
                        if warm:  # one untimed call first: lazy initialisation stays out of t
                            tw = time.perf_counter()
                            child.send(msg)
                            t, limit = _timeout(opt, deadline)
                            child.receive(t, f"the warm-up call on {what}", "predict", limit)
                            report["timings"]["warmup_s"] = time.perf_counter() - tw
                            warm = False
                        child.send(msg)
                        t, limit = _timeout(opt, deadline)
                        res = child.receive(t, what, "predict", limit)
                    finally:
                        pool.release(batch.slot)
                    if res.get("ignored"):
                        notes.add("output keys ignored", ", ".join(res["ignored"]), len(b_ids))
                    try:
                        v = validate_output(res["output"], b_ids, notes)
                    except OutputError as exc:
                        raise ChildFault(f"invalid output of predict() on {what}: {exc}",
                                         "", "validate") from None
                    states += v.states
                    probs.append(v.probabilities)
                    ood.append(v.ood)
                    times[lo:lo + len(b_ids)] = res["seconds"] / len(b_ids)
                    predict_s += res["seconds"]
                    bar.update(len(b_ids))
            except ChildFault as fault:
                bar.close()
                report["sets"][name]["status"] = "failed"
                _record_fault(report, log, fault, name)
                raise _Stop() from None
            finally:
                prefetch.close()
                bar.close()
            wall = time.perf_counter() - t0
            p = np.concatenate(probs) if probs else np.zeros((0, 3))
            frame = pd.DataFrame({
                "sample_id": df["sample_id"].to_numpy(), "predicted_state": states,
                "scores KO": p[:, 0], "scores OK": p[:, 1], "scores UNKNOWN": p[:, 2],
                "scores OOD": np.concatenate(ood) if ood else np.zeros(0),
                "compute_time": times})[list(PRED_COLUMNS)]
            _write_parquet(output / f"{name}.parquet", frame)
            for line in notes.lines(f"{name}: "):
                report["warnings"].append(line)
                log(f"warning: {line}")
            report["sets"][name].update(status="ok", file=f"{name}.parquet")
            report["timings"]["sets"][name] = {
                "n": n, "wall_s": wall, "predict_s": predict_s, "decode_s": stats.seconds,
                "decode_wait_s": prefetch.wait_s,
                "images_per_s": n / wall if wall > 0 else float("inf"),
                "time_median": float(np.median(times)) if n else 0.0,
                "time_p95": float(np.percentile(times, 95)) if n else 0.0}


class _Stop(ChildFault):
    """Internal: a set failed and was recorded; stop running further sets."""

    def __init__(self):
        super().__init__("", "", "")


def _timeout(opt, deadline) -> tuple[float | None, str]:
    """Seconds left for the next call, and which limit that is."""
    t, limit = opt["batch_timeout"], "the per-batch time limit"
    if deadline is not None:
        left = max(0.0, deadline - time.monotonic())
        if t is None or left < float(t):
            t, limit = left, f"the total time limit of {opt['total_timeout']:g} s"
    return t, limit
