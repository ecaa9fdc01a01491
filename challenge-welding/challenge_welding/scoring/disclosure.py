"""What a published output may show: aggregates of at least ``min_samples`` samples, never one sample.

Codabench lets participants download the scoring output, and the detailed
results page becomes public. A curve with one step per sample gives each
sample's label back to a submission that orders its certainties (or OOD
scores) as it likes (issue 10, attack 4). So every published number or curve
point aggregates at least ``min_samples`` samples (config ``disclosure``):

* curves over a sample order (retention, ROC, a sequence) are cut into at most
  ``points`` steps of at least ``min_samples`` samples each (fewer steps for a
  small set; a set below ``min_samples`` keeps only its two end points);
* a bin below ``min_samples`` is shown as its count only.

Summaries (R-AUC, AUROC, ECE, ...) are computed on all samples by their own
code; only what is shown is coarsened. Pure functions over numpy arrays.
"""

from __future__ import annotations

import numpy as np


def n_steps(n: int, points: int, min_samples: int) -> int:
    """Steps of a curve over n samples: ``min(points, n // min_samples)``, at least 1 (then only the end points)."""
    return max(1, min(int(points), int(n) // int(min_samples)))


def even_cuts(n: int, points: int, min_samples: int) -> np.ndarray:
    """Cut positions 0 = k_0 < k_1 < ... < k_S = n; every step holds at least ``min_samples`` samples
    (when n >= min_samples; else the single step 0..n)."""
    steps = n_steps(n, points, min_samples)
    return np.unique(np.round(np.linspace(0, n, steps + 1)).astype(np.int64))


def merge_small_steps(cuts, min_samples: int) -> np.ndarray:
    """Drop inner cuts until every step holds at least ``min_samples`` samples (end points kept)."""
    cuts = list(np.asarray(cuts, dtype=np.int64))
    if len(cuts) < 2:
        return np.asarray(cuts, dtype=np.int64)
    kept = [cuts[0]]
    for k in cuts[1:-1]:
        if k - kept[-1] >= min_samples and cuts[-1] - k >= min_samples:
            kept.append(k)
    kept.append(cuts[-1])
    return np.asarray(kept, dtype=np.int64)


def curve_steps(curve, points: int, min_samples: int) -> dict:
    """A curve sampled at j/N (j = 0..N, as retention curves are) published at even steps.

    Returns {"retention": [k/N], "value": [curve[k]]} at the cuts of :func:`even_cuts`;
    empty lists for an empty curve.
    """
    curve = np.asarray(curve, dtype=float)
    n = len(curve) - 1
    if n <= 0:
        return {"retention": [], "value": []}
    idx = even_cuts(n, points, min_samples)
    return {"retention": (idx / n).round(6).tolist(), "value": curve[idx].round(9).tolist()}


def roc_points(y, scores, points: int, min_samples: int) -> dict:
    """ROC curve (positive = 1) at most ``points`` steps, each step at least ``min_samples`` samples.

    Thresholds are cut in the order of decreasing score; a cut never splits a group of tied
    scores (it moves to the group's end), and steps left too small are merged. Returns
    {"fpr": [...], "tpr": [...]} from (0, 0) to (1, 1); a single class gives None.
    """
    y = np.asarray(y).astype(bool)
    s = np.asarray(scores, dtype=float)
    n, n_pos = len(y), int(np.count_nonzero(y))
    if n_pos == 0 or n_pos == n:
        return None
    order = np.argsort(-s, kind="stable")
    s, y = s[order], y[order]
    ends = np.flatnonzero(np.r_[s[1:] != s[:-1], True]) + 1  # end of each tie group
    cuts = np.unique(np.r_[0, ends[np.minimum(np.searchsorted(ends, even_cuts(n, points, min_samples)),
                                              len(ends) - 1)]])
    cuts = merge_small_steps(cuts, min_samples)
    tp = np.r_[0, np.cumsum(y)][cuts]
    fp = cuts - tp
    return {"fpr": (fp / (n - n_pos)).round(9).tolist(), "tpr": (tp / n_pos).round(9).tolist()}


def sequence_bins(values, labels, points: int, min_samples: int) -> dict:
    """A sequence (e.g. the drift's OOD scores in order) as consecutive bins of at least ``min_samples``.

    Per bin: first and last position, the median value and the share of ``labels`` = 1.
    """
    values = np.asarray(values, dtype=float)
    labels = np.asarray(labels, dtype=float)
    cuts = even_cuts(len(values), points, min_samples)
    out = {"start": [], "end": [], "median": [], "share": [], "n": []}
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        out["start"].append(int(lo))
        out["end"].append(int(hi - 1))
        out["median"].append(float(np.median(values[lo:hi])))
        out["share"].append(float(labels[lo:hi].mean()))
        out["n"].append(int(hi - lo))
    return out


def hide_small(counts, min_samples: int, *series):
    """Each series with None where its bin's count is below ``min_samples`` (counts stay)."""
    small = np.asarray(counts) < min_samples
    return [[None if hide else v for v, hide in zip(values, small)] for values in series]
