"""The whole criteria engine against independent routes (scikit-learn, pandas, plain loops)."""

import dataclasses

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import fbeta_score, precision_score, roc_auc_score

from challenge_welding.scoring.config import load_config
from challenge_welding.scoring.criteria import compute, prepare
from challenge_welding.scoring.inputs import read_frames
from challenge_welding.scoring.virtual import make_virtual


@pytest.fixture(scope="module")
def frames(reference_dir, tmp_path_factory):
    pred = make_virtual(reference_dir, "random", tmp_path_factory.mktemp("engine"), seed=2)
    return read_frames(reference_dir, pred)[0]


def _op(frame, config):
    """OP by pandas group-bys, straight from the words of docs/scoring.md."""
    cost = config.cost
    f = frame.assign(c=[cost[t][p] for t, p in zip(frame["class"], frame["predicted_state"])],
                     ideal=[cost[t][t] for t in frame["class"]],
                     human=[cost[t]["UNKNOWN"] for t in frame["class"]])
    means = f.groupby("welding-seams", observed=True)[["c", "ideal", "human"]].mean()
    w = np.array([config.seam_weights.get(s, config.default_seam_weight) for s in means.index])
    c, ideal, human = (float((w * means[k]).sum() / w.sum()) for k in ("c", "ideal", "human"))
    return (c - ideal) / (human - ideal)


def _ece(frame, bins=10):
    ko, ok = frame["scores KO"].to_numpy(), frame["scores OK"].to_numpy()
    conf = np.where(ko + ok > 0, np.maximum(ko, ok) / np.where(ko + ok > 0, ko + ok, 1), 0.5)
    correct = np.where(ko >= ok, "KO", "OK") == frame["class"].to_numpy().astype(str)
    total = 0.0
    for m in range(bins):
        inside = (conf >= m / bins) & ((conf < (m + 1) / bins) if m < bins - 1 else (conf <= 1))
        if inside.any():
            total += inside.sum() / len(conf) * abs(correct[inside].mean() - conf[inside].mean())
    return total


def test_criteria_match_independent_computations(frames, reference_dir):
    config = load_config(reference_dir / "scoring.yaml")
    c = compute(prepare(frames, config), config)["criteria"]
    perf = frames["performance"]
    y, p = perf["class"].astype(str), perf["predicted_state"].astype(str)
    assert c["ml"] == pytest.approx(fbeta_score(y, p, beta=1.0, labels=["KO"], average="macro", zero_division=0))
    assert c["op"] == pytest.approx(_op(perf, config))
    assert c["time_p95"] == pytest.approx(np.percentile(perf["compute_time"], 95))
    assert c["ucalib_ko"] == pytest.approx(_ece(perf[perf["class"] == "KO"]))
    assert c["ucalib_ok"] == pytest.approx(_ece(perf[perf["class"] == "OK"]))
    for key, name in (("ood_real", "ood_real"), ("ood_syn", "ood_synthetic"), ("ood_d", "drift")):
        f = frames[name]
        assert c[key] == pytest.approx(roc_auc_score(f["ood"], f["scores OOD"]))
    drift = frames["drift"]
    assert c["op_d"] == pytest.approx(_op(drift[drift["ood"] == 0], config))
    assert c["op_g"] == pytest.approx(_op(frames["generalization"], config))
    rob = frames["robustness"]
    clean = rob[rob["perturbation"] == "none"]
    for x, key in (("rotation", "r_rot"), ("blur", "r_blur")):
        part = pd.concat([clean.assign(level=0.0), rob[rob["perturbation"] == x]])
        levels = sorted(part["level"].unique())
        ml = [fbeta_score(g["class"].astype(str), g["predicted_state"].astype(str), beta=1.0, labels=["KO"],
                          average="macro", zero_division=0) for _, g in part.groupby("level")]
        area = sum((ml[i] + ml[i + 1]) / 2 * (levels[i + 1] - levels[i]) for i in range(len(levels) - 1))
        assert c[key] == pytest.approx(area / (levels[-1] - levels[0]))


def test_ml_setting_switches_the_metric(frames, reference_dir):
    config = load_config(reference_dir / "scoring.yaml")
    perf = frames["performance"]
    y, p = perf["class"].astype(str), perf["predicted_state"].astype(str)
    config = dataclasses.replace(config, ml=dataclasses.replace(config.ml, average="precision"))
    c = compute(prepare(frames, config), config)["criteria"]
    assert c["ml"] == pytest.approx(precision_score(y, p, labels=["KO"], average="macro", zero_division=0))
    config = dataclasses.replace(config, ml=dataclasses.replace(config.ml, average="macro"))
    c = compute(prepare(frames, config), config)["criteria"]
    assert c["ml"] == pytest.approx(fbeta_score(y, p, beta=1.0, labels=["KO", "OK"], average="macro", zero_division=0))
