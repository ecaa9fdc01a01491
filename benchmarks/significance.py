"""Benchmark of the paired significance step (issue 14).

50 submissions scored on the scoring benchmark's reference (200,000
performance samples, the other sets in the test fixture's proportions; see
benchmarks/scoring.py), B = 1000.

(1) The pairwise step from stored draws: read the 50 draws files, check the
    fingerprints, P(A > B) for every pair of the score and the six KPIs, the
    p-values, Holm, the rank intervals and the letters. Goal < 2 s, < 500 MB.
(2) Baseline, the same run: recomputing the bootstrap per pair (both
    submissions of a pair re-bootstrapped, as one would without stored draws).
    A full bootstrap takes tens of seconds here, so two real pairs are timed
    and the 1225 pairs extrapolated (said so in the output); the one-bootstrap-
    per-submission alternative (50 bootstraps) is extrapolated too.

The 50 draws files are produced from 5 really scored submissions (real
bootstrap on the large reference) plus 45 derived by adding per-submission
offsets and noise to their per-resample values: the pairwise step only reads
(B,) arrays, so its cost does not depend on where they came from.

Usage: python benchmarks/significance.py [--n 200000] [--boot 1000] [--subs 50] [--pairs 2]
"""

from __future__ import annotations

import argparse
import importlib.util
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

from challenge_welding.scoring import leaderboard_significance as sig
from challenge_welding.contract import draws as draws_io
from challenge_welding.scoring.bootstrap import bootstrap
from challenge_welding.scoring.calibrate import calibrate
from challenge_welding.scoring.config import load_config, validate_config
from challenge_welding.scoring.criteria import prepare
from challenge_welding.scoring.inputs import read_frames
from challenge_welding.scoring.virtual import make_virtual

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("scoring_benchmark", ROOT / "benchmarks/scoring.py")
_scoring = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_scoring)


KINDS = ("with_trust", "no_trust", "good", "very_good", "random")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200_000, help="performance samples")
    parser.add_argument("--boot", type=int, default=1000, help="bootstrap resamples B")
    parser.add_argument("--subs", type=int, default=50, help="submissions")
    parser.add_argument("--pairs", type=int, default=2, help="pairs re-bootstrapped for the baseline")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        t0 = time.perf_counter()
        ref = _scoring.make_reference(tmp / "reference_data", n_perf=args.n, seed=0)
        calibrate(ref)
        raw = load_config(ref / "scoring.yaml").as_dict()  # the config is frozen: change its data, validate again
        raw["extras"]["bootstrap"]["n"] = args.boot
        config = validate_config(raw, ref / "scoring.yaml")
        print(f"reference built in {time.perf_counter() - t0:.1f} s")

        preps, base, boot_times, boot_cpu = [], [], [], []
        for kind in KINDS:
            pred = make_virtual(ref, kind, tmp / "pred" / kind, seed=1)
            _scoring.realistic(pred)
            frames, _, hashes = read_frames(ref, pred)
            prep = prepare(frames, config)
            preps.append(prep)
            t, c = time.perf_counter(), time.process_time()
            ci = bootstrap(prep, config, args.boot, 0)
            boot_times.append(time.perf_counter() - t)
            boot_cpu.append(time.process_time() - c)
            base.append(ci["values"])
        ref_sha = {name: h["reference"] for name, h in hashes.items()}
        boot_s = float(np.mean(boot_times))
        print(f"real bootstraps of {len(KINDS)} submissions: {boot_s:.1f} s each on average "
              f"({np.mean(boot_cpu):.1f} s CPU; B = {args.boot})")

        folders, names = [], []
        for i in range(args.subs):
            values = base[i % len(base)]
            if i >= len(base):  # a derived submission: shifted and jittered per resample
                values = {k: np.clip(v + rng.normal(0.0, 0.01) * (100 if k == "score" else 1)
                                     + rng.normal(0.0, 0.002, v.shape) * (100 if k == "score" else 1),
                                     0, 100 if k == "score" else 1) for k, v in values.items()}
            point = {k: float(np.median(v)) for k, v in values.items()}
            out = tmp / "scored" / f"sub{i:02d}"
            draws_io.save(draws_io.draws_path(out),
                          draws_io.build(values, point, ref_sha, config))
            folders.append(out)
            names.append(out.name)

        def pairwise_step():
            draws = sig.load(folders, names, True)
            sig.check(draws, {n: {"score": d.point["score"]} for n, d in draws.items()})
            return sig.analyse(draws)

        tracemalloc.start()
        t = time.perf_counter()
        metrics = pairwise_step()
        t_step = time.perf_counter() - t
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        t = time.perf_counter()
        pairwise_step()
        t_step = min(t_step, time.perf_counter() - t)  # the second run untraced
        n_pairs = args.subs * (args.subs - 1) // 2
        groups = len(set("".join(metrics["score"].result.letters)))
        print(f"(1) pairwise step from stored draws, {args.subs} submissions ({n_pairs} pairs x 7 metrics): "
              f"{t_step:.2f} s   peak {peak:.0f} MiB traced   (goal < 2 s, < 500 MB); {groups} score groups")

        t, c = time.perf_counter(), time.process_time()
        for j in range(args.pairs):
            a, b = preps[j % len(preps)], preps[(j + 1) % len(preps)]
            va = bootstrap(a, config, args.boot, 0)["values"]["score"]
            vb = bootstrap(b, config, args.boot, 0)["values"]["score"]
            np.mean((va > vb) + 0.5 * (va == vb))
        per_pair = (time.perf_counter() - t) / args.pairs
        cpu_pair = (time.process_time() - c) / args.pairs
        print(f"(2) baseline, bootstrap recomputed per pair: {per_pair:.1f} s per pair ({cpu_pair:.1f} s CPU; "
              f"timed on {args.pairs} pairs); "
              f"extrapolated to {n_pairs} pairs: {per_pair * n_pairs / 3600:.1f} h")
        print(f"    one bootstrap per submission instead: {args.subs} x {boot_s:.1f} s = "
              f"{args.subs * boot_s / 60:.1f} min (extrapolated)")
        print(f"ratio: stored draws {per_pair * n_pairs / t_step:,.0f}x faster than per pair, "
              f"{args.subs * boot_s / t_step:,.0f}x faster than one bootstrap per submission")


if __name__ == "__main__":
    main()
