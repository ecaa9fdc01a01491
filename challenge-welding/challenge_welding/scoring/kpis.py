"""The six trust KPIs from their criteria (raw, each clipped to [0, 1]).

Pure functions over numbers or numpy arrays of any shape (the bootstrap passes
one value per resample); coefficients come from the config (``kpis`` section).
"""

from __future__ import annotations

import numpy as np


def _clip(x):
    out = np.clip(np.asarray(x, dtype=float), 0.0, 1.0)
    return out[()] if out.ndim == 0 else out


def perf_kpi(op, ml, t, alpha_op, alpha_ml, k_c, k_t):
    """``I_perf = (alpha_op e^(-k_c OP) + alpha_ml ML) / (1 + k_t ln(1 + t))``, t in seconds >= 0."""
    return _clip((alpha_op * np.exp(-k_c * np.asarray(op)) + alpha_ml * np.asarray(ml))
                 / (1.0 + k_t * np.log1p(np.asarray(t))))


def uncertainty_kpi(uop, ece_ko, ece_ok, w_ko, w_ok, calib_factor):
    """``I_U = clip(UOP) * clip(1 - calib_factor (w_ko ECE_KO + w_ok ECE_OK))``."""
    return _clip(_clip(uop) * _clip(1.0 - calib_factor * (w_ko * np.asarray(ece_ko)
                                                          + w_ok * np.asarray(ece_ok))))


def robustness_weights(weights, present):
    """The weights a_x of the perturbation types ``present``, renormalised to sum to 1 ({} when none)."""
    present = [x for x in weights if x in present]
    total = sum(weights[x] for x in present)
    return {x: weights[x] / total for x in present} if present and total > 0 else {}


def robustness_kpi(r, weights):
    """``I_rob = sum_x a_x r_x`` over the perturbation types present in ``r``.

    ``r`` maps type -> r_x; a type missing from ``r`` (not in the data) is left
    out and the weights of the others are renormalised to sum to 1
    (:func:`robustness_weights`). No type at all -> 0.
    """
    a = robustness_weights(weights, r)
    if not a:
        return 0.0
    return _clip(sum(a[x] * np.asarray(r[x]) for x in a))


def ood_kpi(auc_syn, auc_real, w_syn, w_real):
    """``I_ood = w_syn AUROC_syn + w_real AUROC_real``."""
    return _clip(w_syn * np.asarray(auc_syn) + w_real * np.asarray(auc_real))


def generalization_kpi(op_g, ml_g, alpha_op, alpha_ml, k_op):
    """``I_gen = alpha_op e^(-k_op OP_g) + alpha_ml ML_g``."""
    return _clip(alpha_op * np.exp(-k_op * np.asarray(op_g)) + alpha_ml * np.asarray(ml_g))


def drift_kpi(op_d, auc_d, alpha_op, alpha_ood, k_op):
    """``I_drift = alpha_op e^(-k_op OP_d) + alpha_ood AUROC_d``."""
    return _clip(alpha_op * np.exp(-k_op * np.asarray(op_d)) + alpha_ood * np.asarray(auc_d))


def raw_kpis(c, r, config):
    """The six raw KPIs from the criteria ``c`` (keys of scoring.registry.CRITERIA_KEYS) and ``r``
    ({perturbation type present: r_x})."""
    k = config.kpis
    p, u, g, d, o = k.perf, k.uncertainty, k.generalization, k.drift, k.ood
    return {
        "perf": perf_kpi(c["op"], c["ml"], c["time_p95"], p.alpha_op, p.alpha_ml, p.k_c, p.k_t),
        "uncertainty": uncertainty_kpi(c["uop"], c["ucalib_ko"], c["ucalib_ok"], u.w_ko, u.w_ok, u.calib_factor),
        "robustness": robustness_kpi(r, k.robustness.weights),
        "ood": ood_kpi(c["ood_syn"], c["ood_real"], o.w_syn, o.w_real),
        "generalization": generalization_kpi(c["op_g"], c["ml_g"], g.alpha_op, g.alpha_ml, g.k_op),
        "drift": drift_kpi(c["op_d"], c["ood_d"], d.alpha_op, d.alpha_ood, d.k_op),
    }

