"""The competition rehearsed at a chosen size: every stage run for real, measured, and its growth fitted.

One size is the whole chain on synthetic welds in the published layout:
synth -> build-sets -> train Solution-1 -> bundle -> per reference solution an
ingestion (its own environment, as on a worker) and a scoring (scores, details, page,
draws) -> virtual solutions scored until the leaderboard has ``runs`` rows -> the
leaderboard with significance. Each stage is one subprocess (the command an organiser
would type); ``os.wait4`` gives its own CPU time (user + system, its waited-for children
included: uv, the submission's process), its peak RSS (the largest of the process tree's)
and the bytes it wrote to disk (``ru_oublock``); the output's size is summed from the
files themselves.

The evaluation sets are scaled with the source: the builder's defaults are sized for the
published dataset (22,753 images), so a rehearsal of N images uses them times
N / 22,753 (with floors so that every set exists). At N = 22,753 that is the defaults:
a small rehearsal is a scaled copy of the real competition, and its costs extrapolate.

Several sizes fit, per stage and figure, the log-log slope of cost against the image
count (1 = linear) and an affine model ``a + b N`` (a fixed cost plus a cost per image,
least squares, non-negative) used to extrapolate to the full size; a slope above
``SUPERLINEAR`` is extrapolated with the power law instead and flagged. Every full-size
figure says whether it was measured or extrapolated.
"""

from __future__ import annotations

import math
import os
import platform
import shutil
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from challenge_welding.contract import checked
from challenge_welding.contract.checked import json_text, plain, read_json
from challenge_welding.contract.errors import ChallengeError
from challenge_welding.flows.demo import solutions_dir
from challenge_welding.contract.files import write_atomic

# The published dataset: 22,753 photos, two thirds at 1920x1080 and one third at 960x540.
FULL_N = 22753
FULL_MIX = "1920x1080:2,960x540:1"
SUPERLINEAR = 1.15        # log-log slope above which a cost is said to grow worse than linearly
# per-image costs of the capacity figures: 10 ms, about the published TensorFlow solution on
# CPU (p95 9.7 ms, benchmarks/published_solution.py); 83 ms, the challenge's budget of 1/12 s
COMPONENT_MS = (10, 50, 83)
# Builder size keys scaled with the source (section, key, floor): see the module docstring.
SCALED_KEYS = (("robustness", "size", 4), ("robustness", "min_ko_per_level", 1),
               ("ood_synthetic", "size_per_class", 4), ("ood_real", "max_ood", 2),
               ("drift", "size", 10), ("generalization", "max_size", 10))
NAIVE = ("always-ko", "always-ok", "full-unknown", "random", "cnn-small")


