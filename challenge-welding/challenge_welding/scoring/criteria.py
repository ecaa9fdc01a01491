"""Every criterion of the score from the merged frames (the functional core's entry point).

``prepare`` turns the frames into integer-coded numpy arrays once; ``compute``
evaluates all criteria, the raw and rescaled KPIs and the score from them, for
the point estimate (no weights) or for a batch of bootstrap resamples (a
(B, n) weight matrix per set): the same code serves both.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from challenge_welding.contract.names import CLASSES, PERTURBATIONS, SET_NAMES, STATES
from challenge_welding.scoring import metrics as m
from challenge_welding.contract.names import OOD_COLUMN, PROBA_COLUMNS
from challenge_welding.scoring.kpis import raw_kpis
from challenge_welding.contract.registry import CRITERIA_KEYS, ROBUSTNESS_KEYS, set_criteria_keys
from challenge_welding.scoring.rescale import final_score, rescale_all


PERTURBATION_CODES = PERTURBATIONS + ("none",)


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
    perturbation: np.ndarray | None = None  # codes into PERTURBATION_CODES
    level: np.ndarray | None = None
    cache: dict = field(default_factory=dict)  # per-set structures computed once (e.g. robustness axes)

    def strata(self):
        """Bootstrap strata codes: class, crossed with the set's design cells (OOD label, perturbation level)."""
        key = self.y.astype(np.int64)
        if self.ood is not None:
            key = key * 2 + self.ood
        if self.perturbation is not None:
            key = key * len(PERTURBATION_CODES) + self.perturbation
            key = key * (len(self.level) + 1) + np.unique(self.level, return_inverse=True)[1].ravel()
        return np.unique(key, return_inverse=True)[1].ravel()


def prepare(frames, config) -> dict:
    """{set: SetArrays} from the validated frames (see scoring.inputs.read_frames)."""
    out = {}
    for name in SET_NAMES:
        f = frames[name]
        seam_cat = pd.Categorical(f["welding-seams"].to_numpy(dtype=object))
        seam_names = [str(x) for x in seam_cat.categories]  # sorted
        seams = seam_cat.codes.astype(np.int64)
        seam_w = np.array([config.seam_weights.get(s, config.default_seam_weight) for s in seam_names],
                          dtype=float)
        out[name] = SetArrays(
            n=len(f),
            y=label_index(f["class"], CLASSES),
            pred=label_index(f["predicted_state"], STATES),
            proba=f[list(PROBA_COLUMNS)].to_numpy(dtype=float),
            ood_score=f[OOD_COLUMN].to_numpy(dtype=float),
            seams=seams, seam_names=list(seam_names), seam_w=seam_w,
            time=f["compute_time"].to_numpy(dtype=float),
            ood=f["ood"].to_numpy().astype(bool) if "ood" in f.columns else None,
            perturbation=label_index(f["perturbation"], PERTURBATION_CODES) if "perturbation" in f.columns else None,
            level=f["level"].to_numpy(dtype=float) if "level" in f.columns else None,
        )
    return out


def label_index(values, names):
    """Integer codes of validated labels (index in ``names``: CLASSES or STATES, -1 outside);
    the one coding of labels in the scoring and in what it reports."""
    index = pd.Index(list(names))
    if isinstance(getattr(values, "dtype", None), pd.CategoricalDtype):  # recode categories, not rows
        lookup = np.append(index.get_indexer(values.cat.categories), -1)
        return lookup[values.cat.codes.to_numpy()].astype(np.int8)
    return index.get_indexer(values).astype(np.int8)


def take_rows(a: SetArrays, idx):
    """The rows ``idx`` (integer indices, or a boolean mask) of ``a``."""
    idx = np.flatnonzero(idx) if np.asarray(idx).dtype == bool else np.asarray(idx)
    fields = {k: (v[idx] if isinstance(v, np.ndarray) and k != "seam_w" else v) for k, v in a.__dict__.items()}
    fields.update(n=len(idx), cache={})
    return SetArrays(**fields)


def _w(weights, mask=None):
    if weights is None or mask is None:
        return weights
    return np.take(weights, np.flatnonzero(mask), axis=-1)  # np.take: much faster than fancy indexing


