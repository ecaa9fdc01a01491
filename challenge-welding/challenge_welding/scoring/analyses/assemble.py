"""details["analyses"]: every analysis of issue 20 from the merged frames, in a form safe to publish.

Reported beyond the score, never part of it. Disclosure (scoring.disclosure): every
published number aggregates at least ``min_samples`` samples: thresholds are placed
between blocks of at least ``min_samples`` samples, curves have at most ``points``
steps, the drift onset is rounded down to a block of ``min_samples``, per-level
precisions of smaller levels are hidden, and a localisation, OOD or expert-label
summary over fewer samples is not reported. No map or mask is published.
"""

from __future__ import annotations

import numpy as np

from challenge_welding.contract.checked import plain
from challenge_welding.contract.names import CLASSES, OOD_SETS, PERTURBATIONS, STATES
from challenge_welding.scoring import metrics as m
from challenge_welding.scoring.criteria import cost_matrix, label_index
from challenge_welding.scoring.disclosure import hide_small, sequence_bins
from challenge_welding.contract.explanation_maps import MAP_SCALE
from . import annotators, breaking_points, cost_coverage, drift_delay, localisation, ood_detail

SIGNED = ("rotation", "luminance")


def _codes(frame):
    """(class: KO 0, OK 1; predicted state: KO 0, OK 1, UNKNOWN 2), criteria's coding."""
    return (label_index(frame["class"], CLASSES).astype(np.int64),
            label_index(frame["predicted_state"], STATES).astype(np.int64))


def _seam_weights(frame, config):
    seams = frame["welding-seams"].astype(str).to_numpy()
    names, codes = np.unique(seams, return_inverse=True)
    w = np.array([config.seam_weights.get(s, config.default_seam_weight) for s in names], dtype=float)
    return m.seam_sample_weights(codes, w)


def cost_section(frame, config):
    """The performance set's cost-coverage curve, operating point, best thresholds and AURC-type summaries."""
    d = config.disclosure
    y, pred = _codes(frame)
    cost = cost_matrix(config.cost)
    v = _seam_weights(frame, config)
    p_ko = frame["scores KO"].to_numpy(float)
    own, own_cov = cost_coverage.decision_cost(y, pred, cost, v)
    if own is None:
        return {"available": False, "reason": "empty performance set"}
    ideal, _ = cost_coverage.decision_cost(y, y, cost, v)
    human, _ = cost_coverage.decision_cost(y, np.full(len(y), 2), cost, v)
    levels = np.linspace(0.0, 1.0, int(d.points) + 1)
    res = cost_coverage.cost_coverage(p_ko, y, cost, v, levels, min_block=int(d.min_samples))
    at_own = cost_coverage.cost_coverage(p_ko, y, cost, v, [own_cov], min_block=int(d.min_samples))["curve"]

    def op(c):
        return None if c is None or human == ideal else (c - ideal) / (human - ideal)

    best = res["best"]
    conf, label = m.top_label(frame[["scores KO", "scores OK", "scores UNKNOWN"]].to_numpy(float))
    rc = cost_coverage.risk_coverage(conf, (label != y).astype(float))
    return {"available": True, "n": len(y), "cost_ideal": ideal, "cost_human": human,
            "operating_point": {"cost": own, "coverage": own_cov, "op": op(own)},
            "best": {**best, "op": op(best["cost"])},
            "best_at_own_coverage": {"cost": at_own["cost"][0], "coverage": at_own["achieved"][0],
                                     "op": op(at_own["cost"][0])},
            "gap": own - best["cost"], "gap_at_own_coverage": own - at_own["cost"][0],
            "curve": {"coverage": res["curve"]["coverage"], "cost": res["curve"]["cost"]},
            "risk_coverage": rc}


def ood_section(frames, config):
    tpr = config.analyses.ood_tpr
    out = {}
    for name in OOD_SETS:
        f = frames.get(name)
        if f is None or "ood" not in f.columns:
            continue
        out[name] = ood_detail.ood_detail(f["ood"].to_numpy(), f["scores OOD"].to_numpy(float), tpr)
    return out


def breaking_section(frames, config):
    rob, perf = frames["robustness"], frames["performance"]
    y_r, p_r = _codes(rob)
    y_p, p_p = _codes(perf)
    boot = config.extras.bootstrap
    res = breaking_points.breaking_points(
        y_r, p_r, rob["perturbation"].astype(str).to_numpy(), rob["level"].to_numpy(float), y_p, p_p,
        config.analyses.breaking_margin, PERTURBATIONS, SIGNED, config.ml.zero_division,
        boot.n, boot.seed, boot.level)
    for entry in res["ladders"].values():  # levels below min_samples: count only (disclosure)
        entry["precision"] = hide_small(entry["n"], config.disclosure.min_samples, entry["precision"])[0]
    return res


