"""Benchmark of the scoring engine on a large reference (issue 2).

Six sets with 200,000 performance samples (the others in the proportions of
the test fixture: robustness 21 levels x 20,000, OOD sets 40,000 each,
generalization 60,000, drift 50,000). Predictions: the virtual with_trust made
realistic with continuous values (probabilities mixed with 3 % Dirichlet
noise, jittered OOD scores, log-normal times around 30 ms), so that no set
collapses to a few distinct rows.
Prints wall time and peak traced memory of
  (1) reading the files + every criterion, KPI and the score,
  (2) the bootstrap (B = 1000),
  (3) the page (extras + HTML),
and the ratio of (1) against a plain per-sample Python implementation of the
same criteria, measured in the same run on the same data.
Goals on the 2-core machine: (1) < 3 s, (2) < 30 s.

Usage: python benchmarks/scoring.py [--n 200000] [--boot 1000]
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
import tracemalloc
from pathlib import Path

import importlib.util

from challenge_welding.contract.names import PERTURBATIONS
from challenge_welding.scoring.bootstrap import bootstrap
from challenge_welding.scoring.calibrate import calibrate
from challenge_welding.scoring.config import load_config
from challenge_welding.scoring.criteria import prepare
from challenge_welding.scoring.inputs import read_frames
from challenge_welding.scoring.provenance import manifest_of
from challenge_welding.scoring.score import score_frames
from challenge_welding.scoring.virtual import make_virtual

ROOT = Path(__file__).resolve().parents[1]
# the label-only reference generator of the scoring tests, loaded by path (several areas have a conftest)
_spec = importlib.util.spec_from_file_location("scoring_conftest", ROOT / "tests/scoring/conftest.py")
_fixture = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_fixture)
make_reference = _fixture.make_reference


# --- the baseline: the same criteria, one sample at a time in plain Python -------------------------
def py_seam_cost(rows, cost, weights, default, column):
    sums, counts = {}, {}
    for r in rows:
        c = column(r)
        s = r["welding-seams"]
        sums[s] = sums.get(s, 0.0) + c
        counts[s] = counts.get(s, 0) + 1
    num = sum(weights.get(s, default) * sums[s] / counts[s] for s in sums)
    return num / sum(weights.get(s, default) for s in sums)


def py_costs(rows, cfg):
    cost, w, d = cfg["cost"], cfg["seam_weights"], cfg["default_seam_weight"]
    hard = py_seam_cost(rows, cost, w, d, lambda r: cost[r["class"]][r["predicted_state"]])
    soft = py_seam_cost(rows, cost, w, d, lambda r: sum(r[f"scores {j}"] * cost[r["class"]][j]
                                                        for j in ("KO", "OK", "UNKNOWN")))
    ideal = py_seam_cost(rows, cost, w, d, lambda r: cost[r["class"]]["UNKNOWN" if r.get("ood") else r["class"]])
    human = py_seam_cost(rows, cost, w, d, lambda r: cost[r["class"]]["UNKNOWN"])
    return hard, soft, ideal, human


def py_f1(rows):
    tp = fp = fn = 0
    for r in rows:
        t, p = r["class"] == "KO", r["predicted_state"] == "KO"
        tp += t and p
        fp += p and not t
        fn += t and not p
    den = 2 * tp + fp + fn
    return 2 * tp / den if den else 0.0


def py_ece(rows, bins=10):
    acc, conf, n = [0.0] * bins, [0.0] * bins, [0] * bins
    for r in rows:
        ko, ok = r["scores KO"], r["scores OK"]
        c = max(ko, ok) / (ko + ok) if ko + ok > 0 else 0.5
        top = "KO" if ko >= ok else "OK"
        b = min(int(c * bins), bins - 1)
        n[b] += 1
        conf[b] += c
        acc[b] += top == r["class"]
    total = sum(n)
    return sum(abs(acc[b] - conf[b]) for b in range(bins) if n[b]) / total if total else 0.0


def py_auroc(rows):
    pairs = sorted((r["scores OOD"], r["ood"]) for r in rows)
    n_pos = sum(o for _, o in pairs)
    n_neg = len(pairs) - n_pos
    area, below, i = 0.0, 0, 0
    while i < len(pairs):
        j, pos, neg = i, 0, 0
        while j < len(pairs) and pairs[j][0] == pairs[i][0]:
            pos += pairs[j][1]
            neg += 1 - pairs[j][1]
            j += 1
        area += pos * (below + 0.5 * neg)
        below += neg
        i = j
    return area / (n_pos * n_neg) if n_pos and n_neg else 0.5


def py_percentile(values, q):
    s = sorted(values)
    h = (len(s) - 1) * q / 100
    lo = math.floor(h)
    return s[lo] + (h - lo) * (s[min(lo + 1, len(s) - 1)] - s[lo])


def py_criteria(frames, cfg):
    rows = {name: f.to_dict("records") for name, f in frames.items()}  # counted: part of the baseline
    c = {}
    hard, soft, ideal, human = py_costs(rows["performance"], cfg)
    c["op"] = (hard - ideal) / (human - ideal)
    c["uop"] = (hard - soft) / (hard - ideal) if hard - ideal > 1e-9 * (human - ideal) else \
        1 - (soft - ideal) / (human - ideal)
    c["ml"] = py_f1(rows["performance"])
    c["time_p95"] = py_percentile([r["compute_time"] for r in rows["performance"]], 95)
    c["ucalib_ko"] = py_ece([r for r in rows["performance"] if r["class"] == "KO"])
    c["ucalib_ok"] = py_ece([r for r in rows["performance"] if r["class"] == "OK"])
    for x, key in zip(PERTURBATIONS, ("r_blur", "r_lum", "r_rot", "r_trans")):
        by_level = {}
        for r in rows["robustness"]:
            if r["perturbation"] in (x, "none"):
                level = 0.0 if r["perturbation"] == "none" else r["level"]
                by_level.setdefault(level, []).append(r)
        levels = sorted(by_level)
        ml = [py_f1(by_level[lv]) for lv in levels]
        area = sum((ml[i] + ml[i + 1]) / 2 * (levels[i + 1] - levels[i]) for i in range(len(levels) - 1))
        c[key] = area / (levels[-1] - levels[0])
    c["ood_syn"] = py_auroc(rows["ood_synthetic"])
    c["ood_real"] = py_auroc(rows["ood_real"])
    hard, soft, ideal, human = py_costs(rows["generalization"], cfg)
    c["op_g"] = (hard - ideal) / (human - ideal)
    c["ml_g"] = py_f1(rows["generalization"])
    inliers = [r for r in rows["drift"] if not r["ood"]]
    hard, soft, ideal, human = py_costs(inliers, cfg)
    c["op_d"] = (hard - ideal) / (human - ideal)
    c["ood_d"] = py_auroc(rows["drift"])
    return c


def realistic(pred_dir, seed=0):
    """Give the virtual predictions continuous probabilities, OOD scores and times (in place)."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    for path in sorted(Path(pred_dir).glob("*.parquet")):
        d = pd.read_parquet(path)
        n = len(d)
        cols = ["scores KO", "scores OK", "scores UNKNOWN"]
        p = d[cols].to_numpy() * 0.97 + rng.dirichlet([1.0, 1.0, 1.0], n) * 0.03
        d[cols] = p
        d["scores OOD"] = d["scores OOD"] + rng.uniform(0.0, 0.05, n)
        d["compute_time"] = rng.lognormal(np.log(0.03), 0.3, n)
        d.to_parquet(path, index=False)
    # re-seal the manifest, as the ingestion writes it, so the reads below are verified ones
    report_path = Path(pred_dir) / "ingestion.json"
    report = json.loads(report_path.read_text())
    report["manifest"] = manifest_of(pred_dir, list(report["manifest"]))
    report_path.write_text(json.dumps(report))


