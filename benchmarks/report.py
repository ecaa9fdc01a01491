"""Benchmark of the report (what is reported beyond the score, and the page).

Frames of the report tests' fixture with 200,000 performance samples (robustness
~170,000, OOD sets 25,000 each, generalization 25,000, drift 40,000). Prints wall time
and peak traced memory of
  (1) compute_extras (trust opinions + two retention curves, every set),
  (2) render_report (the page),
and two baselines measured in the same run on the same data:
  - a plain per-sample Python implementation of (1) (dicts and loops, ties grouped),
    with the largest relative difference of its R-AUC and opinion values;
  - the floor of (2): the same seven matplotlib figures drawn empty to SVG.

Usage: python benchmarks/report.py [--n 200000]
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "report"))


def measure(fn):
    """(result, wall time, peak traced MiB): timed untraced, then run again under tracemalloc
    (tracing every allocation would inflate the time several-fold)."""
    t = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return out, dt, peak


def plain_python_extras(frames, config):
    """The same numbers as compute_extras, one sample at a time (performance-set style, all sets)."""
    cost, sw, dw = config.cost, config.seam_weights, config.default_seam_weight
    bins, w = config.extras.trust.bins, config.extras.trust.prior_weight
    out = {}
    for name, df in frames.items():
        rows = df.to_dict("records")
        rows = [r for r in rows if r.get("ood", 0) != 1]
        n = len(rows)
        # trust
        ev = {}
        for c in ("KO", "OK"):
            cnt, hit = [0] * bins, [0] * bins
            for r in rows:
                den = r["scores KO"] + r["scores OK"]
                q = (r["scores " + c] / den) if den > 0 else 0.5
                i = min(int(q * bins), bins - 1)
                cnt[i] += 1
                hit[i] += r["class"] == c
            rr = sum(hit)
            ss = sum(abs(hit[i] - cnt[i] * (i + 0.5) / bins) for i in range(bins))
            ev[c] = (rr, ss)
        r_all, s_all = ev["KO"][0] + ev["OK"][0], ev["KO"][1] + ev["OK"][1]
        b = r_all / (w + r_all + s_all)
        # retention (misclassification and excess cost), ties grouped
        seam_n = defaultdict(int)
        for r in rows:
            seam_n[r["welding-seams"]] += 1
        wsum = sum(sw.get(s, dw) for s in seam_n)
        gap = 0.0
        errs = []
        for r in rows:
            v = n * sw.get(r["welding-seams"], dw) / (seam_n[r["welding-seams"]] * wsum)
            y = r["class"]
            gap += v * (cost[y]["UNKNOWN"] - cost[y][y]) / n
            errs.append((1 - max(r["scores KO"], r["scores OK"]), float(r["predicted_state"] != y),
                         v * (cost[y][r["predicted_state"]] - cost[y][y])))
        errs.sort(key=lambda t: t[0])
        aucs = []
        for k in (1, 2):
            groups = defaultdict(list)
            for t in errs:
                groups[t[0]].append(t[k] / (gap if k == 2 else 1.0))
            curve, acc = [0.0], 0.0
            for u in sorted(groups):
                g = groups[u]
                m = sum(g) / len(g)
                for _ in g:
                    acc += m
                    curve.append(acc / n)
            aucs.append((sum(curve) - (curve[0] + curve[-1]) / 2) / n)
        out[name] = {"b": b, "r_auc": aucs[0], "r_auc_cost": aucs[1]}
    return out


def empty_figures():
    from challenge_welding.report import charts

    svgs = []
    for shape in ((1, 1), (1, 2), (2, 2), (1, 3), (1, 1), (1, 2), (1, 3)):
        fig, _ = charts.new_figure(10, 3.3, *shape)
        svgs.append(charts.to_svg(fig))
    return svgs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200_000)
    args = ap.parse_args()

    from conftest import load_default_config, make_details, make_frames

    from challenge_welding.scoring.analyses.extras import compute_extras
    from challenge_welding.report.html import render_report

    config = load_default_config()
    t = time.perf_counter()
    frames = make_frames(args.n, seed=0)
    details = make_details(frames, config)
    print(f"frames: { {k: len(v) for k, v in frames.items()} } (built in {time.perf_counter() - t:.1f} s)")

    extras, t1, m1 = measure(lambda: compute_extras(frames, config))
    print(f"(1) compute_extras:  {t1:6.2f} s   peak {m1:7.1f} MiB")
    details["extras"] = extras
    html, t2, m2 = measure(lambda: render_report(details, config))
    print(f"(2) render_report:   {t2:6.2f} s   peak {m2:7.1f} MiB   ({len(html) / 1024:.0f} KiB)")

    t = time.perf_counter()
    plain = plain_python_extras(frames, config)
    tb = time.perf_counter() - t
    diff = 0.0
    for name, p in plain.items():
        e = extras["sets"][name]
        for ours, theirs in ((e["trust"]["model"]["b"], p["b"]),
                             (e["retention"]["misclassification"]["r_auc"], p["r_auc"]),
                             (e["retention"]["excess_cost"]["r_auc"], p["r_auc_cost"])):
            diff = max(diff, abs(ours - theirs) / max(abs(theirs), 1e-12))
    print(f"baseline: plain per-sample Python extras: {tb:6.2f} s   ratio {tb / t1:5.1f}x   "
          f"(largest relative difference {diff:.1e})")
    t = time.perf_counter()
    empty_figures()
    tf = time.perf_counter() - t
    print(f"floor: seven empty figures to SVG:        {tf:6.2f} s   page / floor {t2 / tf:5.1f}x")


if __name__ == "__main__":
    main()
