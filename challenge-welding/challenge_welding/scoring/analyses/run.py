"""The shell of the analyses: read the optional inputs, compute, never fail the scoring."""

from __future__ import annotations

from challenge_welding.contract.names import SET_NAMES
from . import sources
from .assemble import compute_analyses
from .card import card_rows


def run_analyses(reference_dir, predictions_dir, frames, config, details, baseline_dir=None, labelling=None) -> dict:
    """details["analyses"] (and its metric-card rows); a failure becomes a warning (the score is never touched).

    ``labelling``: {set: {sample_id: labelling_type}} as the scoring read it with the reference
    (scoring.inputs: the reference files are not read a second time).
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
        baseline = sources.read_baseline(baseline_dir) if baseline_dir is not None else None
        return compute_analyses(frames, config, maps=maps, masks=masks,
                                labelling=labelling, baseline=baseline,
                                robustness=details.get("robustness"))
    except Exception as exc:  # the analyses never change the score: report the failure
        details["warnings"].append(f"analyses failed: {type(exc).__name__}: {exc}")
        return {}