def measure(fn):
    """(result, seconds, peak MiB traced): timed without tracing, then traced once more."""
    t0 = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - t0
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return result, seconds, peak


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200_000, help="performance samples")
    parser.add_argument("--boot", type=int, default=1000, help="bootstrap resamples")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        ref = make_reference(Path(tmp) / "reference_data", n_perf=args.n, seed=0)
        calibrate(ref)
        pred = make_virtual(ref, "with_trust", Path(tmp) / "pred")
        realistic(pred)
        config = load_config(ref / "scoring.yaml")
        frames, _, _ = read_frames(ref, pred)
        sizes = {k: len(v) for k, v in frames.items()}
        print(f"reference: {sizes} (total {sum(sizes.values()):,} rows; built in {time.perf_counter() - t0:.1f} s)")

        def criteria_and_kpis():
            fr, _, hashes = read_frames(ref, pred)
            return score_frames(fr, config, hashes, with_bootstrap=False)

        (scores, details), t1, m1 = measure(criteria_and_kpis)
        print(f"(1) read + criteria + KPIs + score: {t1:6.2f} s   peak {m1:7.1f} MiB   (goal < 3 s)")

        from challenge_welding.scoring.criteria import compute

        _, tc, _ = measure(lambda: compute(prepare(frames, config), config))
        print(f"    of which criteria + KPIs on frames already read: {tc:6.2f} s")

        prep = prepare(frames, config)
        _, t2, m2 = measure(lambda: bootstrap(prep, config, n_boot=args.boot, seed=0))
        print(f"(2) bootstrap B={args.boot}:            {t2:6.2f} s   peak {m2:7.1f} MiB   (goal < 30 s)")

        from challenge_welding.scoring.analyses.extras import compute_extras
        from challenge_welding.report.html import render_report

        def page():
            details["extras"] = compute_extras(frames, config)
            return render_report(details, config)

        html, t3, m3 = measure(page)
        print(f"(3) page (extras + HTML):          {t3:6.2f} s   peak {m3:7.1f} MiB   ({len(html) / 1024:.0f} KiB)")

        t0 = time.perf_counter()
        base = py_criteria(frames, config)
        tb = time.perf_counter() - t0
        worst = max(abs(base[k] - scores[k]) / max(1.0, abs(base[k])) for k in base)
        print(f"baseline: plain per-sample Python, same criteria (files already read): {tb:6.2f} s")
        print(f"ratio baseline / (1): {tb / t1:5.1f}x faster; baseline / criteria alone: {tb / tc:5.1f}x   "
              f"(largest relative difference of the criteria: {worst:.1e})")


if __name__ == "__main__":
    main()
