"""Reported beyond the score (never changes it), in a form safe to publish: details["extras"].

`compute_extras(frames, config)` gives, per set, the trust opinion and both error-retention
curves (rows labelled OOD, column `ood` = 1, left out: both judge the class probabilities,
and an OOD image has no right class answer); and the reduced data of the page's charts:
reliability bins of the performance set, ROC curves of the OOD sets, the drift sequence
in bins. Everything published aggregates at least config.disclosure.min_samples
samples per number or curve point (scoring.disclosure); summaries (R-AUC, AUROC, ECE)
use all samples. The arithmetic shared with the score comes from scoring (metrics,
disclosure); everything returned is JSON-serialisable (contract.checked.plain: NaN -> None).
"""

from __future__ import annotations


import numpy as np
import pandas as pd

from challenge_welding.contract.checked import plain
from challenge_welding.contract.names import CLASSES, OOD_SETS, SET_NAMES
from challenge_welding.scoring import metrics as m
from challenge_welding.scoring.config import load_config
from challenge_welding.scoring.criteria import UndefinedCases, label_index
from challenge_welding.scoring.disclosure import curve_steps, roc_points, sequence_bins
from challenge_welding.scoring.reliability import reliability_bins
from challenge_welding.scoring.retention import excess_cost_errors, misclassification_errors, retention_aucs, uncertainty_from_probs
from challenge_welding.scoring.trust_opinion import model_opinion

UNCERTAINTY = "1 - max(p_KO, p_OK)"


def _round_opinion(op: dict) -> dict:
    return {k: (round(float(v), 9) if isinstance(v, (float, np.floating)) else v) for k, v in op.items()}


def _public_bin(b: dict, min_samples: int) -> dict:
    """A trust bin below min_samples samples keeps its range and count only (its evidence is labels)."""
    if b["n"] >= min_samples:
        return b
    return {k: (v if k in ("lo", "hi", "rp", "n") else None) for k, v in b.items()}


def set_extras(frame, config, name: str = "") -> dict:
    """Trust opinion and both retention curves for one set's merged frame.

    "undefined_cases" lists, in details.json's schema, what had no defined value and how
    it was resolved (prEN 18281 6.1): rows with p_KO + p_OK = 0, a class absent from the
    set, an excess cost that could not be normalised.
    """
    bins, prior_weight = config.extras.trust.bins, config.extras.trust.prior_weight
    points, min_samples = config.disclosure.points, config.disclosure.min_samples
    cost, seam_weights, default_w = config.cost, config.seam_weights, config.default_seam_weight

    n_all = len(frame)
    if "ood" in frame.columns:
        frame = frame[frame["ood"].to_numpy() != 1]
    y = frame["class"].to_numpy().astype(str)
    x = frame["predicted_state"].to_numpy().astype(str)
    p_ko = frame["scores KO"].to_numpy(float)
    p_ok = frame["scores OK"].to_numpy(float)
    seams = frame["welding-seams"].to_numpy() if "welding-seams" in frame.columns else np.full(len(y), "")

    cases = UndefinedCases()  # the score's record: one schema, no duplicates

    def case(metric, what, resolution):
        cases.add(metric, name, f"{what}: {resolution}")

    n_zero = int(np.count_nonzero(p_ko + p_ok == 0))
    if n_zero:
        case("trust opinion", f"{n_zero} rows with p_KO + p_OK = 0 (all mass on UNKNOWN)",
             "binary probability 0.5 (no preference between KO and OK)")
    for c in ("KO", "OK"):
        if len(y) and not np.any(y == c):
            case("trust opinion", f"no true {c} sample", f"class {c} opinion from its negative evidence only "
                 "(base rate 0)")
    trust = model_opinion(y, p_ko, p_ok, bins=bins, prior_weight=prior_weight)
    for c in trust["classes"].values():
        c["opinion"] = _round_opinion(c["opinion"])
        c["bins"] = [_public_bin(_round_opinion(b), min_samples) for b in c["bins"]]
    trust["model"] = _round_opinion(trust["model"])

    unc = uncertainty_from_probs(p_ko, p_ok)
    retention = {}
    excess, normalised = excess_cost_errors(y, x, seams, cost, seam_weights, default_w)
    for name, errors in (("misclassification", misclassification_errors(y, x)), ("excess_cost", excess)):
        res = retention_aucs(errors, unc)
        retention[name] = {
            "r_auc": res["r_auc"], "random_r_auc": res["random_r_auc"],
            "oracle_r_auc": res["oracle_r_auc"], "mean_error": res["mean_error"],
            "curve": curve_steps(res["curve"], points, min_samples),
            "oracle_curve": curve_steps(res["oracle_curve"], points, min_samples),
        }
    retention["excess_cost"]["unit"] = "OP" if normalised else "raw cost"
    if not normalised:
        case("excess-cost retention", "C(human) - C(ideal) = 0", "excess cost left in raw cost units")
    return {"n": int(len(y)), "n_excluded_ood": int(n_all - len(y)), "trust": trust, "retention": retention,
            "undefined_cases": cases.records}