def parse_mix(text: str) -> tuple[tuple[int, int], float]:
    """``"1920x1080:2,960x540:1"`` -> ((1920, 1080), half_share 1/3).

    synth draws images at one resolution and its half, so a mix is one resolution with
    its weight and optionally its half with another; anything else is refused.
    """
    parts = []
    for item in text.split(","):
        try:
            res, _, weight = item.strip().partition(":")
            w, h = (int(v) for v in res.lower().split("x"))
            parts.append(((w, h), float(weight or 1)))
        except ValueError:
            raise ChallengeError(f"--mix: expected WxH:weight[,WxH:weight], got {item!r}") from None
    if not parts or len(parts) > 2 or any(wt <= 0 for _, wt in parts):
        raise ChallengeError(f"--mix: one or two resolutions with positive weights, got {text!r}")
    parts.sort(key=lambda p: -p[0][0])
    (w, h), full = parts[0]
    if len(parts) == 1:
        return (w, h), 0.0
    (w2, h2), half = parts[1]
    if (w2, h2) != (w // 2, h // 2):
        raise ChallengeError(f"--mix: the second resolution must be half of the first "
                             f"({w // 2}x{h // 2}), got {w2}x{h2} (synth draws a resolution and its half)")
    return (w, h), half / (full + half)


def scaled_build_config(n: int, defaults):
    """The builder's config (a BuildConfig) with its set sizes times ``n / FULL_N`` (floors in
    SCALED_KEYS)."""
    return scaled_with_floors(n, defaults)[0]


def scaled_with_floors(n: int, defaults):
    """:func:`scaled_build_config` and the keys whose floor bound (sets not to scale there)."""
    changes, floored = scaled_changes(n, defaults)
    return defaults.replaced(changes), floored


def scaled_changes(n: int, defaults) -> tuple[dict, list[str]]:
    """({section: {key: scaled size}}, floored keys): only the keys that scale, as a --config
    FILE holds them (the builder overlays them on its defaults)."""
    ratio = min(1.0, n / FULL_N)
    changes, floored = {}, []
    for section, name, floor in SCALED_KEYS:
        scaled = int(round(getattr(getattr(defaults, section), name) * ratio))
        if scaled < floor:
            floored.append(f"{section}.{name}")
        changes.setdefault(section, {})[name] = max(floor, scaled)
    return changes, floored


def loglog_slope(ns, values) -> float | None:
    """Slope of log(value) against log(n) (1 = linear); None with < 2 sizes or a value <= 0."""
    ns, values = np.asarray(ns, float), np.asarray(values, float)
    if len(ns) < 2 or len(set(ns.tolist())) < 2 or np.any(values <= 0):
        return None
    return float(np.polyfit(np.log(ns), np.log(values), 1)[0])


def affine_fit(ns, values) -> tuple[float, float]:
    """(a, b) of ``value = a + b n`` by least squares, both >= 0 (a cost cannot be negative).

    One size: b = value / n (all per image). A negative intercept is refitted through the
    origin, a negative slope as a constant (the mean).
    """
    ns, values = np.asarray(ns, float), np.asarray(values, float)
    if len(set(ns.tolist())) < 2:
        return 0.0, float(values.mean() / ns.mean())
    b, a = np.polyfit(ns, values, 1)
    if b < 0:
        return float(values.mean()), 0.0
    if a < 0:
        return 0.0, float((values * ns).sum() / (ns * ns).sum())
    return float(a), float(b)


def extrapolate(ns, values, target: int) -> dict:
    """A figure at ``target`` images: measured when ``target`` was run, else fitted (see module)."""
    ns, values = [int(v) for v in ns], [float(v) for v in values]
    if target in ns:
        return {"value": values[ns.index(target)], "how": "measured"}
    if len(set(ns)) < 2:
        return {"value": None, "how": "not extrapolated (one size: run --sizes with two or more)"}
    slope = loglog_slope(ns, values)
    if slope is not None and slope > SUPERLINEAR:
        last = int(np.argmax(ns))
        return {"value": values[last] * (target / ns[last]) ** slope,
                "how": f"extrapolated (power law, slope {slope:.2f}: worse than linear)"}
    a, b = affine_fit(ns, values)
    return {"value": a + b * target, "how": f"extrapolated (affine {a:.3g} + {b:.3g}/image)"}


def tree_bytes(path: Path) -> int:
    """Apparent size of a file or of every file under a folder."""
    path = Path(path)
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


@dataclass
class Stage:
    name: str
    wall_s: float
    cpu_s: float
    user_s: float
    sys_s: float
    peak_rss_mb: float
    written_mb: float
    output_mb: float
    output: str
    extra: dict = field(default_factory=dict)


def become_subreaper() -> bool:
    """Adopt orphaned descendants (Linux prctl PR_SET_CHILD_SUBREAPER), so that their CPU counts.

    A stage's worker processes may not be its children (multiprocessing's forkserver starts
    them, and outlives the stage's process without being waited for): as a subreaper we
    reap them ourselves and add their rusage to the stage's. False where unsupported."""
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _reap_orphans(timeout: float = 10.0) -> list:
    """rusages of the adopted descendants that exit within ``timeout`` after the stage's process."""
    usages, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            pid, _, ru = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:  # nobody left
            break
        if pid == 0:
            time.sleep(0.05)
        else:
            usages.append(ru)
    return usages


def run_stage(name: str, argv: list[str], output: Path, logs: Path, env=None) -> Stage:
    """Run one stage's command, wait4 for it (and its orphans), return its figures; a failure names its log."""
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / (name.replace(" ", "_").replace("/", "_") + ".log")
    t0 = time.perf_counter()
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
        _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)  # already reaped: keep Popen from waiting
    usages = [ru] + _reap_orphans()
    user, system = sum(u.ru_utime for u in usages), sum(u.ru_stime for u in usages)
    maxrss, oublock = max(u.ru_maxrss for u in usages), sum(u.ru_oublock for u in usages)
    if proc.returncode != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-3:]
        raise ChallengeError(f"rehearsal stage {name!r} failed (exit {proc.returncode}; log {log}): "
                             + " | ".join(tail))
    return Stage(name, wall, user + system, user, system, maxrss / 1024, oublock * 512 / 1e6,
                 tree_bytes(output) / 1e6 if Path(output).exists() else 0.0, str(output))


