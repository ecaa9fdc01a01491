"""The leaderboard's analyses (issue 20): a winner that holds, the expert-label ranking, robustness vs a baseline.

* Weight sensitivity: each submission's probability of ranking first and its rank interval
  when the six KPI weights and the rescaling breakpoints are perturbed, one perturbation
  per shared bootstrap resample (scoring.analyses.weight_sensitivity), from the draws
  files (no second pass over predictions).
* Expert ranking: the rank of each submission's score on expert-labelled samples only
  (details.json's analyses.annotators), when the reference data carries labelling_type.
* Relative robustness: mCE-style ratio of summed per-level errors to a baseline row's
  (``--baseline NAME``, e.g. Solution-1), from each folder's details.json.
Reported beside the ranking; never changes it.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from challenge_welding.contract.checked import FileRefused, curves, field, read_json
from challenge_welding.contract.names import KPI_KEYS
from challenge_welding.contract.errors import ChallengeError
from challenge_welding.scoring.analyses.breaking_points import relative_robustness
from challenge_welding.scoring.analyses.weight_sensitivity import draw_perturbations, winner_stability
from challenge_welding.scoring.config import load_config
from challenge_welding.contract.draws import RAW_KEYS


def weight_stability(draws: dict) -> dict:
    """{name: (p_first, rank_lo, rank_hi)} and a note, from {name: contract.draws.Draws}."""
    names = list(draws)
    first = draws[names[0]].header
    default = load_config().as_dict()  # plain data, like the draws' header
    params = (first.get("analyses") or default["analyses"])["weights"]
    rescaling = first.get("rescaling") or default["rescaling"]
    w0 = np.array([(first.get("final_weights") or default["final_weights"])[k] for k in KPI_KEYS])
    b = len(draws[names[0]].values["score"])
    has_raw = all(all(k in d.values for k in RAW_KEYS) for d in draws.values())
    a1 = np.array([np.nan if rescaling["alpha"][k]["alpha1"] is None else rescaling["alpha"][k]["alpha1"]
                   for k in KPI_KEYS])
    a2 = np.array([np.nan if rescaling["alpha"][k]["alpha2"] is None else rescaling["alpha"][k]["alpha2"]
                   for k in KPI_KEYS])
    jitter = params["jitter"] if has_raw else 0.0
    weights, al1, al2 = draw_perturbations(w0, a1, a2, params["concentration"], jitter, b, params["seed"])
    if has_raw:
        values = np.stack([np.stack([draws[n].values[f"raw_{k}"] for k in KPI_KEYS], axis=-1) for n in names])
    else:  # older draws files: rescaled KPIs, weights perturbed, breakpoints kept
        values = np.stack([np.stack([draws[n].values[k] for k in KPI_KEYS], axis=-1) for n in names])
        al1 = al2 = np.full_like(al1, np.nan)
    level = first.get("level", 0.95)
    res = winner_stability(values, weights, al1, al2, rescaling["beta1"], rescaling["beta2"], level)
    note = (f"weights ~ Dirichlet({params['concentration']:g} w0) around the protocol's weights, breakpoints "
            f"alpha ± {jitter:g}, one perturbation per bootstrap resample (B = {b}); "
            f"{100 * level:g} % rank interval")
    if not has_raw:
        note += "; breakpoints not jittered (draws files without raw KPIs: re-score to add them)"
    return {"rows": {n: (float(res["p_first"][i]), int(res["rank_interval"][i, 0]), int(res["rank_interval"][i, 1]))
                     for i, n in enumerate(names)}, "note": note}


def _details(folder: Path) -> dict:
    """The parts of a folder's details.json read here, checked ({} without the file); FileRefused otherwise."""
    path = Path(folder) / "details.json"
    if not path.is_file():
        return {}
    details = read_json(path, "re-score the folder with `score`")
    analyses = field(details, "analyses", dict, path) or {}
    annotators = field(analyses, "annotators", dict, f"{path}: 'analyses'") or {}
    score = field(annotators, "score", (int, float), f"{path}: 'analyses.annotators'")
    if score is not None and not math.isfinite(score):
        raise FileRefused(f"{path}: key 'analyses.annotators.score' is {score}, not a finite number")
    robustness = field(details, "robustness", dict, path)
    return {"analyses": {"annotators": annotators},
            "robustness": None if robustness is None else curves(robustness, path)}


def read_details(folders, names) -> dict:
    """{name: the checked parts of its folder's details.json} (each file read once, for every column)."""
    return {n: _details(f) for n, f in zip(names, folders)}


def expert_ranks(folders, names, details=None) -> dict:
    """{name: rank by the expert-only score (1 = best), None when not available}.

    ``details``: read_details(folders, names) when the caller has read them already.
    """
    details = read_details(folders, names) if details is None else details
    scores = {}
    for n in names:
        a = (details[n].get("analyses") or {}).get("annotators") or {}
        scores[n] = a.get("score") if a.get("available") else None
    ranked = sorted((s for s in scores.values() if s is not None), reverse=True)
    return {n: (None if s is None else 1 + ranked.index(s)) for n, s in scores.items()}


def relative_to(folders, names, baseline: str | None, details=None) -> dict:
    """{name: mCE-style ratio to the baseline row} (None for rows without curves); ``details`` as expert_ranks'."""
    if baseline is None:
        return {}
    if baseline not in names:
        raise ChallengeError(f"--baseline {baseline!r} is not one of the ranked folders ({', '.join(names)})")
    details = read_details(folders, names) if details is None else details
    curves = {n: details[n].get("robustness") or {} for n in names}
    return {n: relative_robustness(curves[n], curves[baseline])["mce"] for n in names}


def columns(frame, folders, names, draws=None, baseline=None):
    """Add p_first, wrank_lo, wrank_hi, expert_rank and (with a baseline) mce columns; return (frame, page data)."""
    stability = weight_stability(draws) if draws else None
    details = read_details(folders, names)  # each details.json read once, for both columns
    experts = expert_ranks(folders, names, details)
    mce = relative_to(folders, names, baseline, details)
    solution = list(frame["solution"])
    if stability:
        rows = stability["rows"]
        frame["p_first"] = [rows[s][0] if s in rows else None for s in solution]
        frame["wrank_lo"] = [rows[s][1] if s in rows else None for s in solution]
        frame["wrank_hi"] = [rows[s][2] if s in rows else None for s in solution]
    frame["expert_rank"] = [experts.get(s) for s in solution]
    frame["expert_rank"] = frame["expert_rank"].astype("Int64")
    if baseline is not None:
        frame["mce"] = [mce.get(s) for s in solution]
    page = {"stability_note": stability["note"] if stability else None, "baseline": baseline,
            "experts": any(v is not None for v in experts.values()),
            "rows": [{"name": s,
                      "p_first": stability["rows"][s][0] if stability and s in stability["rows"] else None,
                      "interval": (f"{stability['rows'][s][1]}-{stability['rows'][s][2]}"
                                   if stability and s in stability["rows"] else ""),
                      "expert_rank": experts.get(s), "mce": mce.get(s)} for s in solution if s in names]}
    return frame, page
