"""The shell of what is reported beyond the score: fed once, from what the scoring read; never fails it.

``reported`` fills details["analyses"], details["extras"] and details["shortfall"] from the
merged frames and the numbers the scoring already holds (the reference is not read a second
time); only the inputs the score never reads are read here (explanation maps, defect masks:
sources). A failure of any part becomes a warning: the score is never touched.
"""

from __future__ import annotations

from challenge_welding.contract.names import SET_NAMES
from challenge_welding.scoring.shortfall import where_points_went
from . import sources
from .assemble import compute_analyses
from .card import card_rows
from .extras import compute_extras


def reported(reference_dir, predictions_dir, frames, config, details, baseline=None, labelling=None) -> None:
    """details["analyses"], details["extras"] then details["shortfall"] (scoring.shortfall), in place;
    each failure a warning, in that order.

    ``baseline``: sources.read_baseline of a baseline run, read once by the caller before any work.
    """
    details["analyses"] = run_analyses(reference_dir, predictions_dir, frames, config, details, baseline,
                                       labelling=labelling)
    try:
        details["extras"] = compute_extras(frames, config)
    except Exception as exc:  # the extras never change the score: report the failure
        details["warnings"].append(f"report extras failed: {type(exc).__name__}: {exc}")
    try:  # the top of the page: each KPI's lost points and the criterion that cost them (issue 26)
        details["shortfall"] = where_points_went(details["kpis"], details["scores"], config,
                                                 list(details["robustness"]))
    except Exception as exc:  # an explanation never changes the score
        details["warnings"].append(f"the points' breakdown failed: {type(exc).__name__}: {exc}")


def run_analyses(reference_dir, predictions_dir, frames, config, details, baseline=None, labelling=None) -> dict:
    """details["analyses"] (and its metric-card rows); a failure becomes a warning (the score is never touched).

    ``labelling``: {set: {sample_id: labelling_type}} as the scoring read it with the reference
    (scoring.inputs: the reference files are not read a second time). ``baseline``: a baseline
    run as sources.read_baseline gave it (read once, by the caller), or None.
    """
    details.get("metric_card", {}).get("metrics", []).extend(card_rows(config))
    try:
        ko_ids = {n: frames[n].loc[frames[n]["class"].astype(str) == "KO", "sample_id"].astype(str)
                  for n in SET_NAMES}
        maps = {n: sources.read_maps(predictions_dir, n, ko_ids[n]) for n in SET_NAMES}
        # masks pooled onto their maps' grids at once; none decoded where there is no map
        masks = {n: sources.read_masks(reference_dir, n, ko_ids[n],
                                       grid={k: m.shape for k, m in (maps[n] or {}).items()})
                 for n in SET_NAMES}
        return compute_analyses(frames, config, maps=maps, masks=masks,
                                labelling=labelling, baseline=baseline,
                                robustness=details.get("robustness"))
    except Exception as exc:  # the analyses never change the score: report the failure
        details["warnings"].append(f"analyses failed: {type(exc).__name__}: {exc}")
        return {}