def cli(*args) -> list[str]:
    return [sys.executable, "-m", "challenge_welding", *map(str, args)]


def bundle_facts(zip_path: Path) -> dict:
    """The bundle's sizes (zip, each inner zip) and each phase's execution_time_limit."""
    from challenge_welding.bundle.codabench_rules import DEFAULT_QUOTA_BYTES, quota_problems

    with zipfile.ZipFile(zip_path) as zf:
        inner = {i.filename: i.file_size for i in zf.infolist() if i.filename.endswith(".zip")}
        comp = yaml.safe_load(zf.read("competition.yaml"))
    upload = zip_path.stat().st_size
    stored = sum(inner.values())  # the unpacker stores every data/program zip again as a dataset
    return {"zip_bytes": upload, "inner_zip_bytes": inner, "stored_bytes": stored,
            "quota_bytes": DEFAULT_QUOTA_BYTES,
            "quota_problems": quota_problems(upload, stored, DEFAULT_QUOTA_BYTES),
            "limits_s": {p["name"]: int(p["execution_time_limit"]) for p in comp["phases"]}}


def eval_images(data: Path) -> dict:
    import pyarrow.parquet as pq

    # the row count from the footer: no column is read
    return {d.name: pq.ParquetFile(d / "metadata.parquet").metadata.num_rows
            for d in sorted((data / "input_data").iterdir()) if (d / "metadata.parquet").is_file()}


def score_virtuals(reference: str, root: str, predictions: str, count: int, seed: int) -> None:
    """Stage body (run in its own process): ``count`` virtual solutions, each scored with its
    page and draws, kinds in turn and seeds counting up, as ``root/virtual-<kind>-s<seed>``
    (their predictions in ``predictions/``)."""
    from challenge_welding.contract.names import VIRTUAL_KINDS
    from challenge_welding.flows.score import score
    from challenge_welding.contract.draws import draws_path
    from challenge_welding.scoring.virtual import make_virtual

    for i in range(int(count)):
        kind, s = VIRTUAL_KINDS[i % len(VIRTUAL_KINDS)], int(seed) + i // len(VIRTUAL_KINDS)
        out = Path(root) / f"virtual-{kind}-s{s}"
        make_virtual(reference, kind, Path(predictions) / out.name, seed=s)
        score(reference, Path(predictions) / out.name, out, draws_path=draws_path(out))


def solution_folders(names) -> list[str]:
    for name in names:
        if name not in ("Solution-1", "Solution-1-no-trust") and not (solutions_dir() / name / "setup.py").is_file():
            raise ChallengeError(f"--solutions: {solutions_dir() / name} is not a submission folder")
    return list(names)


