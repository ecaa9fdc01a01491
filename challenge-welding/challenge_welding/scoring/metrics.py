"""The criteria of the score as pure numpy functions.

Conventions shared by every function (in the manner of ``sklearn.metrics``):

* classes are integer codes: true class ``y_true`` in {0: KO, 1: OK}; decisions
  ``y_pred`` in {0: KO, 1: OK, 2: UNKNOWN}; probabilities ``proba`` of shape
  (n, 3) in the order (p_KO, p_OK, p_UNKNOWN);
* ``sample_weight`` is None, shape (n,) or shape (B, n). A 2-D weight holds B
  resamples as frequency weights (the bootstrap's per-sample draw counts); the
  function then returns one value per resample, shape (B,), computed with the
  same code as the point estimate (weights of 1);
* ``undefined`` is an optional list; each undefined case met (empty subset,
  zero denominator, single class...) is appended as one sentence saying how it
  was resolved, so that the metric card can list it.

Why by hand and not ``sklearn.metrics``: the bootstrap evaluates every criterion
on 1000 resamples at once through a (B, n) weight matrix, which scikit-learn's
functions do not accept (they would need a Python loop over resamples). The
tests check F-beta and AUROC against ``fbeta_score`` and ``roc_auc_score``.
"""

from __future__ import annotations

import numpy as np

KO, OK, UNKNOWN = 0, 1, 2


def group_sums(groups, n_groups, values, sample_weight=None):
    """``sum_{k in g} w_k values[k]`` per group g: values (n,) or (n, m) -> batch + (G,) or batch + (G, m).

    One weight vector (or none): a bincount per column, O(n). A (B, n) batch:
    one matrix product with the one-hot group matrix, so all resamples are
    summed in a single pass over the weights.
    """
    values = np.asarray(values, dtype=float)
    one_d = values.ndim == 1
    values = values[:, None] if one_d else values
    groups = np.asarray(groups, dtype=np.int64)
    n, m = values.shape
    if sample_weight is None or np.ndim(sample_weight) == 1:
        w = values if sample_weight is None else values * np.asarray(sample_weight, dtype=float)[:, None]
        out = np.stack([np.bincount(groups, weights=w[:, j], minlength=n_groups) for j in range(m)], axis=-1)
    else:
        features = np.zeros((n, n_groups, m))
        features[np.arange(n), groups] = values
        out = (np.asarray(sample_weight, dtype=float) @ features.reshape(n, n_groups * m)).reshape(
            np.shape(sample_weight)[:-1] + (n_groups, m))
    return out[..., 0] if one_d else out


def _note(undefined, message, mask=None):
    """Record an undefined case; with a mask over resamples, say how many hit it."""
    if undefined is None:
        return
    if mask is None or np.ndim(mask) == 0:
        if mask is None or bool(mask):
            undefined.append(message)
        return
    hits = int(np.count_nonzero(mask))
    if hasattr(undefined, "add_resamples"):  # a collector that sums hits over chunks of resamples
        undefined.add_resamples(message, hits, int(np.size(mask)))
    elif hits:
        undefined.append(f"{message} (in {hits} of {np.size(mask)} resamples)")


def _safe_div(num, den, fill):
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    out = np.full(np.broadcast(num, den).shape, float(fill))
    ok = den != 0
    np.divide(num, den, out=out, where=ok)
    return out[()] if out.ndim == 0 else out


# --- operational cost --------------------------------------------------------------------------
def sample_costs(y_true, y_pred, cost):
    """Per-sample cost of hard decisions: ``cost[y_true[k], y_pred[k]]``.

    ``cost`` is the (2, 3) matrix cost[true][pred] (rows KO, OK; columns KO, OK, UNKNOWN).
    """
    return np.asarray(cost, dtype=float)[np.asarray(y_true), np.asarray(y_pred)]


