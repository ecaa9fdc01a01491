"""Piecewise-linear rescaling of a raw KPI and the final score."""

from __future__ import annotations

import numpy as np


def rescaling_mode(alpha1, alpha2):
    """Which map applies: "three-piece", "two-piece" (alpha1 <= 0) or "unscaled".

    Unscaled when not calibrated (null), when alpha2 <= alpha1 (the virtual
    "good" is not above "full UNKNOWN": the map would not be increasing) or
    when alpha2 >= 1 (no room for the last piece).
    """
    if alpha1 is None or alpha2 is None or alpha2 <= alpha1 or alpha2 >= 1:
        return "unscaled"
    return "two-piece" if alpha1 <= 0 else "three-piece"


def rescale(x, alpha1, alpha2, beta1=0.1, beta2=0.9):
    """Map a raw KPI x in [0, 1] through (0, 0), (alpha1, beta1), (alpha2, beta2), (1, 1).

    ``f(x) = beta1/alpha1 x`` on [0, alpha1), ``beta1 + (beta2-beta1)/(alpha2-alpha1) (x-alpha1)``
    on [alpha1, alpha2], ``beta2 + (1-beta2)/(1-alpha2) (x-alpha2)`` on (alpha2, 1]; the
    result is clipped to [0, 1]. Two-piece (alpha1 <= 0): through (alpha2, beta2)
    only. Unscaled (see :func:`rescaling_mode`): f(x) = x.
    """
    x = np.clip(np.asarray(x, dtype=float), 0.0, 1.0)
    mode = rescaling_mode(alpha1, alpha2)
    if mode == "three-piece":
        out = np.interp(x, [0.0, alpha1, alpha2, 1.0], [0.0, beta1, beta2, 1.0])
    elif mode == "two-piece":
        out = np.interp(x, [0.0, alpha2, 1.0], [0.0, beta2, 1.0])
    else:
        out = x
    out = np.clip(out, 0.0, 1.0)
    return out[()] if np.ndim(out) == 0 else out


def rescale_all(raw, config):
    """Rescale each raw KPI with its calibrated breakpoints: {kpi: (value, mode)}."""
    r = config.rescaling
    out = {}
    for kpi, value in raw.items():
        a = r.alpha[kpi]
        out[kpi] = (rescale(value, a.alpha1, a.alpha2, r.beta1, r.beta2), rescaling_mode(a.alpha1, a.alpha2))
    return out


def final_score(rescaled, weights):
    """``score = 100 * sum_k w_k I_k`` over the rescaled KPIs (weights sum to 1)."""
    return 100.0 * sum(weights[k] * np.asarray(v) for k, v in rescaled.items())