# over 60 lines: the competition's stages in their order, one measured call each
def rehearse_size(work: Path, n: int, mix: str, *, seed: int = 0, runs: int = 50, ko_share: float = 0.05,
                  solutions=("Solution-1", "Solution-1-no-trust") + NAIVE, log=print) -> dict:
    """The whole competition at ``n`` images in ``work`` (emptied first); its stages' figures.

    Long because it is the pipeline itself, one stage after the other, top to bottom.
    """
    from challenge_welding.data.build_sets import load_build_config
    from challenge_welding.flows.demo import no_trust_copy
    from challenge_welding.contract.draws import draws_path

    resolution, half_share = parse_mix(mix)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    logs, store, data = work / "logs", work / "store", work / "data"
    stages: list[Stage] = []

    def stage(name, argv, output, **extra):
        log(f"[rehearse n={n} {time.strftime('%H:%M:%S')}] {name}")
        s = run_stage(name, [str(a) for a in argv], output, logs)
        s.extra.update(extra)
        stages.append(s)
        log(f"    {s.wall_s:.1f} s wall, {s.cpu_s:.1f} s CPU, {s.peak_rss_mb:.0f} MB peak, "
            f"{s.output_mb:.1f} MB out")
        return s

    code = ("import sys; from challenge_welding.data.synth import generate_dataset as g; "
            "g(sys.argv[1], n=int(sys.argv[2]), seed=int(sys.argv[3]), resolution=(int(sys.argv[4]), "
            "int(sys.argv[5])), half_share=float(sys.argv[6]), ko_share=float(sys.argv[7]), progress=False)")
    stage("synth", [sys.executable, "-c", code, store, n, seed, *resolution, half_share, ko_share], store)
    config = work / "build_config.yaml"
    changes, floored = scaled_changes(n, load_build_config())
    config.write_text(yaml.safe_dump(changes))
    datasets = store / "challenge-welding" / "datasets"
    stage("build-sets", cli("build-sets", "--source", datasets / "synthetic", "--unseen-source",
                            datasets / "synthetic_unseen", "--ood-source", store / "ood_photos",
                            "--out", data, "--seed", seed, "--config", config), data)
    trained = work / "solutions"
    folders = {}
    if "Solution-1" in solutions or "Solution-1-no-trust" in solutions:
        stage("train Solution-1", [sys.executable, solutions_dir() / "Solution-1" / "train.py", "--data",
                                   data / "training_data", "--out", trained / "Solution-1"],
              trained / "Solution-1")
        folders["Solution-1"] = trained / "Solution-1"
        no_trust_copy(trained / "Solution-1", trained / "Solution-1-no-trust")
        folders["Solution-1-no-trust"] = trained / "Solution-1-no-trust"
    folders.update({name: solutions_dir() / name for name in solutions if name not in folders})
    bundle = work / "bundle.zip"
    stage("bundle", cli("bundle", "--data", data, "--output", bundle,
                        *(["--solution", folders["Solution-1"]] if "Solution-1" in folders
                          else ["--no-solution"])), bundle)
    results, predictions, outs = work / "results", work / "predictions", []
    for name in solutions:  # the leaderboard names its rows after the scored folders
        pred = predictions / name
        s = stage(f"ingest {name}", cli("ingest", "--submission", folders[name], "--input-data",
                                         data / "input_data", "--output", pred, "--env-cache",
                                         work / "envs", "--no-progress"), pred)
        report = read_json(pred / "ingestion.json", "the ingestion of the rehearsal wrote a bad one")
        s.extra.update(ingestion_figures(report, pred))
        out = results / name
        stage(f"score {name}", cli("score", "--reference", data / "reference_data", "--predictions",
                                    pred, "--output", out, "--draws", draws_path(out)), out)
        outs.append(out)
    n_virtual = max(0, runs - len(outs))
    if n_virtual:
        code = ("import sys; from challenge_welding.flows.rehearse import score_virtuals as f; "
                "f(*sys.argv[1:4], int(sys.argv[4]), int(sys.argv[5]))")
        virtual = results / "virtual"
        stage(f"score {n_virtual} virtual", [sys.executable, "-c", code, data / "reference_data",
                                             virtual, predictions / "virtual", n_virtual, seed], virtual,
              runs=n_virtual)
        outs += sorted(p for p in virtual.iterdir() if p.is_dir())
    board = work / "leaderboard"
    stage(f"leaderboard {len(outs)} runs", cli("leaderboard", *outs, "--output", board, "--significance"),
          work, runs=len(outs))
    stages[-1].output_mb = sum(tree_bytes(p) for p in work.glob("leaderboard*")) / 1e6
    return {"n": n, "mix": mix, "resolution": list(resolution), "half_share": half_share,
            "ko_share": ko_share, "runs": len(outs), "floored": floored,
            "source_images": n, "eval_images": eval_images(data),
            "sizes_bytes": {"store": tree_bytes(store), "input_data": tree_bytes(data / "input_data"),
                            "reference_data": tree_bytes(data / "reference_data"),
                            "training_data": tree_bytes(data / "training_data")},
            "bundle": bundle_facts(bundle), "stages": [vars(s) for s in stages]}