def expected_costs(y_true, proba, cost):
    """Per-sample expected cost of probabilistic outputs: ``sum_j proba[k, j] cost[y_k, j]``."""
    return np.einsum("ij,ij->i", np.asarray(proba, dtype=float),
                     np.asarray(cost, dtype=float)[np.asarray(y_true)])


def seam_weighted_cost(costs, seams, seam_weights, sample_weight=None, undefined=None):
    """Seam-weighted mean cost.

    ``C = sum_s w_s * mean_{k in s} c_k / sum_s w_s`` over the seams present
    (seams with no sample, or no weight in a resample, are left out of both sums).

    Parameters
    ----------
    costs : array (n,) or (n, m)
        Per-sample costs (m cost vectors at once, e.g. hard, soft, ideal, human).
    seams : int array (n,)
        Seam code of each sample, in ``[0, len(seam_weights))``.
    seam_weights : array (S,)
        Criticality weight ``w_s`` of each seam code (positive).

    Returns
    -------
    array of shape ``batch + (m,)`` (or ``batch`` for 1-D costs).

    Undefined case: no sample at all -> 0, recorded.
    """
    costs = np.asarray(costs, dtype=float)
    one_d = costs.ndim == 1
    if one_d:
        costs = costs[:, None]
    n, m = costs.shape
    seam_weights = np.asarray(seam_weights, dtype=float)
    n_seams = len(seam_weights)
    # one pass for counts and cost sums: columns [count | m cost sums] per seam
    sums = group_sums(seams, n_seams, np.concatenate([np.ones((n, 1)), costs], axis=1), sample_weight)
    counts, totals = sums[..., 0], sums[..., 1:]
    means = _safe_div(totals, counts[..., None], 0.0)
    w = seam_weights * (counts > 0)
    w_total = w.sum(axis=-1)
    _note(undefined, "no sample: seam-weighted cost set to 0", w_total == 0)
    result = _safe_div((w[..., None] * means).sum(axis=-2), w_total[..., None], 0.0)
    return result[..., 0] if one_d else result


def seam_sample_weights(seams, seam_weights):
    """Per-sample weights ``v_k`` whose plain mean is the seam-weighted mean: ``mean_k v_k c_k = C``.

    ``v_k = N w_s / (n_s sum_{s present} w_s)`` for sample k of seam s (codes as in
    :func:`seam_weighted_cost`). Used to split C into per-sample shares (the
    excess-cost retention curve). No sample -> an empty array.
    """
    seams = np.asarray(seams, dtype=np.int64)
    n = len(seams)
    if n == 0:
        return np.zeros(0)
    seam_weights = np.asarray(seam_weights, dtype=float)
    counts = np.bincount(seams, minlength=len(seam_weights)).astype(float)
    present = counts > 0
    total = seam_weights[present].sum()
    return n * seam_weights[seams] / (counts[seams] * total)


def operational_cost(c_pred, c_ideal, c_human, undefined=None):
    """Normalised operational cost ``OP = (C(yhat) - C(ideal)) / (C(human) - C(ideal))``.

    0 is perfect, 1 is no better than the human-only process (UNKNOWN everywhere),
    above 1 is worse. Undefined case: ``C(human) <= C(ideal)`` (no sample where a
    human costs more than the ideal answer) -> OP = 0, recorded.
    """
    c_pred, c_ideal, c_human = (np.asarray(a, dtype=float) for a in (c_pred, c_ideal, c_human))
    den = c_human - c_ideal
    bad = den <= 0
    _note(undefined, "C(human) <= C(ideal): OP set to 0", bad)
    return _safe_div(c_pred - c_ideal, np.where(bad, 0.0, den), 0.0)


