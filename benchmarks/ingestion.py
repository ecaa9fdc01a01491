"""Ingestion throughput on full-HD JPEGs, against baselines measured in the same run.

    python benchmarks/ingestion.py [--n 200] [--batch-size 10] [--keep DIR]

Figures:
  decode-all-cores   raw cv2 decode (imdecode, and imdecode + BGR->RGB as ingestion needs)
                     of the N files on all cores (a thread pool; cv2 releases the GIL)
  sequential         the starter kit's loop: decode a batch, then predict it, no overlap
  ingest (a)         `ingest` with a component that returns at once
  ingest (b)         `ingest` with a component spending a fixed 15 ms per image
  ingest (b) excl.   the same with --exclusive-predict (no decoding while predict runs;
                     informative: expected near decode + predict)
Goals (issue 4): (a) >= 90 % of the all-core decode->RGB throughput;
(b) wall <= 1.1 x max(decode time on all cores, predict time).
Each figure is the best of --repeat runs, interleaved (the machine is shared: the best run is
the least disturbed one); CPU ms/img (this process and the child, the least of the runs)
shows the pipeline's overhead independently of the machine's load. Ingestion runs with --no-isolation (the environment install is not what is measured; the
child process, the shared-memory hand-over and validation are the same) and no warm-up call.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cv2
import numpy as np
import pandas as pd

from challenge_welding.ingestion.decode import default_workers, read_rgb
from challenge_welding.ingestion.run import ingest

PREDICT_S = 0.015

COMPONENT = '''
import time
from challenge_welding.ai_component_interface import AbstractAIComponent

SLEEP = {sleep}


class MyAIComponent(AbstractAIComponent):
    def load_model(self, config_file=None):
        pass

    def predict(self, input_images, images_meta_informations, device="cuda"):
        n = len(input_images)
        if SLEEP:
            time.sleep(SLEEP * n)
        return {{"predictions": ["OK"] * n, "probabilities": [[0.0, 1.0, 0.0]] * n,
                "OOD_scores": [0.0] * n}}
'''


def make_images(root: Path, n: int, seed: int = 0) -> list[Path]:
    """Weld-like full-HD JPEGs with sensor-like noise (realistic file size, ~0.3-0.6 MB)."""
    rng = np.random.default_rng(seed)
    folder = root / "performance"
    (folder / "images").mkdir(parents=True)
    base = cv2.resize(rng.normal(110, 25, (135, 240)).clip(0, 255).astype(np.uint8), (1920, 1080))
    noise = [rng.normal(0, 6, base.shape).astype(np.int16) for _ in range(4)]
    paths, rows = [], []
    for i in range(n):
        shift = int(rng.integers(0, 1920))
        img = base.astype(np.int16) + np.roll(noise[i % 4], shift, axis=1)
        y = 400 + int(rng.integers(0, 280))
        img = np.clip(img, 0, 255).astype(np.uint8)
        cv2.line(img, (0, y), (1919, y + int(rng.integers(-60, 60))), 210, 40)
        bgr = cv2.merge([img, (img * 0.9).astype(np.uint8), (img * 0.8).astype(np.uint8)])
        rel = f"images/{i:05d}.jpeg"
        cv2.imwrite(str(folder / rel), bgr, [cv2.IMWRITE_JPEG_QUALITY, 90])
        paths.append(folder / rel)
        rows.append({"sample_id": f"s{i:05d}", "path": rel, "welding-seams": "c20",
                     "resolution": [1920, 1080]})
    pd.DataFrame(rows).to_parquet(folder / "metadata.parquet", index=False)
    return paths


def cpu_seconds() -> float:
    """CPU time of this process and its waited-for children (the ingestion child)."""
    import resource

    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def decode_all_cores(paths, workers: int, rgb: bool) -> float:
    def one(p):
        if rgb:
            return read_rgb(p).shape
        return cv2.imdecode(np.fromfile(str(p), np.uint8), cv2.IMREAD_COLOR).shape

    t0 = time.perf_counter()
    with ThreadPoolExecutor(workers) as ex:
        list(ex.map(one, paths))
    return time.perf_counter() - t0


def sequential(paths, batch_size: int, sleep: float) -> float:
    """The starter kit's perform_grouped_inference: decode a batch, then predict, in turn."""
    t0 = time.perf_counter()
    for i in range(0, len(paths), batch_size):
        batch = [read_rgb(p) for p in paths[i:i + batch_size]]
        if sleep:
            time.sleep(sleep * len(batch))
    return time.perf_counter() - t0