def ingestion_figures(report: dict, pred: Path) -> dict:
    """From ingestion.json and the performance predictions: install time, per-image cost."""
    import pandas as pd

    path = pred / "ingestion.json"
    timings = checked.field(report, "timings", dict, path, {})
    perf = pred / "performance.parquet"
    ms = float(pd.read_parquet(perf, columns=["compute_time"])["compute_time"].median() * 1000) \
        if perf.is_file() else None
    return {"install_s": checked.field(timings, "install_s", (int, float), path),
            "total_s": checked.field(timings, "total_s", (int, float), path), "component_ms_per_image": ms}


def stage_key(name: str) -> str:
    """Stages named by their role across sizes ("score 43 virtual" -> "score virtual")."""
    words = name.split()
    return " ".join(w for w in words if not w.isdigit())


def growth(sizes: list[dict], target: int = FULL_N) -> dict:
    """Per stage and figure: the log-log slope over the sizes and the figure at ``target`` images."""
    ns = [s["n"] for s in sizes]
    keys = [stage_key(st["name"]) for st in sizes[0]["stages"]]
    out = {}
    for key in keys:
        rows = [next(st for st in s["stages"] if stage_key(st["name"]) == key) for s in sizes]
        fig = {}
        for metric in ("wall_s", "cpu_s", "peak_rss_mb", "written_mb", "output_mb"):
            vals = [r[metric] for r in rows]
            fig[metric] = {"slope": loglog_slope(ns, vals), **extrapolate(ns, vals, target)}
        out[key] = fig
    totals = {}
    getters = {"eval_images": lambda s: sum(s["eval_images"].values()),
               "bundle_zip_bytes": lambda s: s["bundle"]["zip_bytes"],
               "stored_bytes": lambda s: s["bundle"]["stored_bytes"],
               **{k: (lambda s, k=k: s["sizes_bytes"][k]) for k in sizes[0]["sizes_bytes"]}}
    for name, get in getters.items():
        vals = [get(s) for s in sizes]
        totals[name] = {"slope": loglog_slope(ns, vals), **extrapolate(ns, vals, target)}
    return {"target_images": target, "stages": out, "totals": totals}


