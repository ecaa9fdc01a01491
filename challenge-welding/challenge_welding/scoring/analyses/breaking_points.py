"""Breaking points: the first perturbation level at which precision drops below the clean level's.

For each perturbation type x of the robustness set and each direction of its axis
(levels > 0; and levels < 0 for signed axes: rotation, luminance), the ladder is the
levels ordered by |level|. Precision of the KO class at level l:
``P_l = TP_l / (TP_l + FP_l)`` (UNKNOWN is "not predicted KO", as in the ML criterion;
no KO predicted: ``zero_division``). The reference is the performance set's precision
P_perf. The breaking point is the first ladder level with ``P_l < P_perf - margin``
(margin in the config); none: "not reached".

Interval: the breaking level on B resamples, each resample drawing, per level and class,
the count of samples predicted KO from a binomial with the observed rate. That is the
distribution of the counts under the stratified bootstrap of scoring.bootstrap
(resampling within class x perturbation x level); drawing counts instead of the 200,000
samples of the performance set keeps this O(B x levels). The interval is the lower and
upper (1 -/+ level)/2 quantiles of the ladder position ("lower"/"higher" integer
quantiles, as the rank intervals of challenge_welding.scoring.significance).

``relative_robustness`` is mCE-style (Hendrycks & Dietterich 2019): per type,
``CE_x = sum_l (1 - ML_l) / sum_l (1 - ML_l^base)`` over the non-zero levels published for
both runs; mCE = mean over types. Undefined: no common level, or a baseline with no
error -> None.
"""

from __future__ import annotations

import numpy as np


def precision(tp, fp, zero_division=0.0):
    """``tp / (tp + fp)`` elementwise, ``zero_division`` where nothing is predicted KO.

    Examples
    --------
    >>> precision(np.array([3, 0]), np.array([1, 0])).tolist()
    [0.75, 0.0]
    """
    tp, fp = np.asarray(tp, dtype=float), np.asarray(fp, dtype=float)
    den = tp + fp
    out = np.full(np.broadcast(tp, den).shape, float(zero_division))
    np.divide(tp, den, out=out, where=den > 0)
    return out


def first_break(values, reference, margin):
    """Index of the first ``values[..., k] < reference - margin`` along the last axis; len when none.

    Examples
    --------
    >>> first_break(np.array([0.9, 0.85, 0.6, 0.9]), 0.9, 0.1)
    2
    >>> first_break(np.array([0.9, 0.85]), 0.9, 0.1)
    2
    """
    v = np.asarray(values, dtype=float)
    below = v < np.asarray(reference, dtype=float)[..., None] - margin if np.ndim(reference) else \
        v < reference - margin
    k = v.shape[-1]
    idx = np.where(below.any(axis=-1), np.argmax(below, axis=-1), k)
    return int(idx) if np.ndim(idx) == 0 else idx


def ladders(perturbation, level, types, signed):
    """{ladder name: sorted levels}: "x" (levels > 0) and, for signed types, "x -" (levels < 0, by |level|)."""
    out = {}
    for x in types:
        lv = np.unique(level[(perturbation == x) & (level != 0)])
        if x in signed:
            if (lv > 0).any():
                out[f"{x} +"] = lv[lv > 0]
            if (lv < 0).any():
                out[f"{x} -"] = lv[lv < 0][::-1]
        elif len(lv):
            out[x] = lv[np.argsort(np.abs(lv), kind="stable")]
    return out


