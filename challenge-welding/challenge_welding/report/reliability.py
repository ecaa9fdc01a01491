"""Reliability-diagram bins with SPEC's ECE conventions (for the page; the score's ECE is scoring's).

Top-label binary confidence conf = max(p_KO, p_OK) / (p_KO + p_OK) (0.5 when both are 0),
top label KO when p_KO >= p_OK, correct = top label == true class; M equal-width bins on
[0, 1], [m/M, (m+1)/M), the last closed; empty bins are skipped in
ECE = sum_m |B_m| / n |acc(B_m) - conf(B_m)|. An empty subset gives ECE NaN.
"""

from __future__ import annotations

import numpy as np

from .trust_opinion import bin_index


def reliability_bins(y_true, p_ko, p_ok, bins: int = 10) -> dict:
    """Per-bin count, mean confidence and accuracy, and the ECE, of one subset."""
    y_true = np.asarray(y_true).astype(str)
    p_ko, p_ok = np.asarray(p_ko, float), np.asarray(p_ok, float)
    den = p_ko + p_ok
    with np.errstate(invalid="ignore", divide="ignore"):
        conf = np.where(den > 0, np.maximum(p_ko, p_ok) / np.where(den > 0, den, 1.0), 0.5)
    correct = np.where(p_ko >= p_ok, "KO", "OK") == y_true
    idx = bin_index(conf, bins)
    count = np.bincount(idx, minlength=bins)
    conf_sum = np.bincount(idx, weights=conf, minlength=bins)
    acc_sum = np.bincount(idx, weights=correct.astype(float), minlength=bins)
    nz = count > 0
    mean_conf = np.where(nz, conf_sum / np.maximum(count, 1), np.nan)
    acc = np.where(nz, acc_sum / np.maximum(count, 1), np.nan)
    n = int(count.sum())
    ece = float(np.sum(count[nz] * np.abs(acc[nz] - mean_conf[nz])) / n) if n else float("nan")
    return {"edges": (np.arange(bins + 1) / bins).tolist(), "count": count.tolist(),
            "confidence": mean_conf.tolist(), "accuracy": acc.tolist(), "ece": ece, "n": n}