def capacity(sizes: list[dict], fit: dict, ms_list=COMPONENT_MS) -> dict:
    """Worker time of one submission at the full size, for components of ``ms_list`` ms/image.

    ``minutes = (ingestion of an instant component + n_eval * ms + its scoring) / 60``: the
    instant component (always-ok) gives the platform's own cost (install, decoding, hand-over,
    writing), the scoring that of one submission's score, page and draws. The platform's
    parts are counted in CPU seconds, not wall: on a shared, loaded machine the wall time
    is mostly other tenants' (the worker is dedicated); this undercounts only waiting (I/O,
    the network of an install), which the phase limit's margin covers.
    """
    st = fit["stages"]
    base = st.get("ingest always-ok") or next(v for k, v in st.items() if k.startswith("ingest"))
    score = st.get("score always-ok") or next(v for k, v in st.items() if k.startswith("score "))
    n_eval = fit["totals"]["eval_images"]["value"]
    rows = []
    for ms in ms_list:
        ingest_s = base["cpu_s"]["value"] + n_eval * ms / 1000
        rows.append({"ms_per_image": ms, "ingest_s": ingest_s, "score_s": score["cpu_s"]["value"],
                     "worker_minutes": (ingest_s + score["cpu_s"]["value"]) / 60})
    from challenge_welding.bundle.bundle import execution_time_limit

    return {"eval_images": n_eval, "rows": rows, "bundle_limit_s": execution_time_limit(int(n_eval)),
            "how": "extrapolated" if fit["totals"]["eval_images"]["how"] != "measured" else "measured",
            "disk_per_worker_mb": (fit["totals"]["input_data"]["value"]
                                   + fit["totals"]["reference_data"]["value"]) / 1e6}


def machine() -> dict:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    try:
        model = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo")
                      if ln.startswith("model name")), platform.processor())
    except OSError:
        model = platform.processor()
    return {"cpu": model, "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
            else os.cpu_count(), "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
                                                   / 2**30, 1),
            "python": platform.python_version(), "load_1_5_15": [round(x, 2) for x in load],
            "date_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def run_rehearsal(workdir, sizes, mix=FULL_MIX, *, seed=0, runs=50, ko_share=0.05, solutions=None,
                  keep=False, json_path=None, log=print) -> dict:
    """Rehearse each size in turn, fit the growth, write the JSON (also after a failure)."""
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    become_subreaper()
    json_path = Path(json_path) if json_path else workdir / "rehearsal.json"
    solutions = solution_folders(solutions or ("Solution-1", "Solution-1-no-trust") + NAIVE)
    result = {"machine": machine(), "mix": mix, "full_size": {"images": FULL_N, "mix": FULL_MIX},
              "sizes": []}
    try:
        for n in sorted(set(int(v) for v in sizes)):
            if n < 20:
                raise ChallengeError(f"--sizes: {n} images is too few for the six sets (at least 20)")
            work = workdir / f"n{n}"
            result["sizes"].append(rehearse_size(work, n, mix, seed=seed, runs=runs, ko_share=ko_share,
                                                 solutions=solutions, log=log))
            if not keep:  # the figures are taken: free the disk for the next size
                for sub in ("store", "data", "results", "predictions", "envs", "solutions"):
                    shutil.rmtree(work / sub, ignore_errors=True)
        if len(result["sizes"]) >= 2:  # a growth needs two sizes at least
            result["growth"] = growth(result["sizes"])
            result["capacity"] = capacity(result["sizes"], result["growth"])
    finally:
        if "growth" not in result and len(result["sizes"]) >= 2:  # interrupted: fit what was measured
            result["growth"] = growth(result["sizes"])
            result["capacity"] = capacity(result["sizes"], result["growth"])
        result["machine"]["load_at_end"] = [round(x, 2) for x in os.getloadavg()]
        write_atomic(json_path, json_text(plain(result), default=str))  # strict: a NaN figure is null
    return result


def _fmt(v, nd=1) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    return f"{v:.{nd}f}"