def breaking_points(y_rob, pred_rob, perturbation, level, y_perf, pred_perf, margin, types, signed=(),
                    zero_division=0.0, n_boot=0, seed=0, interval_level=0.95):
    """Per ladder: levels, precision per level, the breaking level and its bootstrap interval.

    ``y_*``: 0 KO, 1 OK; ``pred_*``: 0 KO, 1 OK, 2 UNKNOWN; ``perturbation``: type names
    per row; ``level``: float per row. Returns {"reference_precision", "reference_ci",
    "margin", "ladders": {name: {"levels", "precision", "n", "break_level" (None = not
    reached), "break_interval" ([lo, hi], None = not reached)}}}.

    Examples
    --------
    >>> r = breaking_points(np.array([0, 1, 0, 1]), np.array([0, 1, 0, 0]), np.array(["blur"] * 4),
    ...                     np.array([1.0, 1.0, 2.0, 2.0]), np.array([0, 1]), np.array([0, 1]), 0.1, ["blur"])
    >>> r["ladders"]["blur"]["precision"], r["ladders"]["blur"]["break_level"]
    ([1.0, 0.5], 2.0)
    """
    y_rob, pred_rob = np.asarray(y_rob), np.asarray(pred_rob)
    perturbation, level = np.asarray(perturbation).astype(str), np.asarray(level, dtype=float)
    rng = np.random.default_rng([int(seed), 20])

    def counts(y, pred):
        ko, ok = y == 0, y == 1
        return (int(ko.sum()), int((ko & (pred == 0)).sum()), int(ok.sum()), int((ok & (pred == 0)).sum()))

    def resample(c):  # (B,) tp and fp draws for counts (n_ko, tp, n_ok, fp)
        n_ko, tp, n_ok, fp = c
        return (rng.binomial(n_ko, tp / n_ko if n_ko else 0.0, n_boot),
                rng.binomial(n_ok, fp / n_ok if n_ok else 0.0, n_boot))

    ref_c = counts(np.asarray(y_perf), np.asarray(pred_perf))
    ref = float(precision(ref_c[1], ref_c[3], zero_division))
    ref_b = precision(*resample(ref_c), zero_division) if n_boot else None
    q = [(1 - interval_level) / 2, (1 + interval_level) / 2]
    out = {"reference_precision": ref, "margin": float(margin), "ladders": {},
           "reference_ci": None if ref_b is None else [float(v) for v in np.quantile(ref_b, q)]}
    for name, levels in ladders(perturbation, level, types, signed).items():
        x = name.split(" ")[0]
        cs = [counts(y_rob[m], pred_rob[m]) for m in ((perturbation == x) & (level == lv) for lv in levels)]
        prec = precision([c[1] for c in cs], [c[3] for c in cs], zero_division)
        k = first_break(prec, ref, margin)
        entry = {"levels": [float(v) for v in levels], "precision": [float(v) for v in prec],
                 "n": [c[0] + c[2] for c in cs], "break_level": float(levels[k]) if k < len(levels) else None,
                 "break_interval": None}
        if n_boot:
            draws = np.stack([precision(*resample(c), zero_division) for c in cs], axis=1)  # (B, levels)
            ks = first_break(draws, ref_b, margin)
            lo = int(np.quantile(ks, q[0], method="lower"))
            hi = int(np.quantile(ks, q[1], method="higher"))
            entry["break_interval"] = [float(levels[lo]) if lo < len(levels) else None,
                                       float(levels[hi]) if hi < len(levels) else None]
        out["ladders"][name] = entry
    return out


def relative_robustness(curves, baseline):
    """mCE-style ratio of summed errors to a baseline run's, per type and their mean.

    ``curves``, ``baseline``: {type: {"levels": [...], "ml": [...]}} (details.json's
    "robustness"; None values are unpublished levels and are skipped).

    Examples
    --------
    >>> r = relative_robustness({"blur": {"levels": [0, 1, 2], "ml": [1.0, 0.9, 0.8]}},
    ...                         {"blur": {"levels": [0, 1, 2], "ml": [1.0, 0.8, 0.6]}})
    >>> round(r["per_type"]["blur"], 6), round(r["mce"], 6)
    (0.5, 0.5)
    """
    per_type = {}
    for x, c in curves.items():
        b = baseline.get(x)
        if not b:
            continue
        mine = {float(lv): v for lv, v in zip(c["levels"], c["ml"]) if lv != 0 and v is not None}
        theirs = {float(lv): v for lv, v in zip(b["levels"], b["ml"]) if lv != 0 and v is not None}
        common = sorted(set(mine) & set(theirs))
        den = sum(1 - theirs[lv] for lv in common)
        per_type[x] = float(sum(1 - mine[lv] for lv in common) / den) if common and den > 0 else None
    values = [v for v in per_type.values() if v is not None]
    return {"per_type": per_type, "mce": float(np.mean(values)) if values else None}
