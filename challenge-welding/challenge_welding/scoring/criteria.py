"""Every criterion of the score from the merged frames (the functional core's entry point).

``prepare`` turns the frames into integer-coded numpy arrays once; ``compute``
evaluates all criteria, the raw and rescaled KPIs and the score from them, for
the point estimate (no weights) or for a batch of bootstrap resamples (a
(B, n) weight matrix per set): the same code serves both.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from challenge_welding.constants import CLASSES, PERTURBATIONS, SET_NAMES, STATES
from challenge_welding.scoring import metrics as m
from challenge_welding.scoring.inputs import OOD_COLUMN, PROBA_COLUMNS
from challenge_welding.scoring.kpis import ROBUSTNESS_KEYS, raw_kpis
from challenge_welding.scoring.rescale import final_score, rescale_all


@dataclass
class SetArrays:
    """One evaluation set as integer-coded arrays (see scoring.metrics for the codes)."""

    n: int
    y: np.ndarray            # 0 KO, 1 OK
    pred: np.ndarray         # 0 KO, 1 OK, 2 UNKNOWN
    proba: np.ndarray        # (n, 3)
    ood_score: np.ndarray
    seams: np.ndarray        # codes into seam_names
    seam_names: list
    seam_w: np.ndarray       # criticality weight per seam code
    time: np.ndarray
    ood: np.ndarray | None = None           # bool, 1 = labelled OOD
    perturbation: np.ndarray | None = None  # str
    level: np.ndarray | None = None

    def strata(self):
        """Bootstrap strata: class, crossed with the set's design cells (OOD label, perturbation level)."""
        keys = [self.y]
        if self.ood is not None:
            keys.append(self.ood.astype(int))
        if self.perturbation is not None:
            keys.append(np.unique(self.perturbation, return_inverse=True)[1])
            keys.append(np.unique(self.level, return_inverse=True)[1])
        return np.unique(np.stack(keys, axis=1), axis=0, return_inverse=True)[1].ravel()


def prepare(frames, config) -> dict:
    """{set: SetArrays} from the validated frames (see scoring.inputs.read_frames)."""
    out = {}
    for name in SET_NAMES:
        f = frames[name]
        seam_names = sorted(f["welding-seams"].unique())
        seams = np.searchsorted(seam_names, f["welding-seams"].to_numpy())
        seam_w = np.array([config["seam_weights"].get(s, config["default_seam_weight"]) for s in seam_names],
                          dtype=float)
        out[name] = SetArrays(
            n=len(f),
            y=_codes(f["class"].to_numpy(), CLASSES),
            pred=_codes(f["predicted_state"].to_numpy(), STATES),
            proba=f[list(PROBA_COLUMNS)].to_numpy(dtype=float),
            ood_score=f[OOD_COLUMN].to_numpy(dtype=float),
            seams=seams, seam_names=list(seam_names), seam_w=seam_w,
            time=f["compute_time"].to_numpy(dtype=float),
            ood=f["ood"].to_numpy().astype(bool) if "ood" in f.columns else None,
            perturbation=f["perturbation"].to_numpy().astype(str) if "perturbation" in f.columns else None,
            level=f["level"].to_numpy(dtype=float) if "level" in f.columns else None,
        )
    return out


def _codes(values, names):
    """Integer codes of validated labels (index in ``names``)."""
    codes = np.full(len(values), -1, dtype=np.int8)
    values = np.asarray(values, dtype=object)
    for i, n in enumerate(names):
        codes[values == n] = i
    return codes


def _subset(a: SetArrays, mask):
    """The rows of ``a`` selected by ``mask`` (a boolean array)."""
    fields = {k: (v[mask] if isinstance(v, np.ndarray) and k not in ("seam_w",) else v)
              for k, v in a.__dict__.items()}
    fields["n"] = int(np.count_nonzero(mask))
    return SetArrays(**fields)


def _w(weights, mask=None):
    if weights is None or mask is None:
        return weights
    return weights[..., mask]


class Notes:
    """Collects undefined cases as {"metric", "set", "case", "resolution"} records."""

    def __init__(self, active=True):
        self.records, self.active = [], active

    def sink(self, metric, set_name):
        notes = self

        class _Sink(list):
            def append(self, message):  # noqa: D401 - list protocol used by the metrics
                if notes.active:
                    case, _, resolution = message.partition(": ")
                    rec = {"metric": metric, "set": set_name, "case": case, "resolution": resolution}
                    if rec not in notes.records:
                        notes.records.append(rec)
        return _Sink()


def cost_matrix(config):
    return np.array([[config["cost"][t][p] for p in STATES] for t in CLASSES], dtype=float)


def seam_costs(a: SetArrays, config, weights=None, undefined=None):
    """Seam-weighted costs C of the hard decisions, the soft outputs, the ideal and the human.

    The ideal answer is the true class, UNKNOWN for samples labelled OOD; the
    human-only process answers UNKNOWN everywhere. Returns 4 arrays.
    """
    cost = cost_matrix(config)
    ideal = a.y.astype(int) if a.ood is None else np.where(a.ood, m.UNKNOWN, a.y)
    columns = np.stack([m.sample_costs(a.y, a.pred, cost), m.expected_costs(a.y, a.proba, cost),
                        m.sample_costs(a.y, ideal, cost), m.sample_costs(a.y, np.full(a.n, m.UNKNOWN), cost)],
                       axis=1)
    c = m.seam_weighted_cost(columns, a.seams, a.seam_w, sample_weight=weights, undefined=undefined)
    return c[..., 0], c[..., 1], c[..., 2], c[..., 3]


