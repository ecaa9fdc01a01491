"""Reliability-diagram bins of the performance set, with the score's own ECE (scoring.metrics).

Per equal-width bin of the top-label binary confidence (scoring.metrics.top_label,
bin_index): the count, and the mean confidence and accuracy when the bin holds at
least ``min_samples`` samples (a smaller bin is shown as its count only: with one
sample, its accuracy is that sample's label). The ECE is scoring.metrics'
expected_calibration_error on all samples: an empty subset gives 0, recorded by the
score (docs/scoring.md: "NaN subset -> treated as 0 and reported").
"""

from __future__ import annotations

import numpy as np

from challenge_welding.scoring import metrics as m
from challenge_welding.scoring.disclosure import hide_small


def reliability_bins(y_true, proba, bins: int, min_samples: int) -> dict:
    """{"edges", "count", "confidence", "accuracy", "ece", "n"} of one subset (y_true codes 0 KO / 1 OK)."""
    y_true = np.asarray(y_true)
    n = len(y_true)
    ece = float(m.expected_calibration_error(y_true, proba, bins))
    if n:
        conf, label = m.top_label(proba)
        idx = m.bin_index(conf, bins)
        correct = (label == y_true).astype(float)
    else:
        conf = correct = np.zeros(0)
        idx = np.zeros(0, dtype=np.int64)
    count = np.bincount(idx, minlength=bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_conf = np.bincount(idx, weights=conf, minlength=bins) / count
        acc = np.bincount(idx, weights=correct, minlength=bins) / count
    mean_conf, acc = hide_small(count, min_samples, mean_conf.tolist(), acc.tolist())
    return {"edges": (np.arange(bins + 1) / bins).tolist(), "count": count.tolist(),
            "confidence": mean_conf, "accuracy": acc, "ece": ece, "n": int(n)}
