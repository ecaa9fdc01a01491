"""Which leaderboard differences are real: paired comparisons over shared bootstrap resamples.

Pure functions over a (S, B) matrix ``values``: row a holds submission a's
value (score or a rescaled KPI, higher is better) on each of the B resamples,
the b-th resample being the same samples for every row (scoring.bootstrap).

- P(a > c) = (#{b: v_ab > v_cb} + 1/2 #{b: v_ab = v_cb}) / B.
  Identical rows give 1/2; a row above on every resample gives 1.
- Two-sided bootstrap p-value of "a and c are equal": p = min(1, 2 min(P, 1 - P)).
  p = 0 means that all B resamples agree (p < 1/B). The resolution is 1/B:
  a pair whose resamples disagree even once has p >= 2/B, which Holm's first
  step (alpha/m for m pairs) rejects only when B >= 2m/alpha (B = 1000: m <= 25
  pairs, about 7 submissions); with more submissions, only unanimous pairs
  are declared different. Raise extras.bootstrap.n for finer groups.
- Holm's step-down correction over the S(S-1)/2 pairs of one matrix (one
  family per metric): sort the p-values, reject p_(i) while
  p_(i) <= alpha / (m - i + 1). A pair not rejected is "not distinguishable".
  Holm controls the family-wise error rate under any dependence between
  pairs (they share rows, so they are dependent).
- Rank interval: per resample, the competition rank 1 + #{c: v_cb > v_ab};
  the interval runs from the lower to the upper (1 - level)/2 quantile of
  these ranks (conservative integer quantiles: "lower" and "higher").
- Groups (compact letter display): with rows in rank order, every maximal run
  of consecutive rows that are pairwise not distinguishable gets a letter. Two
  rows sharing a letter are not distinguishable; the matrix marks every tie.

What the P values do not cover (README, "Which differences are real"): only
the sampling of the evaluation sets is resampled, not the training
randomness of the submissions, nor other data.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

import numpy as np

ALPHA = 0.05   # family-wise level of the "not distinguishable" groups
LEVEL = 0.95   # coverage of the rank intervals


def p_better(values) -> np.ndarray:
    """(S, S) matrix of P(row > column) over the shared resamples, ties counted 1/2 (diagonal 1/2)."""
    v = np.asarray(values, dtype=float)
    s, b = v.shape
    out = np.empty((s, s))
    for a in range(s):  # (S, B) at a time: memory S * B, not S * S * B
        out[a] = ((v[a] > v).sum(axis=1) + 0.5 * (v[a] == v).sum(axis=1)) / b
    return out


def p_values(p) -> np.ndarray:
    """Two-sided bootstrap p-values of "row equals column" from P(row > column) (diagonal 1)."""
    p = np.asarray(p, dtype=float)
    out = np.minimum(1.0, 2.0 * np.minimum(p, 1.0 - p))
    np.fill_diagonal(out, 1.0)
    return out


def holm(pvalues, alpha=ALPHA) -> np.ndarray:
    """Boolean "rejected" for a 1-D array of p-values, Holm's step-down at family-wise level alpha."""
    pvalues = np.asarray(pvalues, dtype=float)
    m = len(pvalues)
    order = np.argsort(pvalues, kind="stable")
    passed = pvalues[order] <= alpha / (m - np.arange(m))
    n_rejected = m if passed.all() else int(np.argmin(passed))  # stop at the first failure
    rejected = np.zeros(m, dtype=bool)
    rejected[order[:n_rejected]] = True
    return rejected


def distinguishable(pmatrix, alpha=ALPHA) -> np.ndarray:
    """(S, S) boolean: the pair differs after Holm over the upper-triangle pairs (diagonal False)."""
    s = len(pmatrix)
    iu = np.triu_indices(s, 1)
    out = np.zeros((s, s), dtype=bool)
    out[iu] = holm(np.asarray(pmatrix)[iu], alpha)
    return out | out.T


def ranks(values) -> np.ndarray:
    """(S, B) competition rank of each row on each resample (1 = highest value; ties share the best rank)."""
    v = np.asarray(values, dtype=float)
    return np.stack([1 + (v > v[a]).sum(axis=0) for a in range(len(v))]) if len(v) else np.empty((0, v.shape[1]))


def rank_intervals(values, level=LEVEL) -> np.ndarray:
    """(S, 2) integer rank interval of each row: quantiles (1-level)/2 ("lower") and (1+level)/2 ("higher")."""
    r = ranks(values)
    lo = np.quantile(r, (1 - level) / 2, axis=1, method="lower")
    hi = np.quantile(r, (1 + level) / 2, axis=1, method="higher")
    return np.stack([lo, hi], axis=1).astype(int)


def letters(order, ties) -> list[str]:
    """Compact letters per row: ``order`` lists the rows best first; ``ties`` (S, S) True = not distinguishable.

    Every maximal run order[i..j] whose rows are pairwise tied gets the next
    letter (a, b, ..., z, A, ..., then aa, ab, ...).
    """
    order = list(order)
    runs = []
    for i in range(len(order)):
        j = i
        while j + 1 < len(order) and all(ties[order[j + 1], order[k]] for k in range(i, j + 1)):
            j += 1
        if not runs or j > runs[-1][1]:  # a run ending no later than the previous one is inside it
            runs.append((i, j))
    out = [""] * len(order)
    for n, (i, j) in enumerate(runs):
        for k in range(i, j + 1):
            out[order[k]] += _letter(n)
    return out


def _letter(n):
    alphabet = string.ascii_lowercase + string.ascii_uppercase
    return alphabet[n] if n < len(alphabet) else _letter(n // len(alphabet) - 1) + alphabet[n % len(alphabet)]


@dataclass
class Comparison:
    """Paired comparison of S submissions on one metric (rows in the caller's order)."""

    p: np.ndarray            # (S, S) P(row > column)
    pvalue: np.ndarray       # (S, S) two-sided bootstrap p-value, before correction
    differ: np.ndarray       # (S, S) True where Holm rejects equality at alpha
    rank_interval: np.ndarray  # (S, 2)
    letters: list            # compact letter display
    alpha: float
    level: float


def compare(values, point, alpha=ALPHA, level=LEVEL) -> Comparison:
    """All of the above for one metric; ``point``: the point estimates (S,), which order the letters."""
    v = np.asarray(values, dtype=float)
    p = p_better(v)
    pv = p_values(p)
    differ = distinguishable(pv, alpha)
    order = sorted(range(len(v)), key=lambda a: -float(point[a]))
    return Comparison(p, pv, differ, rank_intervals(v, level), letters(order, ~differ), alpha, level)