class UndefinedCases:
    """Collects undefined cases as {"metric", "set", "case", "resolution"} records (no duplicates).

    Cases met in bootstrap resamples are counted: {"resamples": hits, "of": B} is
    added to their record (the point estimate's cases have no such keys).
    """

    def __init__(self):
        self.records = []
        self._resamples = {}

    def recorder(self, metric, set_name):
        """The ``undefined`` argument of a scoring.metrics function, recording into this collection."""
        return CaseRecorder(self, metric, set_name)

    def _record(self, metric, set_name, message):
        case, _, resolution = message.partition(": ")
        return {"metric": metric, "set": set_name, "case": case, "resolution": resolution}

    def add(self, metric, set_name, message):
        rec = self._record(metric, set_name, message)
        if rec not in self.records:
            self.records.append(rec)

    def add_resamples(self, metric, set_name, message, hits, total):
        key = (metric, set_name, message)
        if key not in self._resamples:
            rec = {**self._record(metric, set_name, message), "resamples": 0, "of": 0}
            self._resamples[key] = rec
        rec = self._resamples[key]
        rec["resamples"] += hits
        rec["of"] += total
        if rec["resamples"] and rec not in self.records:
            self.records.append(rec)


class CaseRecorder:
    """What scoring.metrics calls on an undefined case: ``append(message)``, ``add_resamples(...)``."""

    def __init__(self, cases: UndefinedCases, metric, set_name):
        self.cases, self.metric, self.set_name = cases, metric, set_name

    def append(self, message):
        self.cases.add(self.metric, self.set_name, message)

    def add_resamples(self, message, hits, total):
        self.cases.add_resamples(self.metric, self.set_name, message, hits, total)


class _Discard:
    """A recorder that keeps nothing (no collection given)."""

    def append(self, message):
        pass

    def add_resamples(self, message, hits, total):
        pass


def no_record(metric):
    """The default ``record`` of the set functions: undefined cases are not kept."""
    return _Discard()


def cost_matrix(cost: dict) -> np.ndarray:
    """The (2, 3) cost matrix, rows true KO/OK, columns predicted KO/OK/UNKNOWN, from ``cost[true][pred]``."""
    return np.array([[cost[t][p] for p in STATES] for t in CLASSES], dtype=float)


def seam_costs(a: SetArrays, config, weights=None, undefined=None):
    """Seam-weighted costs C of the hard decisions, the soft outputs, the ideal and the human.

    The ideal answer is the true class, UNKNOWN for samples labelled OOD; the
    human-only process answers UNKNOWN everywhere. Returns 4 arrays.
    """
    cost = cost_matrix(config.cost)
    ideal = a.y.astype(int) if a.ood is None else np.where(a.ood, m.UNKNOWN, a.y)
    columns = np.stack([m.sample_costs(a.y, a.pred, cost), m.expected_costs(a.y, a.proba, cost),
                        m.sample_costs(a.y, ideal, cost), m.sample_costs(a.y, np.full(a.n, m.UNKNOWN), cost)],
                       axis=1)
    c = m.seam_weighted_cost(columns, a.seams, a.seam_w, sample_weight=weights, undefined=undefined)
    return c[..., 0], c[..., 1], c[..., 2], c[..., 3]


def _ml_args(config):
    ml = config.ml
    return dict(beta=ml.beta, average=ml.average, pos_label=CLASSES.index(ml.pos_label),
                zero_division=ml.zero_division)


def _axes(a: SetArrays):
    """Per perturbation type present: (rows of the axis, its sorted levels, level index per row).

    The clean rows (perturbation ``none``) are level 0 of every axis; rows of
    the type at level 0 join them. Computed once per set (cached).
    """
    if "axes" not in a.cache:
        axes = {}
        clean = a.perturbation == PERTURBATION_CODES.index("none")
        for code, x in enumerate(PERTURBATIONS):
            rows = a.perturbation == code
            if rows.any():
                mask = rows | clean
                level = np.where(clean[mask], 0.0, a.level[mask])
                levels, groups = np.unique(level, return_inverse=True)
                axes[x] = (mask, levels, groups)
        a.cache["axes"] = axes
    return a.cache["axes"]


def performance_criteria(a: SetArrays, config, w=None, record=no_record):
    """OP, ML, time p95, UOP and the ECE of the true-KO and true-OK subsets on ``performance``."""
    u = config.kpis.uncertainty
    c = {}
    costs = cp, cs, ci, ch = seam_costs(a, config, w, record("seam-weighted cost"))
    c["op"] = m.operational_cost(cp, ci, ch, record("OP"))
    c["ml"] = m.ml_score(a.y, a.pred, sample_weight=w, undefined=record("ML"), **_ml_args(config))
    c["time_p95"] = m.time_percentile(a.time, config.time.percentile, config.time.method,
                                      sample_weight=w, undefined=record("time percentile"))
    c["uop"] = m.uncertainty_gain(cp, cs, ci, ch, u.degenerate_tol, record("UOP"))
    ece = m.expected_calibration_error(a.y, a.proba, u.ece_bins, groups=a.y, n_groups=2, sample_weight=w,
                                       undefined=record("ECE (true-KO and true-OK subsets)"))
    c["ucalib_ko"], c["ucalib_ok"] = ece[..., 0], ece[..., 1]
    return c, {"costs": costs}


