"""No published number reveals a label (issue 10, attack 4).

A dishonest submission gives every sample a distinct certainty and a distinct OOD score that
follow the input order, answers OK everywhere (so a sample's error is its label), and reads
back every number of the scoring output: every curve in details.json (any two lists of the
same length) and every polyline and marker group of the page's SVG charts. For each curve,
each set and each order the attacker knows (input order, its reverse), two readings are tried:

* retention-like: x is linear in the sample rank, the slope over a step is the share of
  errors (of the minority label) among the step's samples;
* ROC-like: a step of (dFPR, dTPR) holds dTPR n_pos positives and dFPR n_neg negatives.

Guesses: the top-m samples by share as the minority label (m is public: the set's class
counts), and the step's majority label. The best accuracy over every attempt must stay within
chance: a published aggregate of at least ``min_samples`` samples tells the share of a class
in those samples, which lets a block-majority guess beat the prior by
``E[max(K, m - K)] / m`` (K ~ Binomial(m, p), m = min_samples; ~0.58 on a balanced set, the
prior on a 6 % KO set). The bound is that allowance plus 4 binomial standard errors (many
attempts are tried). The same attack on the uncoarsened curves (one point per sample, what
the output held before) recovers every label, so the test can fail.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd
import pytest
import yaml
from sklearn.metrics import roc_curve

from challenge_welding.contract.names import PRED_COLUMNS, SET_NAMES
from challenge_welding.scoring.retention import retention_curve
from challenge_welding.scoring.config import DEFAULT_CONFIG_PATH
from challenge_welding.flows.score import score

MIN_SAMPLES = 25


def _attack_submission(reference: dict) -> dict:
    """Predictions whose certainty and OOD score follow the input order exactly, OK everywhere."""
    out = {}
    for name, ref in reference.items():
        n = len(ref)
        k = np.arange(n)
        p_ko = 0.4 * k / n  # uncertainty 1 - max(p_KO, p_OK) = 0.4 k / n: distinct, increasing
        out[name] = pd.DataFrame({"sample_id": ref["sample_id"], "predicted_state": "OK", "scores KO": p_ko,
                                  "scores OK": 1 - p_ko, "scores UNKNOWN": 0.0, "scores OOD": k.astype(float),
                                  "compute_time": 0.01})[list(PRED_COLUMNS)]
    return out


def _score_attack(make_reference, root, disclosure=None):
    """Score the attack submission on a fresh reference; return (reference frames, output folder)."""
    ref_dir = make_reference(root / "reference_data", n_perf=2000, ko_share=0.06, seed=5)
    # drift with OOD labels spread over the sequence: what the output shows, not the set's layout, is tested
    drift = pd.read_parquet(ref_dir / "drift.parquet")
    drift["ood"] = np.random.default_rng(1).permutation(drift["ood"].to_numpy())
    drift.to_parquet(ref_dir / "drift.parquet", index=False)
    config = yaml.safe_load(DEFAULT_CONFIG_PATH.read_text())
    config["extras"]["bootstrap"]["n"] = 20
    assert config["disclosure"]["min_samples"] == MIN_SAMPLES
    config["disclosure"] = disclosure or config["disclosure"]
    (ref_dir / "scoring.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    reference = {name: pd.read_parquet(ref_dir / f"{name}.parquet") for name in SET_NAMES}
    pred = root / "predictions"
    pred.mkdir()
    for name, frame in _attack_submission(reference).items():
        frame.to_parquet(pred / f"{name}.parquet", index=False)
    _attack_maps_and_masks(reference, ref_dir, pred)
    out = root / "out"
    score(ref_dir, pred, out, verify=False)
    return reference, out


def _attack_maps_and_masks(reference, ref_dir, pred):
    """Defect masks for the KO images of the performance set, and maps whose peak walks with the input order:
    the localisation summaries (issue 20) are published too."""
    import cv2

    perf = reference["performance"]
    folder = ref_dir / "masks" / "performance"
    folder.mkdir(parents=True)
    for sid in perf.loc[perf["class"] == "KO", "sample_id"]:
        mask = np.zeros((16, 16), np.uint8)
        mask[:8, :8] = 255
        cv2.imwrite(str(folder / f"{sid}.png"), mask)
    maps = []
    for k in range(len(perf)):
        m = np.zeros((4, 4), np.uint8)
        m[(k // 4) % 4, k % 4] = 255
        maps.append(m.tobytes())
    pd.DataFrame({"sample_id": perf["sample_id"], "height": 4, "width": 4, "map": maps}).to_parquet(
        pred / "performance.explainability.parquet", index=False)


@pytest.fixture(scope="module")
def scored(reference_maker, tmp_path_factory):
    return _score_attack(reference_maker, tmp_path_factory.mktemp("leak"))


def _read_back(out) -> list:
    curves = []
    for path in out.iterdir():
        text = path.read_text()
        curves += _curves_in_json(json.loads(text), []) if path.suffix == ".json" else _curves_in_html(text)
    return curves


def _targets(reference: dict) -> list:
    """(set, labels in input order (1 = minority label), n_pos, n_neg) per attackable labelling."""
    targets = []
    for name, ref in reference.items():
        labels = (ref["class"] == "KO").to_numpy().astype(int)
        if "ood" in ref.columns:
            labels = ref["ood"].to_numpy().astype(int)
        pos = int(labels.sum())
        targets.append((name, labels, pos, len(labels) - pos))
    return targets


# --- what the output shows -----------------------------------------------------------------------
def _curves_in_json(node, out):
    """Every pair of equal-length numeric lists in a dict, and every numeric list against its index."""
    if isinstance(node, dict):
        lists = {k: v for k, v in node.items() if isinstance(v, list) and len(v) >= 2
                 and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)}
        for a in lists:
            out.append((np.arange(len(lists[a]), dtype=float), np.asarray(lists[a], float)))
            for b in lists:
                if a != b and len(lists[a]) == len(lists[b]):
                    out.append((np.asarray(lists[a], float), np.asarray(lists[b], float)))
        for v in node.values():
            _curves_in_json(v, out)
    elif isinstance(node, list):
        for v in node:
            _curves_in_json(v, out)
    return out


NUMBER = r"-?\d+(?:\.\d+)?(?:e-?\d+)?"


def _curves_in_html(html: str) -> list:
    """Every SVG path (its vertices) and every run of consecutive markers (<use x= y=>)."""
    curves = []
    for d in re.findall(r'<path[^>]*\sd="([^"]+)"', html):
        xy = np.array([float(v) for v in re.findall(NUMBER, d)])
        if len(xy) >= 6 and len(xy) % 2 == 0:
            curves.append((xy[0::2], -xy[1::2]))  # SVG y points down
    for run in re.findall(r"((?:<use [^>]*/>\s*){3,})", html):
        pts = [(float(x), -float(y)) for x, y in re.findall(rf'x="({NUMBER})"\s+y="({NUMBER})"', run)]
        if len(pts) >= 3:
            xy = np.array(pts)
            curves.append((xy[:, 0], xy[:, 1]))
    return curves


# --- the attack ----------------------------------------------------------------------------------
def _shares(x, y, n, n_pos, n_neg, roc_like):
    """Per-rank share of the minority label implied by a curve (None when the curve cannot be read so)."""
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    if not (np.isfinite(x).all() and np.isfinite(y).all()) or x[-1] <= x[0]:
        return None
    x = (x - x[0]) / (x[-1] - x[0])
    span = y.max() - y.min()
    if span <= 0:
        return None
    if y[-1] < y[0]:
        y = -y
    y = (y - y.min()) / span
    dx, dy = np.diff(x), np.diff(y)
    if roc_like:
        pos, neg = np.clip(dy, 0, None) * n_pos, np.clip(dx, 0, None) * n_neg
        size = pos + neg
        keep = size > 0
        if not keep.any():
            return None
        pos, size = pos[keep], size[keep]
        edges = np.r_[0, np.cumsum(size)] / size.sum()
        step_share = pos / size
    else:
        keep = dx > 0
        if not keep.any():
            return None
        edges = np.r_[0, np.cumsum(dx[keep])]
        step_share = dy[keep] / dx[keep] * (n_pos / n)  # so that the mean share is the prior
    where = np.clip(np.searchsorted(edges, (np.arange(n) + 0.5) / n, side="right") - 1, 0, len(step_share) - 1)
    return step_share[where]


def best_recovery(curves, targets) -> dict:
    """Best accuracy of every attempt on every (curve, set, order): {set: (accuracy, how)}."""
    best = {}
    for name, labels, n_pos, n_neg in targets:
        n = len(labels)
        top = (0.0, "")
        for i, (x, y) in enumerate(curves):
            if len(x) < 2:
                continue
            for order_name, truth in (("input order", labels), ("reversed", labels[::-1])):
                for roc_like in (False, True):
                    share = _shares(np.asarray(x, float), np.asarray(y, float), n, n_pos, n_neg, roc_like)
                    if share is None:
                        continue
                    guesses = {"majority": (share > 0.5).astype(int)}
                    picked = np.zeros(n, dtype=int)
                    picked[np.argsort(-share, kind="stable")[:n_pos]] = 1
                    guesses["top-m"] = picked
                    for how, guess in guesses.items():
                        acc = float(np.mean(guess == truth))
                        if acc > top[0]:
                            top = (acc, f"curve {i}, {order_name}, {'ROC' if roc_like else 'rank'}, {how}")
        best[name] = top
    return best


def chance_bound(n, p, m=MIN_SAMPLES, z=4.0) -> float:
    """What block-majority guessing over aggregates of m samples allows, plus z binomial standard errors."""
    k = np.arange(m + 1)
    pmf = np.array([math.comb(m, j) * p ** j * (1 - p) ** (m - j) for j in k])
    allowance = float(np.sum(pmf * np.maximum(k, m - k)) / m)
    return allowance + z * math.sqrt(allowance * (1 - allowance) / n)


def test_the_attack_recovers_labels_from_per_sample_curves(scored):
    """The old output (a point per sample) gives every label back: the attack works."""
    reference, _ = scored
    targets = {t[0]: t for t in _targets(reference)}
    name, labels, n_pos, n_neg = targets["performance"]
    n = len(labels)
    curve = retention_curve(labels.astype(float), np.arange(n) / n)  # OK everywhere: error = KO label
    best = best_recovery([(np.arange(n + 1) / n, curve)], [targets["performance"]])
    assert best["performance"][0] == 1.0
    name, labels, n_pos, n_neg = targets["ood_real"]
    fpr, tpr, _ = roc_curve(labels, np.arange(len(labels), dtype=float), drop_intermediate=False)
    best = best_recovery([(fpr, tpr)], [targets["ood_real"]])
    assert best["ood_real"][0] == 1.0 > chance_bound(len(labels), n_pos / len(labels))


def test_uncoarsened_output_gives_every_label_back(reference_maker, tmp_path):
    """The whole output with one point per sample (min_samples 1): every label of every set comes back."""
    reference, out = _score_attack(reference_maker, tmp_path, {"min_samples": 1, "points": 100_000})
    best = best_recovery(_read_back(out), _targets(reference))
    for name, labels, n_pos, _ in _targets(reference):
        assert best[name][0] == 1.0 > chance_bound(len(labels), n_pos / len(labels)), name


def test_no_label_is_recovered_from_the_scoring_output(scored):
    reference, out = scored
    files = sorted(p.name for p in out.iterdir())
    assert files == ["detailed_results.html", "details.json", "scores.json"]
    curves = _read_back(out)
    assert len(curves) > 50  # the retention, ROC, drift, reliability and robustness curves are all read
    targets = _targets(reference)
    best = best_recovery(curves, targets)
    for name, labels, n_pos, n_neg in targets:
        n = len(labels)
        p = n_pos / n
        bound = chance_bound(n, p)
        acc, how = best[name]
        assert acc <= bound, f"{name}: {acc:.3f} of labels recovered ({how}), chance bound {bound:.3f}"
    # the page draws no per-sample marks: every marker run is short
    html = (out / "detailed_results.html").read_text()
    runs = re.findall(r"((?:<use [^>]*/>\s*){3,})", html)
    assert max((r.count("<use") for r in runs), default=0) <= 21


def test_the_analyses_are_published_and_attacked(scored):
    """Issue 20's numbers (cost-coverage, breaking points, drift timeline, localisation...) are in what is read."""
    reference, out = scored
    analyses = json.loads((out / "details.json").read_text())["analyses"]
    assert analyses["cost_coverage"]["available"] and len(analyses["cost_coverage"]["curve"]["cost"]) == 21
    assert analyses["localisation"]["available"] and analyses["localisation"]["all"]["n"] == \
        int((reference["performance"]["class"] == "KO").sum())
    assert analyses["drift_delay"]["timeline"]["median"] and analyses["breaking_points"]["ladders"]
    curves = _curves_in_json(analyses, [])
    assert len(curves) > 20
    html = (out / "detailed_results.html").read_text()
    assert 'id="analyses"' in html and "cost-coverage chart" in html and "drift timeline chart" in html
    targets = _targets(reference)
    best = best_recovery(curves + _curves_in_html(html[html.index('id="analyses"'):]), targets)
    for name, labels, n_pos, _ in targets:
        acc, how = best[name]
        assert acc <= chance_bound(len(labels), n_pos / len(labels)), f"{name}: {acc:.3f} ({how})"