def run_ingest(root: Path, data: Path, sleep: float, batch_size: int, **opts) -> dict:
    sub = root / "sub"
    (sub / "challenge_solution").mkdir(parents=True)
    (sub / "challenge_solution" / "__init__.py").write_text("")
    (sub / "challenge_solution" / "AIComponent.py").write_text(
        textwrap.dedent(COMPONENT.format(sleep=sleep)))
    (sub / "setup.py").write_text("from setuptools import setup\nsetup(name='s')\n")
    report = ingest(sub, data, root / "pred", isolation=False, warmup=False,
                    batch_size=batch_size, sets=["performance"], progress=False, verbose=False,
                    **opts)
    assert report["status"] == "ok", report["errors"]
    return report["timings"]["sets"]["performance"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--batch-size", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3, help="runs per figure; the best is kept")
    ap.add_argument("--keep", default=None, help="keep the images in this folder")
    args = ap.parse_args(argv)
    root = Path(args.keep or tempfile.mkdtemp(prefix="cw-bench-ingest-"))
    workers = default_workers()
    try:
        t0 = time.perf_counter()
        paths = make_images(root / "input_data", args.n)
        mb = sum(p.stat().st_size for p in paths) / 1e6
        print(f"{args.n} JPEGs 1920x1080 ({mb / args.n:.2f} MB each) made in "
              f"{time.perf_counter() - t0:.1f} s; {workers} cores; batch size {args.batch_size}")
        decode_all_cores(paths[:20], workers, True)  # warm the page cache and cv2
        data = root / "input_data"
        runs: dict[str, list[float]] = {}
        cpu: dict[str, list[float]] = {}
        for r in range(args.repeat):
            for name, fn in (
                    ("decode, all cores (imdecode)", lambda: decode_all_cores(paths, workers, False)),
                    ("decode->RGB, all cores", lambda: decode_all_cores(paths, workers, True)),
                    ("sequential loop, predict at once", lambda: sequential(paths, args.batch_size, 0.0)),
                    ("ingest (a), predict at once",
                     lambda: run_ingest(root / f"a{r}", data, 0.0, args.batch_size)["wall_s"]),
                    ("sequential loop, predict 15 ms/img",
                     lambda: sequential(paths, args.batch_size, PREDICT_S)),
                    ("ingest (b), predict 15 ms/img",
                     lambda: run_ingest(root / f"b{r}", data, PREDICT_S, args.batch_size)["wall_s"]),
                    ("ingest (b) --exclusive-predict",
                     lambda: run_ingest(root / f"c{r}", data, PREDICT_S, args.batch_size,
                                        exclusive_predict=True)["wall_s"])):
                c0 = cpu_seconds()
                runs.setdefault(name, []).append(fn())
                cpu.setdefault(name, []).append(cpu_seconds() - c0)
        best = {k: min(v) for k, v in runs.items()}
        n = args.n
        rows = list(best.items())
        t_dec, t_rgb = best["decode, all cores (imdecode)"], best["decode->RGB, all cores"]
        t_seq_a, t_seq_b = best["sequential loop, predict at once"], best["sequential loop, predict 15 ms/img"]
        a = {"wall_s": best["ingest (a), predict at once"]}
        b = {"wall_s": best["ingest (b), predict 15 ms/img"]}
        print(f"\n{'':36s} {'wall s':>8s} {'img/s':>8s} {'CPU ms/img':>10s}   all runs (s)")
        for name, t in rows:
            print(f"{name:36s} {t:8.2f} {n / t:8.1f} {1000 * min(cpu[name]) / n:10.1f}   "
                  + " ".join(f"{x:.2f}" for x in runs[name]))
        ratio_a = (n / a["wall_s"]) / (n / t_rgb)
        predict_total = n * PREDICT_S
        bound_b = max(t_rgb, predict_total)
        ratio_b = b["wall_s"] / bound_b
        print(f"\n(a) ingest / all-core decode->RGB throughput = {ratio_a:.1%} (goal >= 90 %); "
              f"vs imdecode only {(n / a['wall_s']) / (n / t_dec):.1%}; "
              f"vs sequential x{t_seq_a / a['wall_s']:.2f}")
        print(f"(b) ingest wall / max(decode {t_rgb:.2f} s, predict {predict_total:.2f} s) = "
              f"{ratio_b:.3f} (goal <= 1.1); vs sequential x{t_seq_b / b['wall_s']:.2f}")
        ok = ratio_a >= 0.9 and ratio_b <= 1.1
        print("goals met" if ok else "goal(s) missed")
        return 0 if ok else 1
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
