"""synth throughput at 1920x1080 and 960x540: the old renderer against the new, same run.

    python benchmarks/synth.py [--n 24] [--workers 2]

Both paths do the whole per-image work of `synth` (draw, JPEG encode at quality 92, the
blur/luminosity measures on the decoded file, sha256, write) in a process pool of
``--workers`` processes, on the same plan (synth's own planner, seed 0, 30 % KO so the
defects are drawn). Old: tests/data/reference_render.py (data/render.py as of commit
8f95ec2, every layer drawn at full size). New: synth's own task (scene drawn at <= 270
lines, camera at full size, masks written too). Prints images/s, the ratio, and the time
the published store's size would take (22,753 images: 2/3 at 1920x1080, 1/3 at 960x540).
"""

from __future__ import annotations

import argparse
import importlib.util
import multiprocessing
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from challenge_welding.data.parallel import _init_worker
from challenge_welding.data.synth import _plan, _render_one, encode_and_measure

ROOT = Path(__file__).resolve().parents[1]
FULL_STORE, FULL_HD_SHARE = 22_753, 2 / 3


def _reference():
    """The old renderer, loaded by path (it lives with the tests as their baseline)."""
    if "reference_render" not in sys.modules:
        spec = importlib.util.spec_from_file_location("reference_render",
                                                      ROOT / "tests/data/reference_render.py")
        module = sys.modules["reference_render"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules["reference_render"]


def _old_task(args):
    """The old synth task: the old renderer, then the same encode/measure/write."""
    root, seed, row, rel = args
    rng = np.random.default_rng([seed, row["index"]])
    img = _reference().render_weld(rng, row["seam"], row["res"][0], row["res"][1],
                                   defects=row["defects"], ood_kind=row["ood_kind"])
    data, digest, blur, lum = encode_and_measure(img)
    path = Path(root) / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return digest, blur, lum


def _rate(pool, task, rows, workers, root):
    """Images/s in steady state: each process first draws one image (imports, caches), then
    the timed batch."""
    items = [(str(root), 0, row, f"img/sample_{row['index']}.jpeg") for row in rows]
    list(pool.map(task, items[:workers]))
    t0 = time.perf_counter()
    list(pool.map(task, items, chunksize=1))
    return len(rows) / (time.perf_counter() - t0)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=24, help="images per resolution and path")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    print(f"synth throughput, {args.workers} processes, {args.n} images per cell; "
          f"load average at start {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"  {'resolution':11s} {'old img/s':>10s} {'new img/s':>10s} {'ratio':>7s}")
    rates = {}
    # synth's own pool settings (forkserver, one OpenCV thread per process), kept warm
    ctx = multiprocessing.get_context("forkserver")
    with tempfile.TemporaryDirectory() as tmp, \
            ProcessPoolExecutor(args.workers, mp_context=ctx, initializer=_init_worker) as pool:
        for w, h in ((1920, 1080), (960, 540)):
            rows = _plan(args.n, 0, (w, h), 0.3, 0.0, 0.0, 0.0)
            old = _rate(pool, _old_task, rows, args.workers, Path(tmp) / f"old{w}")
            new = _rate(pool, _render_one, rows, args.workers, Path(tmp) / f"new{w}")
            rates[h] = (old, new)
            print(f"  {w}x{h:<6d} {old:10.2f} {new:10.2f} {new / old:6.1f}x", flush=True)
    for label, k in (("old", 0), ("new", 1)):
        seconds = FULL_STORE * (FULL_HD_SHARE / rates[1080][k] + (1 - FULL_HD_SHARE) / rates[540][k])
        print(f"  the published store's size ({FULL_STORE} images) with the {label} renderer: "
              f"{seconds / 60:.1f} min")
    print(f"load average at end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
