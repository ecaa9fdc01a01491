"""The facts about each KPI and criterion of the score, in one place.

Read by the score (which criteria feed which KPI, in which order), the metric
card, the results page (labels, sets, formulas with the config's coefficients)
and the leaderboard (:func:`lower_better_keys`). Adding a criterion means one
:class:`Criterion` here and its computation in ``scoring.criteria``; the
registry-driven tests (sample-order invariance, better direction) then cover it.
Pure data: this module imports nothing else of the package.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Metric:
    """A metric of the metric card: its formula text and its parameters read from the config."""

    name: str
    formula: str
    parameters: Callable[[dict], dict]


@dataclass(frozen=True)
class Criterion:
    """One scores.json criterion: which KPI it feeds, on which set, by which metric, and which way is better."""

    key: str        # scores.json key
    kpi: str        # the KPI it feeds
    set: str        # evaluation set
    metric: str     # name of its Metric
    label: str      # short label on the page
    meaning: str    # one line on the page
    better: str     # "higher" or "lower"
    axis: str | None = None  # perturbation type of a robustness criterion


@dataclass(frozen=True)
class Kpi:
    """One of the six trust KPIs: label, sets, and its formula with the config's coefficients."""

    key: str
    label: str
    sets: str
    formula: Callable[[dict], str]


def _c(value) -> str:
    """A coefficient as written in a formula: 0.4, 12, 0.05 (no trailing zeros)."""
    text = f"{float(value):.4f}".rstrip("0").rstrip(".")
    return text or "0"


def _ml_name(config) -> str:
    ml = config.ml
    return {"binary": f"F-beta of {ml.pos_label}", "macro": "macro F-beta (KO, OK)",
            "precision": f"precision of {ml.pos_label}"}[ml.average]


def _cost_parameters(config) -> dict:
    return {"cost": config.cost, "seam_weights": config.seam_weights,
            "default_seam_weight": config.default_seam_weight}


METRICS = (
    Metric("OP", "(C(yhat) - C(ideal)) / (C(human) - C(ideal)); C = sum_s w_s mean_{k in s} cost / sum_s w_s",
           lambda c: {**_cost_parameters(c), "ideal": "true class (UNKNOWN if labelled OOD)", "human": "UNKNOWN",
                      "drift": "samples not labelled OOD"}),
    Metric("ML", "F-beta = (1 + b^2) TP / ((1 + b^2) TP + b^2 FN + FP) of the positive class (or its variant)",
           lambda c: {"metric": _ml_name(c), "beta": c.ml.beta, "average": c.ml.average,
                      "pos_label": c.ml.pos_label, "zero_division": c.ml.zero_division,
                      "UNKNOWN": "counts as not predicted positive"}),
    Metric("time_p95", "percentile of per-image predict time (s)",
           lambda c: {"percentile": c.time.percentile, "method": c.time.method}),
    Metric("UOP", "(C(yhat) - C_soft(p)) / (C(yhat) - C(ideal)); if C(yhat) - C(ideal) < tol (C(human) - "
                  "C(ideal)): 1 - (C_soft - C(ideal)) / (C(human) - C(ideal))",
           lambda c: {"tol": c.kpis.uncertainty.degenerate_tol}),
    Metric("ECE", "sum_m |B_m|/N |acc(B_m) - conf(B_m)|, conf = max(p_KO, p_OK)/(p_KO + p_OK)",
           lambda c: {"bins": c.kpis.uncertainty.ece_bins,
                      "binning": "equal width [m/M, (m+1)/M), last closed, empty skipped",
                      "empty subset": "0, reported"}),
    Metric("r_x", "trapezoid area of ML over the level axis / axis length (level 0 = clean rows)",
           lambda c: {"weights": c.kpis.robustness.weights, "ML": _ml_name(c)}),
    Metric("AUROC", "P(s_ood > s_in) + 0.5 P(s_ood = s_in)",
           lambda c: {"ties": "averaged", "constant or single class": 0.5}),
)