def uncertainty_gain(c_pred, c_soft, c_ideal, c_human, tol=1e-9, undefined=None):
    """Uncertainty operational gain ``UOP = (C(yhat) - C_soft(p)) / (C(yhat) - C(ideal))``.

    The gain of the probabilistic outputs over the hard ones, relative to the
    hard ones' gap to perfect. Degenerate case (hard decisions already perfect:
    gap below ``tol * (C(human) - C(ideal))``):
    ``UOP = 1 - (C_soft - C(ideal)) / (C(human) - C(ideal))``, recorded.
    Not clipped here (the KPI clips it); can be negative.
    """
    c_pred, c_soft, c_ideal, c_human = (np.asarray(a, dtype=float)
                                        for a in (c_pred, c_soft, c_ideal, c_human))
    scale = c_human - c_ideal
    gap = c_pred - c_ideal
    degenerate = gap <= tol * np.abs(scale)
    _note(undefined, "hard decisions already perfect: UOP = 1 - (C_soft - C_ideal)/(C_human - C_ideal)",
          degenerate)
    regular = _safe_div(c_pred - c_soft, np.where(degenerate, 0.0, gap), 0.0)
    fallback = 1.0 - _safe_div(c_soft - c_ideal, scale, 0.0)
    out = np.where(degenerate, fallback, regular)
    return out[()] if out.ndim == 0 else out


