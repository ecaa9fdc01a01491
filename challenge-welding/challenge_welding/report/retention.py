"""Error-retention curves and R-AUC (Shifts, Malinin et al. 2021; SPEC "Reported beyond the score").

Samples are retained from the most to the least certain; a rejected sample takes the
oracle's answer (error 0). With e_k the per-sample error sorted by increasing
uncertainty, the curve at retention fraction j/N is

    E(j/N) = (e_(1) + ... + e_(j)) / N        (divided by the full N, as in Shifts)

so E(0) = 0 and E(1) = mean error. Samples with equal uncertainty cannot be ordered by
it: they are rejected together, i.e. each takes the mean error of its uncertainty group
(Shifts' ``group_by_uncertainty``), which is also the expected curve over random
tie-breaking.

R-AUC is the exact area under the piecewise-linear curve on [0, 1] (trapezoids between
the N + 1 points). Shifts' code averages the N + 1 points instead; the two differ by at
most E(1) / (2N). Random order: the expected curve is the straight line to E(1), area
E(1) / 2. Oracle: samples ordered by their own error (largest rejected first).
Lower is better for all three. An empty set gives NaN (reported as undefined).

Errors used here (written by hand: no library computes cost-weighted retention curves):
- misclassification: predicted state != true class, UNKNOWN counts as an error;
- excess cost: seam-weight-adjusted cost of the prediction minus that of the true class,
  divided by C(human) - C(ideal), so that the curve ends at the set's OP (SPEC).
"""

from __future__ import annotations

import numpy as np


def uncertainty_from_probs(p_ko: np.ndarray, p_ok: np.ndarray) -> np.ndarray:
    """Shifts-style uncertainty 1 - max(p_KO, p_OK): mass on UNKNOWN counts as uncertain."""
    return 1.0 - np.maximum(np.asarray(p_ko, float), np.asarray(p_ok, float))


def _group_means(errors: np.ndarray, uncertainty: np.ndarray):
    """Errors sorted by increasing uncertainty, each replaced by its tie group's mean."""
    if len(errors) == 0:
        return np.zeros(0)
    order = np.argsort(uncertainty, kind="stable")
    u, e = uncertainty[order], errors[order]
    start = np.flatnonzero(np.r_[True, u[1:] != u[:-1]])  # first index of each tie group
    counts = np.diff(np.r_[start, len(u)])
    return np.repeat(np.add.reduceat(e, start) / counts, counts)


def retention_curve(errors, uncertainty) -> np.ndarray:
    """Curve values E(j/N) for j = 0..N (length N + 1), ties averaged per uncertainty group."""
    errors = np.asarray(errors, float)
    uncertainty = np.asarray(uncertainty, float)
    n = len(errors)
    curve = np.zeros(n + 1)
    if n:
        curve[1:] = np.cumsum(_group_means(errors, uncertainty)) / n
    return curve


def area(curve: np.ndarray) -> float:
    """Trapezoid area of a curve sampled at j/N, j = 0..N; NaN for an empty set."""
    n = len(curve) - 1
    if n <= 0:
        return float("nan")
    return float((curve.sum() - (curve[0] + curve[-1]) / 2) / n)


def retention_aucs(errors, uncertainty) -> dict:
    """R-AUC of the uncertainty order, of a random order and of the oracle order, and the mean error."""
    errors = np.asarray(errors, float)
    curve = retention_curve(errors, uncertainty)
    oracle = retention_curve(errors, errors)  # least error retained first
    mean_error = float(curve[-1]) if len(errors) else float("nan")
    return {"r_auc": area(curve), "random_r_auc": mean_error / 2, "oracle_r_auc": area(oracle),
            "mean_error": mean_error, "n": int(len(errors)), "curve": curve, "oracle_curve": oracle}


def downsample(curve: np.ndarray, points: int = 200) -> dict:
    """At most `points` + 2 (retention, value) pairs of a curve over j/N, endpoints kept.

    Half the points are even in retention, half even in value (the curve rises where the
    errors are, often in the last few per cent), so a steep end is drawn as it is.
    """
    n = len(curve) - 1
    if n <= 0:
        return {"retention": [], "value": []}
    half = max(points // 2, 1)
    by_value = np.searchsorted(curve, np.linspace(curve[0], curve[-1], half + 1), side="left")
    idx = np.unique(np.r_[np.linspace(0, n, min(half, n) + 1).round().astype(np.int64),
                          np.clip(by_value, 0, n), 0, n])
    return {"retention": (idx / n).round(6).tolist(), "value": curve[idx].round(9).tolist()}


def misclassification_errors(y_true, predicted_state) -> np.ndarray:
    """1 where the predicted state differs from the true class (UNKNOWN is an error), else 0."""
    return (np.asarray(predicted_state) != np.asarray(y_true)).astype(float)


def sample_weights(seams, seam_weights: dict, default_seam_weight: float) -> np.ndarray:
    """Per-sample weights v_k whose plain mean reproduces the seam-weighted mean of SPEC.

    C = sum_s w_s mean_{k in s} c_k / sum_s w_s = mean_k v_k c_k with
    v_k = N w_s / (n_s sum_{s present} w_s).
    """
    seams = np.asarray(seams).astype(str)
    n = len(seams)
    if n == 0:
        return np.zeros(0)
    names, inverse, counts = np.unique(seams, return_inverse=True, return_counts=True)
    w = np.array([float(seam_weights.get(s, default_seam_weight)) for s in names])
    if w.sum() <= 0:  # all weights zero: fall back to a plain mean
        w = np.ones_like(w)
    return (n * w / (counts * w.sum()))[inverse]


def excess_cost_errors(y_true, predicted_state, seams, cost: dict, seam_weights: dict,
                       default_seam_weight: float, ideal_state=None):
    """Per-sample excess cost, in units of the set's human-minus-ideal cost gap.

    e_k = v_k (cost[y_k][x_k] - cost[y_k][ideal_k]) / (C(human) - C(ideal)), v_k the seam
    weights above, ideal = the true class (or `ideal_state`), human = UNKNOWN everywhere.
    Its mean is the set's OP. When the gap is 0 (no sample, or every ideal answer is
    UNKNOWN) the raw excess cost is returned unnormalised; the second value says which.
    """
    y = np.asarray(y_true).astype(str)
    x = np.asarray(predicted_state).astype(str)
    ideal = y if ideal_state is None else np.asarray(ideal_state).astype(str)
    v = sample_weights(seams, seam_weights, default_seam_weight)

    def unit_cost(states):
        out = np.zeros(len(y))
        for t in ("KO", "OK"):
            for p in ("KO", "OK", "UNKNOWN"):
                out[(y == t) & (states == p)] = float(cost[t][p])
        return out

    c_ideal = unit_cost(ideal)
    excess = v * (unit_cost(x) - c_ideal)
    gap = float(np.mean(v * (unit_cost(np.full(len(y), "UNKNOWN")) - c_ideal))) if len(y) else 0.0
    if gap > 0:
        return excess / gap, True
    return excess, False
