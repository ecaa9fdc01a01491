"""build-sets throughput at 1920x1080 against raw cv2 work on the same images, same run.

    python benchmarks/build_sets.py [--n 150] [--workers N]

Source: a synthetic dataset drawn at 480x270 and upscaled to 1920x1080 (drawing full-HD
welds would dominate the benchmark; build-sets only decodes, transforms and encodes).
Baseline ("raw"): for every image build-sets writes, one cv2 decode of its source, one
warpAffine and one JPEG encode, in a process pool on all cores -- the least work any
builder must do per output image. Goal: build-sets >= 80 % of raw images/s.
"""

from __future__ import annotations

import argparse
import hashlib
import multiprocessing
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import cv2
import pandas as pd


def full_hd_source(root: Path, n: int):
    """A synthetic storage root (source, unseen seams, OOD photos) upscaled to 1920x1080."""
    from challenge_welding.data.synth import generate_dataset, synth_output

    small = generate_dataset(root / "small", n=n, seed=11, resolution=(480, 270), ko_share=0.3,
                             ood_share=0.05, half_share=0.0, progress=False)
    hd = synth_output(root / "hd")

    def upscale(src, dst):
        img = cv2.resize(cv2.imread(str(src)), (1920, 1080), interpolation=cv2.INTER_CUBIC)
        data = cv2.imencode(".jpeg", img, [cv2.IMWRITE_JPEG_QUALITY, 92])[1].tobytes()
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(data)
        return data

    for folder, out in ((small.source, hd.source), (small.unseen, hd.unseen)):
        meta = pd.read_parquet(folder / "metadata" / "ds_meta.parquet")
        for i, row in meta.iterrows():
            data = upscale(small.store / row["path"], hd.store / row["path"])
            meta.at[i, "sha256"] = hashlib.sha256(data).digest()
            meta.at[i, "resolution"] = [1920, 1080]
        (out / "metadata").mkdir(parents=True)
        meta.to_parquet(out / "metadata" / "ds_meta.parquet", index=False)
    for photo in sorted(small.ood.iterdir()):
        upscale(photo, hd.ood / (photo.stem + ".jpeg"))
    return hd


def _raw_one(task):
    src, dst = task
    cv2.setNumThreads(1)
    img = cv2.imread(src)
    h, w = img.shape[:2]
    m = cv2.getRotationMatrix2D((w / 2, h / 2), 10.0, 1.0)
    img = cv2.warpAffine(img, m, (w, h), borderMode=cv2.BORDER_REFLECT_101)
    Path(dst).write_bytes(cv2.imencode(".jpeg", img, [cv2.IMWRITE_JPEG_QUALITY, 95])[1].tobytes())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=150, help="source images (default 150)")
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    args = parser.parse_args()
    from challenge_welding.data.build_sets import build_sets, load_build_config

    cfg = load_build_config().replaced(
        {"robustness": {"size": 20}, "ood_synthetic": {"size_per_class": 15}, "drift": {"size": 40}})
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        t0 = time.perf_counter()
        source = full_hd_source(tmp, args.n)
        print(f"source: {args.n} images at 1920x1080 prepared in {time.perf_counter() - t0:.1f} s")

        t0 = time.perf_counter()
        data = build_sets(out=tmp / "data", seed=0, config=cfg, workers=args.workers, progress=False,
                          **source.build_args())
        t_build = time.perf_counter() - t0
        outputs = sorted((data / "input_data").rglob("*.jpeg"))
        n_out = len(outputs)

        # raw: the same number of output images, each from its own decode of a source image
        srcs = sorted(str(p) for p in source.store.rglob("*.jpeg"))
        (tmp / "raw").mkdir()
        tasks = [(srcs[i % len(srcs)], str(tmp / "raw" / f"{i}.jpeg")) for i in range(n_out)]
        t0 = time.perf_counter()
        # forkserver, as build-sets: forking this parent (cv2 threads already started by the
        # source preparation) can deadlock the workers.
        ctx = multiprocessing.get_context("forkserver")
        with ProcessPoolExecutor(args.workers, mp_context=ctx) as pool:
            list(pool.map(_raw_one, tasks, chunksize=8))
        t_raw = time.perf_counter() - t0

    build_ips, raw_ips = n_out / t_build, n_out / t_raw
    print(f"build-sets: {n_out} evaluation images (+ training copies, source check, calibration) "
          f"in {t_build:.1f} s = {build_ips:.1f} images/s on {args.workers} workers")
    print(f"raw cv2 decode + warp + encode: {n_out} images in {t_raw:.1f} s = {raw_ips:.1f} images/s")
    ratio = build_ips / raw_ips
    print(f"ratio build-sets / raw = {ratio:.0%} (goal >= 80 %)")
    return 0 if ratio >= 0.8 else 1


if __name__ == "__main__":
    sys.exit(main())
