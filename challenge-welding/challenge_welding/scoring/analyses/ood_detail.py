"""OOD detection beside the scored AUROC: FPR at 95 % TPR, AUPR-In and AUPR-Out (OpenOOD's set).

The OOD score s is higher for "more out-of-distribution"; labels ood = 1 (OOD), 0 (in
distribution). Conventions follow OpenOOD (Yang et al. 2022):

* FPR@95TPR: in-distribution is the positive class, ranked by -s; the share of OOD samples
  accepted as in-distribution at the first threshold where at least 95 % of the
  in-distribution samples are accepted (``fpr[searchsorted(tpr, 0.95)]`` on scikit-learn's
  ``roc_curve``). Lower is better.
* AUPR-In: average precision with in-distribution positive, score -s.
* AUPR-Out: average precision with OOD positive, score s.

Average precision is scikit-learn's step-wise ``AP = sum_n (R_n - R_{n-1}) P_n`` over
distinct thresholds (no interpolation). Written here (not sklearn) to avoid importing
scikit-learn in the scorer; the tests check both against scikit-learn.
Undefined: one class only (or no sample) -> None, and the reason.
"""

from __future__ import annotations

import numpy as np


def _curve(positive, score):
    """Cumulative (tp, fp) at each distinct threshold, scores in decreasing order."""
    order = np.argsort(-score, kind="stable")
    s, pos = score[order], positive[order]
    ends = np.r_[np.flatnonzero(s[1:] != s[:-1]), len(s) - 1]
    tp = np.cumsum(pos)[ends]
    fp = (ends + 1) - tp
    return tp.astype(float), fp.astype(float)


def average_precision(positive, score):
    """Step-wise average precision of ``score`` for the boolean ``positive`` (None if no positive).

    Examples
    --------
    >>> average_precision(np.array([1, 0, 1, 0], bool), np.array([0.9, 0.8, 0.7, 0.1]))
    0.8333333333333333
    """
    positive = np.asarray(positive, dtype=bool)
    score = np.asarray(score, dtype=float)
    n_pos = int(positive.sum())
    if n_pos == 0:
        return None
    tp, fp = _curve(positive, score)
    precision = tp / (tp + fp)
    recall = tp / n_pos
    return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


def fpr_at_tpr(positive, score, tpr=0.95):
    """FPR at the first threshold (decreasing score) where TPR >= ``tpr``; None with one class only.

    Examples
    --------
    >>> fpr_at_tpr(np.array([1, 1, 0, 1, 0], bool), np.array([5, 4, 3, 2, 1.0]), tpr=0.95)
    0.5
    """
    positive = np.asarray(positive, dtype=bool)
    score = np.asarray(score, dtype=float)
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if n_pos == 0 or n_neg == 0:
        return None
    tp, fp = _curve(positive, score)
    k = int(np.searchsorted(tp / n_pos, tpr - 1e-12, side="left"))
    return float(fp[min(k, len(fp) - 1)] / n_neg)


def ood_detail(ood, score, tpr=0.95):
    """{"fpr_at_tpr", "aupr_in", "aupr_out", "n", "n_ood", "undefined"} for one set.

    ``undefined``: None, or the sentence saying why the values are None (one class only).

    Examples
    --------
    >>> d = ood_detail(np.array([0, 0, 1, 0, 1]), np.array([1, 2, 3, 4, 5.0]))
    >>> d["fpr_at_tpr"], round(d["aupr_out"], 4)
    (0.5, 0.8333)
    """
    ood = np.asarray(ood).astype(bool)
    s = np.asarray(score, dtype=float)
    n, n_ood = len(ood), int(ood.sum())
    out = {"n": int(n), "n_ood": n_ood, "tpr": float(tpr), "fpr_at_tpr": None, "aupr_in": None,
           "aupr_out": None, "undefined": None}
    if n_ood == 0 or n_ood == n:
        out["undefined"] = "one class only (no OOD or no in-distribution sample): not reported"
        return out
    out.update(fpr_at_tpr=fpr_at_tpr(~ood, -s, tpr), aupr_in=average_precision(~ood, -s),
               aupr_out=average_precision(ood, s))
    return out