_ML = "F-beta of the defect class KO (UNKNOWN = not KO)"
_R = "area under ML(level) / axis length, {} ladder"
CRITERIA = (
    Criterion("op", "perf", "performance", "OP", "OP",
              "operational cost: 0 = perfect, 1 = human-only process, > 1 worse", "lower"),
    Criterion("ml", "perf", "performance", "ML", "ML", _ML, "higher"),
    Criterion("time_p95", "perf", "performance", "time_p95", "t (s)",
              "95th percentile of the per-image predict() time, seconds", "lower"),
    Criterion("uop", "uncertainty", "performance", "UOP", "UOP",
              "gain of the probabilities over the hard answers, in cost", "higher"),
    Criterion("ucalib_ko", "uncertainty", "performance", "ECE", "ECE_KO",
              "calibration error on the true-KO samples", "lower"),
    Criterion("ucalib_ok", "uncertainty", "performance", "ECE", "ECE_OK",
              "calibration error on the true-OK samples", "lower"),
    Criterion("r_blur", "robustness", "robustness", "r_x", "r blur", _R.format("blur"), "higher", "blur"),
    Criterion("r_lum", "robustness", "robustness", "r_x", "r luminance", _R.format("luminance"), "higher",
              "luminance"),
    Criterion("r_rot", "robustness", "robustness", "r_x", "r rotation", _R.format("rotation"), "higher",
              "rotation"),
    Criterion("r_trans", "robustness", "robustness", "r_x", "r translation", _R.format("translation"), "higher",
              "translation"),
    Criterion("ood_syn", "ood", "ood_synthetic", "AUROC", "AUROC synthetic",
              "OOD score against the OOD label, ood_synthetic", "higher"),
    Criterion("ood_real", "ood", "ood_real", "AUROC", "AUROC real",
              "OOD score against the OOD label, ood_real", "higher"),
    Criterion("op_g", "generalization", "generalization", "OP", "OP_g", "operational cost on unseen seams", "lower"),
    Criterion("ml_g", "generalization", "generalization", "ML", "ML_g", "F-beta of KO on unseen seams", "higher"),
    Criterion("op_d", "drift", "drift", "OP", "OP_d", "operational cost on the drift samples not labelled OOD",
              "lower"),
    Criterion("ood_d", "drift", "drift", "AUROC", "AUROC_d",
              "OOD score against the OOD label along the drift sequence", "higher"),
)


def _perf(c):
    k = c.kpis.perf
    return (f"I_perf = ({_c(k.alpha_op)} e^(-{_c(k.k_c)} OP) + {_c(k.alpha_ml)} ML) / "
            f"(1 + {_c(k.k_t)} ln(1 + t))")


def _uncertainty(c):
    k = c.kpis.uncertainty
    return (f"I_U = clip(UOP) · clip(1 - {_c(k.calib_factor)} ({_c(k.w_ko)} ECE_KO + {_c(k.w_ok)} "
            f"ECE_OK)), {k.ece_bins} bins")


def _robustness(c):
    w = c.kpis.robustness.weights
    return "I_rob = " + " + ".join(f"{_c(v)} r_{name}" for name, v in w.items())


def _ood(c):
    k = c.kpis.ood
    return f"I_ood = {_c(k.w_syn)} AUROC_syn + {_c(k.w_real)} AUROC_real"


def _generalization(c):
    k = c.kpis.generalization
    return f"I_gen = {_c(k.alpha_op)} e^(-{_c(k.k_op)} OP_g) + {_c(k.alpha_ml)} ML_g"


def _drift(c):
    k = c.kpis.drift
    return f"I_drift = {_c(k.alpha_op)} e^(-{_c(k.k_op)} OP_d) + {_c(k.alpha_ood)} AUROC_d"


KPIS = (
    Kpi("perf", "Performance", "performance", _perf),
    Kpi("uncertainty", "Uncertainty", "performance", _uncertainty),
    Kpi("robustness", "Robustness", "robustness", _robustness),
    Kpi("ood", "OOD detection", "ood_real + ood_synthetic", _ood),
    Kpi("generalization", "Generalization", "generalization", _generalization),
    Kpi("drift", "Drift", "drift", _drift),
)

KPI_KEYS = tuple(k.key for k in KPIS)
CRITERIA_KEYS = tuple(c.key for c in CRITERIA)
BY_KEY = {c.key: c for c in CRITERIA}
KPI_BY_KEY = {k.key: k for k in KPIS}
# perturbation type -> scores.json key of its r_x
ROBUSTNESS_KEYS = {c.axis: c.key for c in CRITERIA if c.axis}


def kpi_criteria(kpi: str) -> tuple:
    """Keys of the criteria feeding ``kpi``, in registry order."""
    return tuple(c.key for c in CRITERIA if c.kpi == kpi)


def set_criteria_keys(set_name: str) -> tuple:
    """Keys of the criteria computed on ``set_name``, in registry order."""
    return tuple(c.key for c in CRITERIA if c.set == set_name)


def lower_better_keys() -> frozenset:
    """scores.json keys where a smaller value is better (costs, time, calibration errors)."""
    return frozenset(c.key for c in CRITERIA if c.better == "lower")


def metric_card_rows(config) -> list:
    """One metric-card row per metric: name, the sets and criteria using it, formula, parameters."""
    rows = []
    for metric in METRICS:
        users = [c for c in CRITERIA if c.metric == metric.name]
        sets = list(dict.fromkeys(c.set for c in users))
        rows.append({"name": metric.name, "set": ", ".join(sets), "criteria": [c.key for c in users],
                     "formula": metric.formula, "parameters": metric.parameters(config)})
    return rows
