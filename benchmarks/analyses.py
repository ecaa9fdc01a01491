"""Cost of the analyses of issue 20, against the scoring measured in the same run.

    python benchmarks/analyses.py [--n 200000] [--boot 1000] [--subs 50]

(1) The scoring as today (scoring.score.score_frames: every criterion, KPI, the score and the
bootstrap) on the large reference of benchmarks/scoring.py (200,000 performance samples,
realistic with_trust predictions); (2) every analysis (scoring.analyses.assemble.compute_analyses:
cost-coverage, OOD detail, breaking points with B resamples, drift delay, localisation on a
map and a mask for every KO image of the performance set, expert-label KPIs on half the
samples). Goal: (1) + (2) within 2x of (1). (3) The leaderboard's weight sensitivity for
``--subs`` submissions x B resamples. Goal: under 2 s.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from challenge_welding.contract.names import KPI_KEYS
from challenge_welding.scoring.analyses.assemble import compute_analyses
from challenge_welding.scoring.analyses.weight_sensitivity import draw_perturbations, winner_stability
from challenge_welding.scoring.calibrate import calibrate
from challenge_welding.scoring.config import load_config, validate_config
from challenge_welding.scoring.inputs import read_frames
from challenge_welding.scoring.score import score_frames
from challenge_welding.scoring.virtual import make_virtual

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bench_scoring", ROOT / "benchmarks/scoring.py")
_bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_bench)


def maps_and_masks(frame, rng):
    """A 64x64 mask (a disc) and a 16x16 map (a peak near it) for every KO image of ``frame``."""
    ko = frame.loc[frame["class"].astype(str) == "KO", "sample_id"].astype(str)
    yy, xx = np.mgrid[0:64, 0:64]
    masks, maps = {}, {}
    for sid in ko:
        cy, cx = rng.integers(8, 56, 2)
        masks[sid] = (((yy - cy) ** 2 + (xx - cx) ** 2) < 36).astype(np.uint8) * 255
        m = rng.integers(0, 40, (16, 16)).astype(np.uint8)
        m[min(cy // 4 + rng.integers(-1, 2), 15), min(cx // 4, 15)] = 255
        maps[sid] = m
    return {"performance": maps}, {"performance": masks}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--boot", type=int, default=1000)
    parser.add_argument("--subs", type=int, default=50)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} (2 cores)")
    with tempfile.TemporaryDirectory() as tmp:
        ref = _bench.make_reference(Path(tmp) / "reference_data", n_perf=args.n, seed=0)
        calibrate(ref)
        pred = make_virtual(ref, "with_trust", Path(tmp) / "pred")
        _bench.realistic(pred)
        raw = load_config(ref / "scoring.yaml").as_dict()  # the config is frozen: change its data, validate again
        raw["extras"]["bootstrap"]["n"] = args.boot
        config = validate_config(raw, ref / "scoring.yaml")
        frames, _, _ = read_frames(ref, pred)
    rng = np.random.default_rng(0)
    maps, masks = maps_and_masks(frames["performance"], rng)
    perf_ids = frames["performance"]["sample_id"].astype(str)
    labelling = {"performance": {s: ("expert" if i % 2 else "operator") for i, s in enumerate(perf_ids)}}

    t0 = time.perf_counter()
    _, details = score_frames(frames, config)
    scoring = time.perf_counter() - t0
    t0 = time.perf_counter()
    compute_analyses(frames, config, maps=maps, masks=masks, labelling=labelling,
                     robustness=details["robustness"])
    analyses = time.perf_counter() - t0
    print(f"(1) scoring with bootstrap B={args.boot}: {scoring:.2f} s ({args.n:,} performance samples)")
    print(f"(2) analyses: {analyses:.2f} s ({len(masks['performance']):,} maps and masks)")
    print(f"    (1) + (2) = {(scoring + analyses) / scoring:.2f} x (1)   goal <= 2")

    raw = rng.uniform(0.2, 0.95, size=(args.subs, args.boot, len(KPI_KEYS)))
    w0 = np.array([config.final_weights[k] for k in KPI_KEYS])
    t0 = time.perf_counter()
    w, a1, a2 = draw_perturbations(w0, np.full(6, 0.1), np.full(6, 0.8), 200.0, 0.02, args.boot)
    winner_stability(raw, w, a1, a2, 0.1, 0.9)
    print(f"(3) weight sensitivity, {args.subs} submissions x B={args.boot}: {time.perf_counter() - t0:.2f} s"
          "   goal < 2")


if __name__ == "__main__":
    main()
