"""The operating point in cost: what handing samples over to the operator costs, and AURC-type summaries.

A component answers KO, OK or UNKNOWN (handed over to the operator). Its own scores
define a family of two-threshold policies on p_KO: OK when ``p_KO < t_lo``, UNKNOWN
when ``t_lo <= p_KO < t_hi``, KO when ``p_KO >= t_hi``. Each policy has a coverage (share
of samples not handed over) and a mean cost under the challenge's cost matrix (UNKNOWN
costs what the matrix says). ``cost_coverage`` gives the cheapest policy at each
coverage, the cheapest overall, and the component's own operating point.

``risk_coverage`` gives the fd-shifts summaries with 0/1 loss (Jaeger et al. 2023,
"A call to reflect on evaluation practices for failure detection in image
classification"; Traub et al. 2024, "Overcoming common flaws in the evaluation of
selective classification systems") for comparison with other benchmarks.
"""

from __future__ import annotations

import numpy as np

KO, OK, UNKNOWN = 0, 1, 2


def tie_cuts(sorted_scores, min_block=1):
    """Cut positions 0 = k_0 < ... < k_S = n between tie groups of ``sorted_scores`` (ascending).

    With ``min_block`` > 1 only cuts leaving at least ``min_block`` samples between two
    consecutive cuts are kept (greedy from the left, the end kept), so every quantity
    computed between cuts aggregates at least ``min_block`` samples (scoring.disclosure).

    Examples
    --------
    >>> tie_cuts(np.array([0.1, 0.2, 0.2, 0.3])).tolist()
    [0, 1, 3, 4]
    >>> tie_cuts(np.array([0.1, 0.2, 0.2, 0.3, 0.4]), min_block=2).tolist()
    [0, 3, 5]
    """
    s = np.asarray(sorted_scores, dtype=float)
    n = len(s)
    ends = np.r_[0, np.flatnonzero(s[1:] != s[:-1]) + 1, n]
    if min_block <= 1 or n == 0:
        return np.unique(ends)
    kept = [0]
    for k in ends[1:-1]:
        if k - kept[-1] >= min_block and n - k >= min_block:
            kept.append(int(k))
    kept.append(n)
    return np.asarray(kept, dtype=np.int64)


def _range_argmin(values, lo, hi):
    """Index of the minimum of values[lo[q]..hi[q]] (inclusive) for every query q: a sparse table.

    Written by hand: numpy has no range-minimum query, and a Python loop over
    200,000 / 25 cuts per coverage level would cost seconds.
    """
    values = np.asarray(values, dtype=float)
    k = len(values)
    table = [np.arange(k)]
    span = 1
    while 2 * span <= k:
        prev = table[-1]
        a, b = prev[:-span], prev[span:]
        table.append(np.where(values[b] < values[a], b, a))
        span *= 2
    length = hi - lo + 1
    level = np.floor(np.log2(np.maximum(length, 1))).astype(int)
    out = np.empty(len(lo), dtype=np.int64)
    for lv in np.unique(level):
        q = level == lv
        a = table[lv][lo[q]]
        b = table[lv][hi[q] - (1 << lv) + 1]
        out[q] = np.where(values[b] < values[a], b, a)
    return out


# over 60 lines: its numpydoc docstring (formula, undefined cases, example) is most of it
def cost_coverage(p_ko, y_true, cost, sample_weight=None, coverages=None, min_block=1):
    """Cheapest two-threshold policy on ``p_ko`` at each coverage, and overall.

    Parameters
    ----------
    p_ko : array (n,)
        The component's probability of KO (its own score).
    y_true : int array (n,)
        0 = KO, 1 = OK.
    cost : array (2, 3)
        cost[true][decision], decisions KO, OK, UNKNOWN (the scoring config's matrix).
    sample_weight : array (n,), optional
        Per-sample weights ``v_k`` whose plain mean makes the cost seam-weighted
        (scoring.metrics.seam_sample_weights); None: a plain mean.
    coverages : array, optional
        Coverage levels c at which the curve is given: the cheapest policy handing
        over at most ``n (1 - c)`` samples.
    min_block : int
        Thresholds are placed only between tie groups, at least ``min_block`` samples
        apart (disclosure: a threshold between two single samples would tell their labels).

    Returns
    -------
    dict with "best" (cost, coverage, t_lo, t_hi of the cheapest policy) and "curve"
    ({"coverage": requested c, "cost": cheapest mean cost with coverage >= c, "achieved": its
    coverage}). Mean cost ``C(policy) = (1/n) sum_k v_k cost[y_k, policy(p_k)]``.
    A threshold of None means "never" (t_lo None: OK for every sample; t_hi None: never KO).

    Undefined: n = 0 -> None.

    Examples
    --------
    >>> cost = np.array([[0.0, 10.0, 1.0], [1.0, 0.0, 0.5]])
    >>> r = cost_coverage(np.array([0.1, 0.4, 0.6, 0.9]), np.array([1, 0, 1, 0]), cost)
    >>> r["best"]["cost"], r["best"]["t_lo"], r["best"]["t_hi"]
    (0.25, 0.4, 0.4)
    """
    p = np.asarray(p_ko, dtype=float)
    y = np.asarray(y_true, dtype=np.int64)
    n = len(p)
    if n == 0:
        return None
    v = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=float)
    order = np.argsort(p, kind="stable")
    s = p[order]
    c = np.asarray(cost, dtype=float)[y[order]] * v[order, None] / n
    cum = np.vstack([np.zeros(3), np.cumsum(c, axis=0)])
    cuts = tie_cuts(s, min_block)
    a = cum[cuts, OK] - cum[cuts, UNKNOWN]             # first P_i samples OK, minus their UNKNOWN cost
    b = cum[cuts, UNKNOWN] + cum[-1, KO] - cum[cuts, KO]  # UNKNOWN up to P_j, KO from P_j on
    j_all = np.arange(len(cuts))

    def policy(i, j):
        return {"cost": float(a[i] + b[j]), "coverage": float(1 - (cuts[j] - cuts[i]) / n),
                "t_lo": float(s[cuts[i]]) if cuts[i] < n else None,
                "t_hi": float(s[cuts[j]]) if cuts[j] < n else None}

    best_i = _range_argmin(a, np.zeros_like(j_all), j_all)
    j = int(np.argmin(a[best_i] + b))
    out = {"best": policy(int(best_i[j]), j), "curve": None}
    if coverages is not None:
        curve = {"coverage": [], "cost": [], "achieved": []}
        for cov in np.asarray(coverages, dtype=float):
            max_out = np.floor(n * (1 - cov) + 1e-9)
            lo = np.searchsorted(cuts, cuts - max_out, side="left")
            i = _range_argmin(a, lo, j_all)
            j = int(np.argmin(a[i] + b))
            pol = policy(int(i[j]), j)
            curve["coverage"].append(round(float(cov), 6))
            curve["cost"].append(pol["cost"])
            curve["achieved"].append(pol["coverage"])
        out["curve"] = curve
    return out