def text_report(result: dict) -> str:
    """The stage x size table, the growth table and the full-size figures, as printed."""
    sizes = result["sizes"]
    lines = [f"machine: {result['machine']['cpu']}, {result['machine']['cores']} cores, "
             f"{result['machine']['memory_gb']} GiB; {result['machine']['date_utc']}; load "
             f"{result['machine']['load_1_5_15']} at start, {result['machine'].get('load_at_end')} at end",
             f"mix {result['mix']}; per stage: wall s / CPU s / peak RSS MB / disk written MB / output MB"]
    head = f"{'stage':28s}" + "".join(f" | {'n=' + str(s['n']):>34s}" for s in sizes)
    lines += [head, "-" * len(head)]
    for i, st in enumerate(sizes[0]["stages"]):
        key = stage_key(st["name"])
        cells = []
        for s in sizes:
            r = next(x for x in s["stages"] if stage_key(x["name"]) == key)
            cells.append(f"{r['wall_s']:7.1f} {r['cpu_s']:7.1f} {r['peak_rss_mb']:6.0f} "
                         f"{r['written_mb']:6.0f} {r['output_mb']:6.0f}")
        lines.append(f"{key:28s}" + "".join(f" | {c:>34s}" for c in cells))
    for s in sizes:
        b = s["bundle"]
        lines.append(f"n={s['n']}: evaluation images {sum(s['eval_images'].values())} "
                     f"({', '.join(f'{k} {v}' for k, v in s['eval_images'].items())}); bundle "
                     f"{b['zip_bytes'] / 1e6:.1f} MB, stored after unpacking {b['stored_bytes'] / 1e6:.1f} MB "
                     f"of the {b['quota_bytes'] / 1e9:g} GB quota; limits {b['limits_s']} s"
                     + ("; QUOTA: " + " ".join(b["quota_problems"]) if b["quota_problems"] else ""))
        over = [st["name"] for st in s["stages"] if st["name"].split()[0] in ("ingest", "score")
                and st["wall_s"] > min(b["limits_s"].values())]
        lines.append(f"      ingestion and scoring steps over the phase limit: {', '.join(over) or 'none'}")
        if s.get("floored"):
            lines.append(f"      sets not to scale (a floor bound: {', '.join(s['floored'])}): the image "
                         "counts' growth at this size is not the full size's")
    fit = result.get("growth")
    if fit:
        lines += ["", f"growth (log-log slope of each figure against the image count; 1 = linear) and "
                      f"the figures at {fit['target_images']:,} images"]
        lines.append(f"{'stage':28s} {'slope wall/CPU/RSS/out':>24s} {'wall s':>9s} {'CPU s':>9s} "
                     f"{'RSS MB':>8s} {'out MB':>9s}  how")
        for key, f in fit["stages"].items():
            slopes = "/".join(_fmt(f[m]["slope"], 2) for m in ("wall_s", "cpu_s", "peak_rss_mb", "output_mb"))
            lines.append(f"{key:28s} {slopes:>24s} {f['wall_s']['value']:9.0f} {f['cpu_s']['value']:9.0f} "
                         f"{f['peak_rss_mb']['value']:8.0f} {f['output_mb']['value']:9.0f}  "
                         f"{f['wall_s']['how']}")
        for key, f in fit["totals"].items():
            unit = 1 if key == "eval_images" else 1e6
            lines.append(f"{key:28s} slope {_fmt(f['slope'], 2):>5s}: {f['value'] / unit:,.0f}"
                         f"{'' if unit == 1 else ' MB'} ({f['how']})")
        cap = result["capacity"]
        lines.append("platform parts in CPU seconds (see capacity()); component time added per image")
        lines.append(f"one submission at {fit['target_images']:,} images ({cap['eval_images']:,.0f} evaluation "
                     f"images, {cap['how']}); the bundle's execution_time_limit there: {cap['bundle_limit_s']} s")
        for r in cap["rows"]:
            lines.append(f"  component at {r['ms_per_image']:3d} ms/image: ingestion {r['ingest_s'] / 60:6.1f} min "
                         f"+ scoring {r['score_s'] / 60:4.1f} min = {r['worker_minutes']:6.1f} worker minutes")
    return "\n".join(lines)
