"""A realistic details dict + merged frames, in the schema of the team guide, for the page tests.

The frames imitate a decent component (a few % errors, hedged probabilities, an OOD score
that rises on OOD inputs, ML falling with perturbation level); the details are derived
from them where the report reads them (confusion, costs, robustness curves), the KPI
numbers are plausible constants (the page only displays them).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import challenge_welding
from challenge_welding.scoring.config import load_config
from challenge_welding.scoring.metrics import seam_sample_weights

CONFIG_PATH = Path(challenge_welding.__file__).parent / "scoring" / "default_scoring.yaml"
LEVELS = {"blur": [1, 2, 3, 4, 5], "luminance": [-0.6, -0.3, 0.3, 0.6],
          "rotation": [-30, -15, 15, 30], "translation": [5, 10, 20]}


def load_default_config():
    return load_config(CONFIG_PATH)


def _predictions(rng, y, difficulty, ood=None):
    """Probabilities, answers and OOD scores of a component that errs more when `difficulty` grows."""
    n = len(y)
    ko = y == "KO"
    signal = np.where(ko, 1.0, -1.0) * (2.5 - 2.0 * difficulty) + rng.normal(0, 1.0, n)
    p_ko = 1 / (1 + np.exp(-signal - 1.0))  # leaning towards KO: missing a defect costs most
    p_unk = np.clip(0.8 - np.abs(p_ko - 0.5) * 2.5, 0, None) * 0.7
    p_ok = 1 - p_ko
    p_ko, p_ok = p_ko * (1 - p_unk), p_ok * (1 - p_unk)
    state = np.where(p_ko >= p_ok, "KO", "OK")
    state = np.where(p_unk > np.maximum(p_ko, p_ok), "UNKNOWN", state)
    ood_score = np.abs(rng.normal(0.3, 0.25, n))
    if ood is not None:
        ood_score = ood_score + ood * np.abs(rng.normal(1.2, 0.5, n))
        state = np.where((ood == 1) & (ood_score > 1.0), "UNKNOWN", state)
    return state, p_ko, p_ok, p_unk, ood_score


def _frame(rng, y, seams, difficulty=0.0, ood=None, **extra):
    state, p_ko, p_ok, p_unk, s = _predictions(rng, np.asarray(y), difficulty, ood)
    n = len(y)
    df = pd.DataFrame({"sample_id": [f"s{i:07d}" for i in range(n)], "class": y, "welding-seams": seams,
                       **extra})
    if ood is not None:
        df["ood"] = ood
    df["predicted_state"] = state
    df["scores KO"], df["scores OK"], df["scores UNKNOWN"], df["scores OOD"] = p_ko, p_ok, p_unk, s
    df["compute_time"] = rng.gamma(20, 0.001, n)
    return df


def make_frames(n_perf: int = 4000, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)

    def classes(n, ko_share=0.06):
        return np.where(rng.random(n) < ko_share, "KO", "OK")

    def seams(n, names=("c102", "c20", "c33"), p=(0.39, 0.22, 0.39)):
        return rng.choice(names, n, p=p)

    frames = {"performance": _frame(rng, classes(n_perf), seams(n_perf), 0.1)}
    parts = []
    n_clean = max(n_perf // 20, 60)
    parts.append(_frame(rng, classes(n_clean, 0.2), seams(n_clean), 0.1, perturbation="none", level=0.0))
    for kind, levels in LEVELS.items():
        for lv in levels:
            severity = abs(lv) / max(abs(v) for v in levels)
            parts.append(_frame(rng, classes(n_clean, 0.2), seams(n_clean), 0.1 + 0.6 * severity,
                                perturbation=kind, level=float(lv)))
    frames["robustness"] = pd.concat(parts, ignore_index=True)
    for name in ("ood_real", "ood_synthetic"):
        n = max(n_perf // 8, 40)
        ood = (np.arange(n) % 2).astype(int)
        frames[name] = _frame(rng, classes(n), seams(n), 0.2, ood=ood)
    n = max(n_perf // 8, 40)
    frames["generalization"] = _frame(rng, classes(n), seams(n, ("c19", "c34", "c101"), (0.3, 0.3, 0.4)), 0.35)
    n = max(n_perf // 5, 50)
    ood = (np.arange(n) >= int(0.7 * n)).astype(int)
    drift = _frame(rng, classes(n, 0.1), seams(n), 0.15, ood=ood, position=np.arange(n))
    drift["scores OOD"] += np.linspace(0, 0.6, n)  # the detector reacts a little to the growing drift
    frames["drift"] = drift
    for name, df in frames.items():  # unique ids across sets (the robustness parts restart at 0)
        df["sample_id"] = [f"{name[:4]}{i:07d}" for i in range(len(df))]
    return frames


def _cost(frame, answers, cost, config):
    names, codes = np.unique(frame["welding-seams"].to_numpy().astype(str), return_inverse=True)
    v = seam_sample_weights(codes, [config.seam_weights.get(s, config.default_seam_weight) for s in names])
    unit = np.array([cost[t][a] for t, a in zip(frame["class"], answers)])
    return float(np.mean(v * unit))


def make_details(frames: dict, config: dict) -> dict:
    """details.json content in the guide's schema, derived from `frames` where the page reads it."""
    from sklearn.metrics import f1_score

    sets = {}
    for name, df in frames.items():
        conf = {t: {p: int(((df["class"] == t) & (df["predicted_state"] == p)).sum())
                    for p in ("KO", "OK", "UNKNOWN")} for t in ("KO", "OK")}
        ood = df["ood"].to_numpy() if "ood" in df else np.zeros(len(df), int)
        ideal = np.where(ood == 1, "UNKNOWN", df["class"])
        sets[name] = {"n": len(df), "n_KO": int((df["class"] == "KO").sum()), "n_OK": int((df["class"] == "OK").sum()),
                      "n_ood": int(ood.sum()) if "ood" in df else None, "confusion": conf,
                      "cost": _cost(df, df["predicted_state"], config.cost, config),
                      "cost_ideal": _cost(df, ideal, config.cost, config),
                      "cost_human": _cost(df, ["UNKNOWN"] * len(df), config.cost, config),
                      "sha256": hashlib.sha256(name.encode()).hexdigest()}
    rob = frames["robustness"]
    robustness = {}
    for kind in LEVELS:
        sub = rob[(rob["perturbation"] == kind) | (rob["perturbation"] == "none")]
        levels = sorted(sub["level"].unique())
        ml = [f1_score(sub[sub["level"] == lv]["class"], sub[sub["level"] == lv]["predicted_state"],
                       labels=["KO"], average="micro", zero_division=0) for lv in levels]
        area = np.trapezoid(ml, levels) / (levels[-1] - levels[0])
        robustness[kind] = {"levels": [float(v) for v in levels], "ml": [float(v) for v in ml], "r": float(area)}
    kpis = {}
    raw = {"perf": 0.71, "uncertainty": 0.42, "robustness": 0.63, "ood": 0.86, "generalization": 0.68, "drift": 0.74}
    crit = {"perf": {"op": 0.31, "ml": 0.83, "time_p95": 0.024}, "uncertainty": {"uop": 0.55, "ucalib_ko": 0.08, "ucalib_ok": 0.04},
            "robustness": {"r_blur": robustness["blur"]["r"], "r_lum": robustness["luminance"]["r"],
                           "r_rot": robustness["rotation"]["r"], "r_trans": robustness["translation"]["r"]},
            "ood": {"ood_syn": 0.88, "ood_real": 0.85}, "generalization": {"op_g": 0.9, "ml_g": 0.7},
            "drift": {"op_d": 0.4, "ood_d": 0.81}}
    for i, (k, r) in enumerate(raw.items()):
        kind = ["three-piece", "three-piece", "two-piece", "three-piece", "unscaled", "three-piece"][i]
        kpis[k] = {"raw": r, "rescaled": min(1.0, r * 1.1), "ci": [r * 1.1 - 0.04, min(1.0, r * 1.1 + 0.03)],
                   "alpha1": None if kind == "unscaled" else (-0.1 if kind == "two-piece" else 0.12),
                   "alpha2": None if kind == "unscaled" else 0.8, "rescaling": kind,
                   "weight": config.final_weights[k], "criteria": crit[k]}
    score = 100 * sum(kpis[k]["rescaled"] * kpis[k]["weight"] for k in kpis)
    scores = {"score": score, **{k: v["rescaled"] for k, v in kpis.items()},
              **{ck: cv for c in crit.values() for ck, cv in c.items()}}
    perf = frames["performance"]["compute_time"]
    return {
        "score": score, "score_ci": [score - 3.1, score + 2.7], "scores": scores, "kpis": kpis,
        "criteria_ci": {ck: [cv * 0.95, cv * 1.05] for c in crit.values() for ck, cv in c.items()},
        "sets": sets, "robustness": robustness,
        "time": {"p95": float(np.percentile(perf, 95)), "median": float(np.median(perf)), "n": len(perf)},
        "undefined_cases": [{"metric": "ECE_KO", "set": "performance", "case": "bin 3 empty",
                             "resolution": "empty bins skipped"}],
        "warnings": ["robustness: 3 rows renormalised (probabilities off 1 by more than 1e-3)"],
        "extras": {},
        "metric_card": {"metrics": [
            {"name": "F-beta of KO (ML)", "set": "performance", "formula": "(1+β²) P R / (β² P + R)",
             "parameters": {"beta": 1.0, "average": "binary", "pos_label": "KO", "zero_division": 0.0}},
            {"name": "ECE", "set": "performance", "formula": "Σ |B_m|/n |acc − conf|",
             "parameters": {"bins": 10, "binning": "equal width, last closed"}}],
            "config_sha256": hashlib.sha256(CONFIG_PATH.read_bytes()).hexdigest(),
            "inputs_sha256": {k: v["sha256"] for k, v in sets.items()},
            "versions": {"challenge-welding": "1.1.0", "numpy": np.__version__}},
        "config": config.as_dict(),
    }


@pytest.fixture(scope="session")
def scoring_config():
    return load_default_config()


@pytest.fixture(scope="session")
def details_factory():
    """make_details, for tests that alter the frames (test modules must not import conftest by name)."""
    return make_details


@pytest.fixture(scope="session")
def report_frames() -> dict:
    return make_frames(4000, seed=0)


@pytest.fixture(scope="session")
def report_details(report_frames, scoring_config) -> dict:
    from challenge_welding.scoring.analyses.extras import compute_extras

    details = make_details(report_frames, scoring_config)
    details["extras"] = compute_extras(report_frames, scoring_config)
    return details
