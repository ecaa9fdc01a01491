"""Error-retention curves and R-AUC (Shifts, Malinin et al. 2021; docs/scoring.md "Reported beyond the score").

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
  divided by C(human) - C(ideal), so that the curve ends at the set's OP (docs/scoring.md); the costs
  and seam weights are the score's own (scoring.metrics).

Published curves are cut at fixed retention steps (scoring.disclosure.curve_steps): a
curve with one point per sample would give labels back.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from challenge_welding.contract.names import CLASSES, STATES
from challenge_welding.scoring import metrics as m
from challenge_welding.scoring.criteria import cost_matrix


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


def misclassification_errors(y_true, predicted_state) -> np.ndarray:
    """1 where the predicted state differs from the true class (UNKNOWN is an error), else 0."""
    return (np.asarray(predicted_state) != np.asarray(y_true)).astype(float)


def excess_cost_errors(y_true, predicted_state, seams, cost: dict, seam_weights: dict,
                       default_seam_weight: float, ideal_state=None):
    """Per-sample excess cost, in units of the set's human-minus-ideal cost gap.

    e_k = v_k (cost[y_k][x_k] - cost[y_k][ideal_k]) / (C(human) - C(ideal)), with v_k the
    per-sample seam weights of ``scoring.metrics.seam_sample_weights`` and C the score's
    seam-weighted cost; ideal = the true class (or ``ideal_state``), human = UNKNOWN
    everywhere. Its mean is the set's OP. When the gap is 0 (no sample, or every ideal
    answer is UNKNOWN) the raw excess cost is returned unnormalised; the second value says which.
    """
    y = _codes(y_true, CLASSES)
    x = _codes(predicted_state, STATES)
    ideal = y if ideal_state is None else _codes(ideal_state, STATES)
    names, seam_codes = np.unique(np.asarray(seams).astype(str), return_inverse=True)
    w = np.array([float(seam_weights.get(s, default_seam_weight)) for s in names])
    matrix = cost_matrix(cost)
    unit = np.stack([m.sample_costs(y, x, matrix), m.sample_costs(y, ideal, matrix),
                     m.sample_costs(y, np.full(len(y), m.UNKNOWN), matrix)], axis=1)
    excess = m.seam_sample_weights(seam_codes, w) * (unit[:, 0] - unit[:, 1])
    if len(y) == 0:
        return excess, False
    _, c_ideal, c_human = m.seam_weighted_cost(unit, seam_codes, w)
    gap = float(c_human - c_ideal)
    if gap > 0:
        return excess / gap, True
    return excess, False


def _codes(labels, names):
    codes = pd.Index(list(names)).get_indexer(np.asarray(labels).astype(str))
    if (codes < 0).any():
        raise ValueError(f"labels outside {', '.join(names)}")
    return codes