def compute_extras(frames, config=None) -> dict:
    """Trust opinions and retention curves per set present (performance first), and the charts' data.

    Returns {"primary_set", "uncertainty", "parameters", "sets": {set: set_extras}, "skipped",
    "reliability", "roc", "drift"}. A set absent from `frames` or empty after dropping OOD rows
    is skipped and listed in "skipped". ``config``: the validated scoring config (None: the
    packaged default).
    """
    config = config or load_config()
    disclosure = config.disclosure
    out = {"primary_set": "performance", "uncertainty": UNCERTAINTY, "sets": {}, "skipped": [],
           "parameters": {
               "trust_bins": config.extras.trust.bins,
               "trust_prior_weight": config.extras.trust.prior_weight,
               "trust_base_rate": "class prior",
               "trust_fusion": "cumulative (evidence summed)",
               "retention_points": disclosure.points,
               "min_samples": disclosure.min_samples,
               "retention_ties": "averaged per uncertainty group",
               "retention_area": "trapezoid over retention fraction [0, 1]",
               "ood_rows": "excluded"}}
    names = [s for s in SET_NAMES if s in frames] + [s for s in frames if s not in SET_NAMES]
    for name in names:
        frame = frames[name]
        if frame is None or len(frame) == 0:
            out["skipped"].append(name)
            continue
        extras = set_extras(frame, config, name)
        if extras["n"] == 0:
            out["skipped"].append(name)
            continue
        out["sets"][name] = extras
    out["reliability"] = reliability(frames.get("performance"), config)
    out["roc"] = {name: roc(frames.get(name), config) for name in OOD_SETS}
    out["drift"] = drift_sequence(frames.get("drift"), config)
    return plain(out)


def reliability(frame, config) -> dict:
    """Reliability bins of the true-KO and true-OK samples of the performance set ({} when absent)."""
    if frame is None or len(frame) == 0:
        return {}
    y = label_index(frame["class"], CLASSES)
    proba = frame[["scores KO", "scores OK", "scores UNKNOWN"]].to_numpy(float)
    bins, min_samples = config.kpis.uncertainty.ece_bins, config.disclosure.min_samples
    return {f"true {c}": reliability_bins(y[y == code], proba[y == code], bins, min_samples)
            for code, c in enumerate(CLASSES)}


def roc(frame, config) -> dict | None:
    """ROC curve of the OOD score against the OOD label in published steps; a note when undefined."""
    if frame is None:
        return None
    if len(frame) == 0 or "ood" not in frame.columns:
        return {"note": "no OOD label" if len(frame) else "empty set"}
    y = frame["ood"].to_numpy().astype(int)
    s = frame["scores OOD"].to_numpy(float)
    if y.min() == y.max():
        return {"note": "one OOD class only: AUROC undefined"}
    points = roc_points(y, s, config.disclosure.points, config.disclosure.min_samples)
    return {**points, "auroc": float(m.roc_auc(y, s)), "n": int(len(y)), "n_ood": int(y.sum())}


def drift_sequence(frame, config) -> dict | None:
    """The drift's OOD scores in sequence order, as bins of consecutive positions (median, OOD share)."""
    if frame is None or len(frame) == 0:
        return None
    if "position" in frame.columns:
        frame = frame.sort_values("position", kind="stable")
    score = frame["scores OOD"].to_numpy(float)
    ood = frame["ood"].to_numpy().astype(int) if "ood" in frame.columns else np.zeros(len(frame), int)
    return sequence_bins(score, ood, config.disclosure.points, config.disclosure.min_samples)


def sample_traces(frames, config):
    """Per-sample traces for organisers (never published): one row per sample of every set.

    Columns: set, sample_id, class, predicted_state, ood (label, -1 without one), uncertainty,
    misclassification, excess_cost (in the set's OP units, OOD-labelled rows: NaN), scores OOD.
    """
    parts = []
    for name, frame in frames.items():
        y = frame["class"].to_numpy().astype(str)
        x = frame["predicted_state"].to_numpy().astype(str)
        ood = frame["ood"].to_numpy().astype(int) if "ood" in frame.columns else np.full(len(frame), -1)
        inlier = ood != 1
        excess = np.full(len(frame), np.nan)
        excess[inlier] = excess_cost_errors(y[inlier], x[inlier], frame["welding-seams"].to_numpy()[inlier],
                                            config.cost, config.seam_weights, config.default_seam_weight)[0]
        parts.append(pd.DataFrame({
            "set": name, "sample_id": frame["sample_id"].astype(str).to_numpy(), "class": y, "predicted_state": x,
            "ood": ood, "uncertainty": uncertainty_from_probs(frame["scores KO"], frame["scores OK"]),
            "misclassification": misclassification_errors(y, x), "excess_cost": excess,
            "scores OOD": frame["scores OOD"].to_numpy(float)}))
    return pd.concat(parts, ignore_index=True)