def drift_section(frame, config):
    if frame is None or "ood" not in frame.columns:
        return {"undefined": "no drift set with OOD labels"}
    d = config.disclosure
    res = drift_delay.drift_delay(frame["scores OOD"].to_numpy(float), frame["ood"].to_numpy(),
                                  config.analyses.drift_false_alarm_rate, int(d.min_samples))
    res["onset_rounding"] = int(d.min_samples)
    # the timeline drawn on the page: median OOD score per bin of consecutive positions (no label share)
    bins = sequence_bins(frame["scores OOD"].to_numpy(float), frame["ood"].to_numpy(), int(d.points),
                         int(d.min_samples))
    res["timeline"] = {"start": bins["start"], "end": bins["end"], "median": bins["median"], "n": bins["n"]}
    return res


def localisation_section(frames, maps, masks, config):
    """Per set with both maps and masks, and over all of them; 'no maps' / 'no masks' said plainly."""
    # maps hold the KO samples' rows only (ingestion/run/predict.py): a set of maps without KO is {}, not None
    have_maps = {s: v for s, v in (maps or {}).items() if v}
    have_masks = {s: v for s, v in (masks or {}).items() if v}
    if all(v is None for v in (maps or {}).values()):
        return {"available": False, "reason": "no maps: the submission returned no explainability output"}
    if all(v is None for v in (masks or {}).values()):
        return {"available": False, "reason": "no masks: the reference data carries no defect mask"}
    boot, min_n = config.extras.bootstrap, config.disclosure.min_samples
    sets, pooled_maps, pooled_masks = {}, {}, {}
    for name in frames:
        if name in have_maps and name in have_masks:
            ko = set(frames[name].loc[frames[name]["class"].astype(str) == "KO", "sample_id"].astype(str))
            mp = {k: v for k, v in have_maps[name].items() if k in ko}
            mk = {k: v for k, v in have_masks[name].items() if k in ko}
            sets[name] = _public(localisation.localisation(mp, mk, MAP_SCALE, boot.n, boot.seed,
                                                           boot.level, f"localisation {name}"), min_n)
            pooled_maps.update({(name, k): v for k, v in mp.items()})
            pooled_masks.update({(name, k): v for k, v in mk.items()})
    if not sets:
        return {"available": False, "reason": "no set has both maps and masks"}
    total = _public(localisation.localisation({f"{a}/{b}": v for (a, b), v in pooled_maps.items()},
                                              {f"{a}/{b}": v for (a, b), v in pooled_masks.items()}, MAP_SCALE,
                                              boot.n, boot.seed, boot.level, "localisation"), min_n)
    return {"available": True, "reason": None, "map_scale": MAP_SCALE, "sets": sets, "all": total}


def _public(res, min_n):
    if res["n"] < min_n:
        return {**{k: None for k in res}, "n": res["n"], "undefined": res["undefined"] + [
            f"fewer than {min_n} KO samples with a map and a mask: not reported"]}
    return res


def compute_analyses(frames, config, maps=None, masks=None, labelling=None, baseline=None, robustness=None):
    """The details.json "analyses" block (JSON-clean).

    ``maps``/``masks``: {set: {sample_id: array}} or None; ``labelling``: {set: {sample_id:
    labelling_type}}; ``baseline``: sources.read_baseline of a baseline run or None;
    ``robustness``: this run's details["robustness"] (ML per level, for the mCE ratio).
    """
    out = {"cost_coverage": cost_section(frames["performance"], config),
           "ood_detail": ood_section(frames, config),
           "breaking_points": breaking_section(frames, config),
           "drift_delay": drift_section(frames.get("drift"), config),
           "localisation": localisation_section(frames, maps, masks, config),
           "annotators": annotators.expert_kpis(frames, labelling or {}, config,
                                                config.disclosure.min_samples)}
    if baseline is None or robustness is None:
        out["relative_robustness"] = {"available": False,
                                      "reason": "no baseline run given (score --baseline OUT of Solution-1)"}
    else:
        out["relative_robustness"] = {"available": True, "baseline": baseline["name"],
                                      **breaking_points.relative_robustness(robustness, baseline["robustness"])}
    out["parameters"] = {**config.analyses.as_dict(), "min_samples": config.disclosure.min_samples,
                         "map_scale": MAP_SCALE}
    return plain(out)  # the one JSON cleaner (contract.checked): numpy to Python, NaN/inf to None