def _ml_args(config):
    ml = config["ml"]
    return dict(beta=ml["beta"], average=ml["average"], pos_label=CLASSES.index(ml["pos_label"]),
                zero_division=ml["zero_division"])


def robustness_curves(a: SetArrays, config, weights=None, notes=None):
    """{type: (levels, ML per level)} for each perturbation type present.

    The clean rows (perturbation ``none``) are level 0 of every axis; rows of
    the type at level 0 join them.
    """
    out = {}
    clean = a.perturbation == "none"
    for x in PERTURBATIONS:
        rows = a.perturbation == x
        if not rows.any():
            continue
        mask = rows | clean
        sub = _subset(a, mask)
        level = np.where(sub.perturbation == "none", 0.0, sub.level)
        levels, groups = np.unique(level, return_inverse=True)
        sink = notes.sink(f"ML per level ({x})", "robustness") if notes else None
        ml = m.ml_score(sub.y, sub.pred, groups=groups, n_groups=len(levels), sample_weight=_w(weights, mask),
                        undefined=sink, **_ml_args(config))
        out[x] = (levels, ml)
    return out


def compute(prep, config, weights=None, notes=None):
    """All criteria, raw and rescaled KPIs, and the score.

    ``weights``: None (point estimate) or {set: (B, n_set) frequency weights}.
    Returns {"criteria": {key: value}, "raw": {kpi: value}, "rescaled": {kpi: value},
    "modes": {kpi: mode}, "score": value, "curves": {type: (levels, ml)},
    "costs": {set: (C_pred, C_soft, C_ideal, C_human)}}.
    """
    W = weights or {}
    ml_args = _ml_args(config)
    u = config["kpis"]["uncertainty"]

    def sink(metric, set_name):
        return notes.sink(metric, set_name) if notes else None

    c, costs = {}, {}
    # performance: OP, ML, time, UOP, ECE on the true-KO and true-OK subsets
    a, w = prep["performance"], W.get("performance")
    costs["performance"] = cp, cs, ci, ch = seam_costs(a, config, w, sink("seam-weighted cost", "performance"))
    c["op"] = m.operational_cost(cp, ci, ch, sink("OP", "performance"))
    c["ml"] = m.ml_score(a.y, a.pred, sample_weight=w, undefined=sink("ML", "performance"), **ml_args)
    c["time_p95"] = m.time_percentile(a.time, config["time"]["percentile"], config["time"]["method"],
                                      sample_weight=w, undefined=sink("time percentile", "performance"))
    c["uop"] = m.uncertainty_gain(cp, cs, ci, ch, u["degenerate_tol"], sink("UOP", "performance"))
    for key, cls in (("ucalib_ko", 0), ("ucalib_ok", 1)):
        mask = a.y == cls
        c[key] = m.expected_calibration_error(a.y[mask], a.proba[mask], u["ece_bins"], _w(w, mask),
                                              sink(f"ECE (true-{CLASSES[cls]} subset)", "performance"))
    # robustness
    curves = robustness_curves(prep["robustness"], config, W.get("robustness"), notes)
    r = {}
    for x, key in ROBUSTNESS_KEYS.items():
        if x in curves:
            r[x] = c[key] = m.level_auc(*curves[x], undefined=sink(f"r_{x}", "robustness"))
        else:
            wr = W.get("robustness")
            c[key] = 0.0 if wr is None else np.zeros(len(wr))
            if notes:
                notes.sink(f"r_{x}", "robustness").append(
                    f"perturbation type {x} absent from the data: r set to 0, its weight shared among the others")
    # OOD detection
    for key, name in (("ood_syn", "ood_synthetic"), ("ood_real", "ood_real")):
        a, w = prep[name], W.get(name)
        c[key] = m.roc_auc(a.ood, a.ood_score, sample_weight=w, undefined=sink("AUROC", name))
    # generalization
    a, w = prep["generalization"], W.get("generalization")
    costs["generalization"] = cp, cs, ci, ch = seam_costs(a, config, w, sink("seam-weighted cost", "generalization"))
    c["op_g"] = m.operational_cost(cp, ci, ch, sink("OP", "generalization"))
    c["ml_g"] = m.ml_score(a.y, a.pred, sample_weight=w, undefined=sink("ML", "generalization"), **ml_args)
    # drift: OP over the samples not labelled OOD, AUROC over the whole sequence
    a, w = prep["drift"], W.get("drift")
    inlier = ~a.ood
    costs["drift"] = cp, cs, ci, ch = seam_costs(_subset(a, inlier), config, _w(w, inlier),
                                                 sink("seam-weighted cost", "drift"))
    c["op_d"] = m.operational_cost(cp, ci, ch, sink("OP", "drift"))
    c["ood_d"] = m.roc_auc(a.ood, a.ood_score, sample_weight=w, undefined=sink("AUROC", "drift"))

    raw = raw_kpis(c, r, config)
    scaled = rescale_all(raw, config)
    rescaled = {k: v for k, (v, _) in scaled.items()}
    score = final_score(rescaled, config["final_weights"])
    return {"criteria": c, "raw": raw, "rescaled": rescaled, "modes": {k: md for k, (_, md) in scaled.items()},
            "score": score, "curves": curves, "costs": costs, "robustness_present": sorted(r)}