def robustness_criteria(a: SetArrays, config, w=None, record=no_record):
    """r_x of each perturbation type present (r of an absent type: 0, recorded)."""
    c, curves = {}, {}
    for x, key in ROBUSTNESS_KEYS.items():
        if x not in _axes(a):
            c[key] = 0.0 if w is None else np.zeros(len(w))
            record(f"r_{x}").append(f"perturbation type {x} absent from the data: "
                                  "r set to 0, its weight shared among the others")
            continue
        mask, levels, groups = _axes(a)[x]
        ml = m.ml_score(a.y[mask], a.pred[mask], groups=groups, n_groups=len(levels), sample_weight=_w(w, mask),
                        undefined=record(f"ML per level ({x})"), **_ml_args(config))
        curves[x] = (levels, ml, np.bincount(groups, minlength=len(levels)))  # samples per level
        c[key] = m.level_auc(levels, ml, undefined=record(f"r_{x}"))
    return c, {"curves": curves, "present": sorted(curves)}


def ood_criteria(a: SetArrays, config, w=None, record=no_record, key=None):
    """AUROC of the OOD score against the OOD label (``key``: the set's criterion in the registry)."""
    return {key: m.roc_auc(a.ood, a.ood_score, sample_weight=w, undefined=record("AUROC"))}, {}


def generalization_criteria(a: SetArrays, config, w=None, record=no_record):
    """OP_g and ML_g on the unseen seams."""
    costs = cp, cs, ci, ch = seam_costs(a, config, w, record("seam-weighted cost"))
    return ({"op_g": m.operational_cost(cp, ci, ch, record("OP")),
             "ml_g": m.ml_score(a.y, a.pred, sample_weight=w, undefined=record("ML"), **_ml_args(config))},
            {"costs": costs})


def drift_criteria(a: SetArrays, config, w=None, record=no_record):
    """OP_d over the samples not labelled OOD, AUROC_d over the whole sequence."""
    inlier = ~a.ood
    costs = cp, cs, ci, ch = seam_costs(take_rows(a, inlier), config, _w(w, inlier), record("seam-weighted cost"))
    return ({"op_d": m.operational_cost(cp, ci, ch, record("OP")),
             "ood_d": m.roc_auc(a.ood, a.ood_score, sample_weight=w, undefined=record("AUROC"))},
            {"costs": costs})


# how each set's criteria are computed; which keys each set yields is the registry's (scoring.registry)
SET_FUNCTIONS = {
    "performance": performance_criteria,
    "robustness": robustness_criteria,
    "ood_real": ood_criteria,
    "ood_synthetic": ood_criteria,
    "generalization": generalization_criteria,
    "drift": drift_criteria,
}


def set_criteria(name, a: SetArrays, config, w=None, cases=None):
    """The criteria of one set: ({criterion key: value} in registry order, {extra outputs}).

    ``cases``: an UndefinedCases collecting the undefined cases met (None: not kept).
    """
    def record(metric):
        return cases.recorder(metric, name) if cases is not None else _Discard()
    keys = set_criteria_keys(name)
    fn = SET_FUNCTIONS[name]
    values, extra = fn(a, config, w, record, key=keys[0]) if fn is ood_criteria else fn(a, config, w, record)
    return {k: values[k] for k in keys}, extra


def combine(criteria, present, config):
    """Raw and rescaled KPIs and the score from all criteria (values or per-resample arrays)."""
    r = {x: criteria[ROBUSTNESS_KEYS[x]] for x in present}
    raw = raw_kpis(criteria, r, config)
    scaled = rescale_all(raw, config)
    rescaled = {k: v for k, (v, _) in scaled.items()}
    return {"raw": raw, "rescaled": rescaled, "modes": {k: md for k, (_, md) in scaled.items()},
            "score": final_score(rescaled, config.final_weights)}


def compute(prep, config, weights=None, cases=None):
    """All criteria, raw and rescaled KPIs, and the score.

    ``weights``: None (point estimate) or {set: (B, n_set) frequency weights}.
    Returns {"criteria", "raw", "rescaled", "modes", "score", "curves", "costs", "robustness_present"}.
    """
    W = weights or {}
    criteria, costs, curves, present = {}, {}, {}, []
    for name in SET_NAMES:
        c, extra = set_criteria(name, prep[name], config, W.get(name), cases)
        criteria.update(c)
        if "costs" in extra:
            costs[name] = extra["costs"]
        if name == "robustness":
            curves, present = extra["curves"], extra["present"]
    criteria = {key: criteria[key] for key in CRITERIA_KEYS}  # registry (scores.json) order
    return {"criteria": criteria, **combine(criteria, present, config), "curves": curves, "costs": costs,
            "robustness_present": present}