# --- ML performance ----------------------------------------------------------------------------
def _counts(y_true, y_pred, label, groups, n_groups, sample_weight):
    """Weighted (tp, fp, fn) of ``label`` per group: arrays of shape batch + (G,)."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    n = len(y_true)
    groups = np.zeros(n, dtype=int) if groups is None else np.asarray(groups)
    is_true, is_pred = y_true == label, y_pred == label
    sums = group_sums(groups, n_groups, np.stack([is_true & is_pred, ~is_true & is_pred, is_true & ~is_pred],
                                                 axis=1), sample_weight)
    return sums[..., 0], sums[..., 1], sums[..., 2]


def _fbeta_from_counts(tp, fp, fn, beta, zero_division):
    b2 = beta * beta
    return _safe_div((1 + b2) * tp, (1 + b2) * tp + b2 * fn + fp, zero_division)


def ml_score(y_true, y_pred, beta=1.0, average="binary", pos_label=KO, zero_division=0.0,
             groups=None, n_groups=None, sample_weight=None, undefined=None):
    """ML performance: F-beta of the defect class (or its macro average, or precision).

    * ``binary``: ``F = (1 + b^2) TP / ((1 + b^2) TP + b^2 FN + FP)`` for the
      positive class ``pos_label`` (KO by default). UNKNOWN is "not predicted
      positive". Equals ``sklearn.metrics.fbeta_score(..., pos_label=...)``.
    * ``macro``: mean of the binary F-beta of KO and of OK.
    * ``precision``: ``TP / (TP + FP)`` of ``pos_label``.

    With ``groups`` (int codes in ``[0, n_groups)``) one value per group is
    returned (last axis), e.g. per perturbation level.

    Undefined case: zero denominator (for F: no true and no predicted positive;
    for precision: no predicted positive) -> ``zero_division``, recorded.
    """
    n_groups = 1 if groups is None else int(n_groups)
    labels = (KO, OK) if average == "macro" else (pos_label,)
    values = []
    for label in labels:
        tp, fp, fn = _counts(y_true, y_pred, label, groups, n_groups, sample_weight)
        if average == "precision":
            den = tp + fp
            _note(undefined, f"no predicted {'KO' if label == KO else 'OK'}: precision set to "
                             f"zero_division={zero_division}", np.any(den == 0, axis=-1))
            values.append(_safe_div(tp, den, zero_division))
        else:
            den = tp + fp + fn
            _note(undefined, f"no true and no predicted {'KO' if label == KO else 'OK'}: F-beta set "
                             f"to zero_division={zero_division}", np.any(den == 0, axis=-1))
            values.append(_fbeta_from_counts(tp, fp, fn, beta, zero_division))
    out = np.mean(values, axis=0)
    return out[..., 0] if groups is None else out


# --- time --------------------------------------------------------------------------------------
def time_percentile(times, q=95.0, method="linear", sample_weight=None, undefined=None):
    """Percentile of per-image times (numpy's definition, ``method`` linear by default).

    With frequency weights (integer draw counts) the value equals
    ``np.percentile(np.repeat(times, w), q, method=method)``, computed without
    materialising the repetition. Undefined case: no sample -> 0, recorded.
    """
    times = np.asarray(times, dtype=float)
    if sample_weight is None:
        if times.size == 0:
            _note(undefined, "no sample: time percentile set to 0")
            return 0.0
        return float(np.percentile(times, q, method=method))
    order = np.argsort(times, kind="stable")
    sorted_t = times[order]
    w = np.asarray(sample_weight, dtype=float)
    # np.take is faster than fancy indexing; cumsum over the transposed view keeps the inner loop contiguous
    cum = np.cumsum(np.take(w, order, axis=-1).T, axis=0).T
    total = cum[..., -1] if cum.shape[-1] else np.zeros(w.shape[:-1])
    empty = total <= 0
    _note(undefined, "no sample: time percentile set to 0", empty)
    h = np.maximum(total - 1, 0) * q / 100.0
    lo = np.floor(h)
    hi = np.minimum(lo + 1, np.maximum(total - 1, 0))
    frac = h - lo
    if method == "lower":
        frac = np.zeros_like(frac)
    elif method == "higher":
        lo, frac = np.ceil(h), np.zeros_like(frac)
    elif method == "midpoint":
        frac = np.where(h > lo, 0.5, 0.0)

    def at_rank(rank):  # value of the rank-th (0-based) element of the repeated sample
        idx = np.count_nonzero(cum <= np.asarray(rank)[..., None], axis=-1)
        return sorted_t[np.minimum(idx, len(sorted_t) - 1)] if len(sorted_t) else np.zeros_like(rank)

    v_lo = at_rank(lo)
    out = v_lo + frac * (at_rank(hi) - v_lo)
    out = np.where(empty, 0.0, out)
    return out[()] if out.ndim == 0 else out


# --- calibration -------------------------------------------------------------------------------
def top_label(proba):
    """Top-label binary confidence and label of (p_KO, p_OK, p_UNK) rows.

    ``conf = max(p_KO, p_OK) / (p_KO + p_OK)`` (0.5 when both are 0);
    label = KO when ``p_KO >= p_OK`` else OK.
    """
    proba = np.asarray(proba, dtype=float)
    p_ko, p_ok = proba[:, 0], proba[:, 1]
    total = p_ko + p_ok
    conf = _safe_div(np.maximum(p_ko, p_ok), total, 0.5)
    conf = np.atleast_1d(conf)
    return conf, np.where(p_ko >= p_ok, KO, OK)


def bin_index(values, n_bins):
    """Equal-width bin of each value in [0, 1]: bin m holds [m/M, (m+1)/M), the last one closed.

    Compares with the float edges m/M: ``floor(value * M)`` misplaces some values equal to an edge.
    """
    edges = np.arange(n_bins + 1) / n_bins
    return np.clip(np.searchsorted(edges, np.asarray(values, dtype=float), side="right") - 1, 0, n_bins - 1)


def expected_calibration_error(y_true, proba, n_bins=10, groups=None, n_groups=None, sample_weight=None,
                               undefined=None):
    """Expected calibration error of the top-label binary confidence.

    ``ECE = sum_m |B_m| / N * |acc(B_m) - conf(B_m)|`` with M = ``n_bins``
    equal-width bins on [0, 1], bin m = [m/M, (m+1)/M), the last one closed;
    empty bins are skipped (they add 0). ``acc`` is the share of samples whose
    top label equals the truth, ``conf`` the mean confidence (see
    :func:`top_label`). Since ``|B_m| * |acc - conf| = |sum_{k in B_m} (correct_k - conf_k)|``
    only per-bin sums are needed.

    With ``groups`` (int codes in ``[0, n_groups)``, e.g. the true class) one
    ECE per group is returned (last axis): the ECE of each subset.
    Undefined case: empty (sub)set -> 0, recorded.
    """
    y_true = np.asarray(y_true)
    n = len(y_true)
    single = groups is None
    n_groups = 1 if single else int(n_groups)
    groups = np.zeros(n, dtype=int) if single else np.asarray(groups)
    if n:
        conf, label = top_label(proba)
        correct = (label == y_true).astype(float)
        bins = bin_index(conf, n_bins)
    else:
        conf = correct = np.zeros(0)
        bins = np.zeros(0, dtype=int)
    # per (group, bin) cell: the sum of (correct - conf) and the weight
    cells = groups * n_bins + bins
    sums = group_sums(cells, n_groups * n_bins, np.stack([correct - conf, np.ones(n)], axis=1), sample_weight)
    sums = sums.reshape(sums.shape[:-2] + (n_groups, n_bins, 2))
    total = sums[..., 1].sum(axis=-1)
    _note(undefined, "empty subset: ECE set to 0", np.any(total == 0, axis=-1))
    out = _safe_div(np.abs(sums[..., 0]).sum(axis=-1), total, 0.0)
    return out[..., 0] if single else out


# --- OOD detection -----------------------------------------------------------------------------
def roc_auc(y_ood, scores, sample_weight=None, undefined=None):
    """Area under the ROC curve of ``scores`` against the binary label ``y_ood`` (1 = OOD).

    ``AUROC = P(s_pos > s_neg) + 0.5 P(s_pos = s_neg)`` (ties averaged, the
    Mann-Whitney statistic); equals ``sklearn.metrics.roc_auc_score``.
    Undefined cases: a single class present, or all scores equal -> 0.5, recorded.
    """
    y_ood = np.asarray(y_ood).astype(bool)
    scores = np.asarray(scores, dtype=float)
    order = np.argsort(scores, kind="stable")
    s = scores[order]
    if s.size and s[0] == s[-1]:
        _note(undefined, "constant scores: AUROC set to 0.5")
    if s.size == 0:
        _note(undefined, "no sample: AUROC set to 0.5")
        return 0.5 if sample_weight is None or np.ndim(sample_weight) == 1 else np.full(len(sample_weight), 0.5)
    starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])
    w = np.ones(len(s)) if sample_weight is None else np.take(np.asarray(sample_weight, dtype=float), order, axis=-1)
    pos = y_ood[order]
    p_g = np.add.reduceat(w * pos, starts, axis=-1)
    n_g = np.add.reduceat(w * ~pos, starts, axis=-1)
    below = np.cumsum(n_g.T, axis=0).T - n_g  # negatives strictly below each score group
    num = (p_g * (below + 0.5 * n_g)).sum(axis=-1)
    den = p_g.sum(axis=-1) * n_g.sum(axis=-1)
    _note(undefined, "a single class present: AUROC set to 0.5", den == 0)
    return _safe_div(num, den, 0.5)


# --- robustness --------------------------------------------------------------------------------
def level_auc(levels, values, undefined=None):
    """Normalised area under ``values`` over the perturbation level axis.

    ``r = trapezoid(values, levels) / (max(levels) - min(levels))``: levels are
    sorted distinct numbers (signed for rotation and luminance, level 0 = the
    clean copy), so a constant value v gives r = v. ``values`` may carry a
    leading batch axis. Undefined cases: a single level -> its value; no level
    -> 0; both recorded.
    """
    levels = np.asarray(levels, dtype=float)
    values = np.asarray(values, dtype=float)
    if levels.size == 0:
        _note(undefined, "no level: r set to 0")
        return np.zeros(values.shape[:-1])[()] if values.ndim > 1 else 0.0
    if levels.size == 1 or levels[-1] == levels[0]:
        _note(undefined, "a single level: r set to the ML at that level")
        return values[..., 0]
    area = ((values[..., 1:] + values[..., :-1]) / 2 * np.diff(levels)).sum(axis=-1)
    return area / (levels[-1] - levels[0])
