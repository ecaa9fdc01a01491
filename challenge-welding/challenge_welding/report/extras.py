"""Reported beyond the score (never changes it): trust opinions and error-retention curves.

`compute_extras(frames, config)` is stored as details["extras"]. Per set, rows labelled
OOD (column `ood` = 1) are left out: both extras judge the class probabilities, and an
OOD image has no right class answer. Everything returned is JSON-serialisable (NaN ->
None) and small: curves are downsampled for the page.
"""

from __future__ import annotations

import math

import numpy as np

from ..constants import SET_NAMES
from .retention import (
    downsample, excess_cost_errors, misclassification_errors, retention_aucs,
    uncertainty_from_probs,
)
from .trust_opinion import model_opinion

UNCERTAINTY = "1 - max(p_KO, p_OK)"
DEFAULT_COST = {"KO": {"KO": 26.4, "OK": 3000.0, "UNKNOWN": 41.0},
                "OK": {"KO": 30.0, "OK": 0.4, "UNKNOWN": 20.0}}


def cfg_get(config, *keys, default=None):
    """config[k1][k2]... for a dict or attribute-style config; `default` when a key is missing."""
    node = config
    for key in keys:
        if node is None:
            return default
        if isinstance(node, dict):
            node = node.get(key)
        else:
            node = getattr(node, key, None)
    return default if node is None else node


def _clean(obj):
    """Plain Python numbers, NaN/inf -> None, so json.dumps writes standard JSON."""
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, (np.floating, float)):
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj


def _round_opinion(op: dict) -> dict:
    return {k: (round(float(v), 9) if isinstance(v, (float, np.floating)) else v) for k, v in op.items()}


def set_extras(frame, config, name: str = "") -> dict:
    """Trust opinion and both retention curves for one set's merged frame.

    "undefined_cases" lists, in details.json's schema, what had no defined value and how
    it was resolved (prEN 18281 6.1): rows with p_KO + p_OK = 0, a class absent from the
    set, an excess cost that could not be normalised.
    """
    bins = int(cfg_get(config, "extras", "trust", "bins", default=10))
    prior_weight = float(cfg_get(config, "extras", "trust", "prior_weight", default=2.0))
    points = int(cfg_get(config, "extras", "retention", "points", default=200))
    cost = cfg_get(config, "cost", default=DEFAULT_COST)
    seam_weights = cfg_get(config, "seam_weights", default={})
    default_w = float(cfg_get(config, "default_seam_weight", default=1 / 3))

    n_all = len(frame)
    if "ood" in frame.columns:
        frame = frame[frame["ood"].to_numpy() != 1]
    y = frame["class"].to_numpy().astype(str)
    x = frame["predicted_state"].to_numpy().astype(str)
    p_ko = frame["scores KO"].to_numpy(float)
    p_ok = frame["scores OK"].to_numpy(float)
    seams = frame["welding-seams"].to_numpy() if "welding-seams" in frame.columns else np.full(len(y), "")

    cases = []

    def case(metric, what, resolution):
        cases.append({"metric": metric, "set": name, "case": what, "resolution": resolution})

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
        c["bins"] = [_round_opinion(b) for b in c["bins"]]
    trust["model"] = _round_opinion(trust["model"])

    unc = uncertainty_from_probs(p_ko, p_ok)
    retention = {}
    excess, normalised = excess_cost_errors(y, x, seams, cost, seam_weights, default_w)
    for name, errors in (("misclassification", misclassification_errors(y, x)), ("excess_cost", excess)):
        res = retention_aucs(errors, unc)
        retention[name] = {
            "r_auc": res["r_auc"], "random_r_auc": res["random_r_auc"],
            "oracle_r_auc": res["oracle_r_auc"], "mean_error": res["mean_error"],
            "curve": downsample(res["curve"], points), "oracle_curve": downsample(res["oracle_curve"], points),
        }
    retention["excess_cost"]["unit"] = "OP" if normalised else "raw cost"
    if not normalised:
        case("excess-cost retention", "C(human) - C(ideal) = 0", "excess cost left in raw cost units")
    return {"n": int(len(y)), "n_excluded_ood": int(n_all - len(y)), "trust": trust, "retention": retention,
            "undefined_cases": cases}


def compute_extras(frames, config) -> dict:
    """Trust opinions and retention curves per set present (performance first).

    Returns {"primary_set", "uncertainty", "parameters", "sets": {set: set_extras}}.
    A set absent from `frames` or empty after dropping OOD rows is skipped and listed in
    "skipped".
    """
    out = {"primary_set": "performance", "uncertainty": UNCERTAINTY, "sets": {}, "skipped": [],
           "parameters": {
               "trust_bins": int(cfg_get(config, "extras", "trust", "bins", default=10)),
               "trust_prior_weight": float(cfg_get(config, "extras", "trust", "prior_weight", default=2.0)),
               "trust_base_rate": "class prior",
               "trust_fusion": "cumulative (evidence summed)",
               "retention_points": int(cfg_get(config, "extras", "retention", "points", default=200)),
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
    return _clean(out)