def decision_cost(y_true, decisions, cost, sample_weight=None):
    """Mean cost ``(1/n) sum_k v_k cost[y_k, x_k]`` of decisions (0 KO, 1 OK, 2 UNKNOWN) and their coverage.

    Returns (cost, coverage); n = 0 -> (None, None).

    Examples
    --------
    >>> decision_cost(np.array([0, 1]), np.array([2, 1]), np.array([[0.0, 10.0, 1.0], [1.0, 0.0, 0.5]]))
    (0.5, 0.5)
    """
    y = np.asarray(y_true, dtype=np.int64)
    x = np.asarray(decisions, dtype=np.int64)
    if len(y) == 0:
        return None, None
    v = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, dtype=float)
    return float(np.mean(v * np.asarray(cost, dtype=float)[y, x])), float(np.mean(x != UNKNOWN))


def risk_coverage(confidence, loss):
    """fd-shifts' risk-coverage summaries: AURC, E-AURC, AUGRC (0/1 or graded loss, in [0, 1]).

    One point per distinct confidence t (samples with confidence >= t are accepted),
    in order of decreasing coverage ``c_t``; selective risk ``SR_t = sum_accepted loss /
    #accepted``; generalized risk ``GR_t = sum_accepted loss / n``.

    * AURC = trapezoidal area under (c, SR), the curve closed at coverage 0 with the
      last selective risk (fd-shifts ``evaluate_auc``, linear interpolation);
    * E-AURC = AURC - AURC*, ``AURC* = r + (1 - r) ln(1 - r)`` with r the mean loss
      (the optimal ordering's area, Geifman et al. 2019; 0 when r = 1);
    * AUGRC = trapezoidal area under (c, GR), closed at (0, 0) (Traub et al. 2024).

    Values on the 0..1 scale (fd-shifts prints them times 1000). Undefined: n = 0 ->
    every value None.

    Examples
    --------
    >>> r = risk_coverage(np.array([0.9, 0.8, 0.7, 0.6]), np.array([0, 0, 1, 1]))
    >>> round(r["aurc"], 6), round(r["augrc"], 6)
    (0.145833, 0.125)
    """
    conf = np.asarray(confidence, dtype=float)
    loss = np.asarray(loss, dtype=float)
    n = len(conf)
    if n == 0:
        return {"aurc": None, "eaurc": None, "augrc": None, "error_rate": None, "n": 0}
    order = np.argsort(-conf, kind="stable")
    c, l_sorted = conf[order], loss[order]
    ends = np.r_[np.flatnonzero(c[1:] != c[:-1]) + 1, n]     # accepted counts, one per distinct threshold
    errors = np.cumsum(l_sorted)[ends - 1]
    cov = ends / n
    sr = errors / ends
    gr = errors / n
    cov_desc, sr_desc, gr_desc = cov[::-1], sr[::-1], gr[::-1]
    aurc = float(-np.trapezoid(np.r_[sr_desc, sr_desc[-1]], np.r_[cov_desc, 0.0]))
    augrc = float(-np.trapezoid(np.r_[gr_desc, 0.0], np.r_[cov_desc, 0.0]))
    r = float(loss.mean())
    optimal = r + (1 - r) * np.log(1 - r) if r < 1 else 1.0
    return {"aurc": aurc, "eaurc": float(aurc - optimal), "augrc": augrc, "error_rate": r, "n": int(n)}
