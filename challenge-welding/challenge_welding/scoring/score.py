"""The scoring shell: read, verify, validate and compute scores.json and details.json.

``score_predictions`` gives the scores and the details (no file written);
``challenge_welding.flows.score.score`` (the CLI's ``score``, ``evaluate`` and the
Codabench scoring program) writes them with the page; what is reported beyond the score
(``analyses/``: the analyses and the extras) is computed here, once, from the frames read. The
numbers come from the functional core (``criteria.compute``); this module only
does I/O and assembles ``details.json``. It never imports ``report``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import platform
import sys
import warnings as _warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from challenge_welding.contract.names import CLASSES, CRITERIA_KEYS, KPI_KEYS, SCORE_KEYS, SET_NAMES, STATES
from challenge_welding.contract.checked import json_text, plain
from challenge_welding.contract.errors import ChallengeError
from challenge_welding.contract.files import write_atomic
from challenge_welding.scoring.analyses.run import reported
from challenge_welding.scoring.analyses.sources import read_baseline
from challenge_welding.scoring.bootstrap import bootstrap
from challenge_welding.scoring.config import DEFAULT_CONFIG_PATH, ScoringConfig, load_config
from challenge_welding.scoring.criteria import UndefinedCases, compute, prepare
from challenge_welding.scoring.disclosure import hide_small
from challenge_welding.scoring.kpis import robustness_weights
from challenge_welding.scoring.metrics import operational_cost
from challenge_welding.scoring.inputs import read_inputs
from challenge_welding.scoring.provenance import check_sandbox
from challenge_welding.contract.registry import ROBUSTNESS_KEYS, kpi_criteria, metric_card_rows

SIGNIFICANT = 10  # digits kept in scores.json: stable across platforms' last-bit noise


def number(x) -> float:
    """A finite float rounded to SIGNIFICANT digits (so 99.99999999999999 is written 100)."""
    x = float(x)
    if not math.isfinite(x):
        raise ChallengeError(f"internal error: a score value is not finite ({x})")
    return float(f"{x:.{SIGNIFICANT}g}") + 0.0  # + 0.0 turns -0.0 into 0.0


def resolve_config(reference_dir, config_path, warnings):
    """The config path used: explicit, else reference_dir/scoring.yaml, else the packaged default."""
    if config_path is not None:
        return Path(config_path)
    candidate = Path(reference_dir) / "scoring.yaml"
    if candidate.is_file():
        return candidate
    warnings.append(f"no scoring.yaml in {reference_dir}: the packaged default config is used "
                    "(rescaling not calibrated: run `challenge-welding calibrate`)")
    return DEFAULT_CONFIG_PATH


def _metric_card(config, config_file, hashes):
    metrics = metric_card_rows(config) + [
        {"name": "rescaling", "set": "all",
         "formula": "piecewise linear through (0,0), (alpha1,beta1), (alpha2,beta2), (1,1)",
         "parameters": {"beta1": config.rescaling.beta1, "beta2": config.rescaling.beta2}},
        {"name": "bootstrap", "set": "all",
         "formula": "percentile interval; resampling within each set, stratified by class and design cell",
         "parameters": dataclasses.asdict(config.extras.bootstrap)},
    ]
    versions = {"python": platform.python_version()}
    for mod in ("challenge_welding", "numpy", "pandas", "pyarrow", "yaml"):
        versions[mod] = getattr(sys.modules.get(mod) or __import__(mod), "__version__", "?")
    return {"metrics": metrics,
            "config_file": str(config_file),
            "config_sha256": hashlib.sha256(Path(config_file).read_bytes()).hexdigest(),
            "inputs_sha256": {name: h["predictions"] for name, h in hashes.items()},
            "reference_sha256": {name: h["reference"] for name, h in hashes.items()},
            "versions": versions}


def _set_details(prep, result, hashes):
    out = {}
    for name in SET_NAMES:
        a = prep[name]
        confusion = {CLASSES[t]: {STATES[p]: int(np.count_nonzero((a.y == t) & (a.pred == p))) for p in range(3)}
                     for t in range(2)}
        entry = {"n": a.n, "n_KO": int(np.count_nonzero(a.y == 0)), "n_OK": int(np.count_nonzero(a.y == 1)),
                 "n_ood": None if a.ood is None else int(np.count_nonzero(a.ood)),
                 "confusion": confusion, "seams": {s: int(np.count_nonzero(a.seams == i))
                                                   for i, s in enumerate(a.seam_names)}}
        if name in result["costs"]:
            cp, cs, ci, ch = (number(v) for v in result["costs"][name])
            # the set's OP by the score's own rule (metrics.operational_cost: 0 when C(human) <= C(ideal))
            entry.update(cost=cp, cost_soft=cs, cost_ideal=ci, cost_human=ch, op=number(operational_cost(cp, ci, ch)))
            if name == "drift":
                entry["cost_subset"] = "samples not labelled OOD"
        entry["sha256"] = hashes[name]["predictions"]
        entry["reference_sha256"] = hashes[name]["reference"]
        out[name] = entry
    return out


def score_frames(frames, config, hashes=None, config_file=DEFAULT_CONFIG_PATH, warnings=(), with_bootstrap=True,
                 draws=None):
    """(scores, details) from validated frames; details without analyses nor extras (scoring.analyses.run).

    ``draws``: a dict that receives the bootstrap's per-resample values (contract.draws), if given.
    """
    warnings = list(warnings)
    prep = prepare(frames, config)
    cases = UndefinedCases()
    with np.errstate(all="ignore"), _warnings.catch_warnings():
        _warnings.simplefilter("ignore", RuntimeWarning)
        res = compute(prep, config, cases=cases)
    c = {k: number(v) for k, v in res["criteria"].items()}
    scores = {"score": number(res["score"]), **{k: number(res["rescaled"][k]) for k in KPI_KEYS},
              **{k: c[k] for k in CRITERIA_KEYS}}
    assert tuple(scores) == SCORE_KEYS
    boot_cfg = config.extras.bootstrap
    boot_cases = UndefinedCases()
    ci = (bootstrap(prep, config, boot_cfg.n, boot_cfg.seed, boot_cfg.level, boot_cases)
          if with_bootstrap else None)
    if draws is not None and ci is not None:
        draws.update(ci["values"])

    def interval(group, key):
        return None if ci is None else [number(v) for v in ci[group][key]]

    used = _robustness_weights_used(res, config, warnings)
    _note_unscaled(res, config, warnings)
    times = prep["performance"].time
    details = {
        "score": scores["score"],
        "score_ci": None if ci is None else [number(v) for v in ci["score"]],
        "scores": scores,
        "kpis": {k: {"raw": number(res["raw"][k]), "rescaled": scores[k], "ci": interval("rescaled", k),
                     "raw_ci": interval("raw", k),
                     "alpha1": config.rescaling.alpha[k].alpha1,
                     "alpha2": config.rescaling.alpha[k].alpha2,
                     "rescaling": res["modes"][k], "weight": config.final_weights[k],
                     "criteria": {ck: c[ck] for ck in kpi_criteria(k)}} for k in KPI_KEYS},
        "criteria_ci": {k: interval("criteria", k) for k in CRITERIA_KEYS} if ci else {},
        "sets": _set_details(prep, res, hashes or {n: {"predictions": None, "reference": None} for n in SET_NAMES}),
        # ML per level published only for levels of >= min_samples samples (disclosure)
        "robustness": {x: {"levels": [number(v) for v in levels],
                           "ml": hide_small(counts, config.disclosure.min_samples,
                                            [number(v) for v in ml])[0],
                           "n": [int(k) for k in counts],
                           "r": c[ROBUSTNESS_KEYS[x]], "weight": number(used[x])}
                       for x, (levels, ml, counts) in res["curves"].items()},
        "time": {"p95": c["time_p95"], "median": number(np.median(times)) if len(times) else 0.0,
                 "n": int(len(times))},
        "undefined_cases": cases.records + [r for r in boot_cases.records if r not in cases.records],
        "warnings": warnings,
        "extras": {},
        "metric_card": _metric_card(config, config_file, hashes or {}),
        "config": config.as_dict(),
    }
    return scores, details


def _robustness_weights_used(res, config, warnings) -> dict:
    """The robustness weights the KPI used (renormalised over the types present; said in a warning)."""
    weights = config.kpis.robustness.weights
    present = res["robustness_present"]
    if len(present) < len(weights):
        warnings.append(f"perturbation types absent from the robustness set: "
                        f"{', '.join(x for x in weights if x not in present)}; weights renormalised over "
                        f"{', '.join(present) or 'none'}")
    return robustness_weights(weights, present)  # the KPI's own renormalisation


def _note_unscaled(res, config, warnings) -> None:
    for kpi, mode in res["modes"].items():
        if mode == "unscaled":
            a = config.rescaling.alpha[kpi]
            why = "not calibrated" if a.alpha1 is None else "alpha2 <= alpha1 or alpha2 >= 1"
            warnings.append(f"KPI {kpi} left unscaled ({why})")


def write_output(path, text: str):
    """Write one output file atomically (never a file named 'metadata': Codabench reserves it)."""
    path = Path(path)
    if path.name == "metadata":
        raise ChallengeError("refusing to write a file named 'metadata' into the output")
    write_atomic(path, text)


def details_json(details: dict) -> str:
    return json_text(plain(details), sort_keys=False)  # strict: NaN -> null


@dataclass
class Scored:
    """The result of scoring a prediction folder: what is written, and what the report reads."""

    scores: dict   # scores.json content
    details: dict  # details.json content (analyses and extras in; the page's shortfall not yet)
    frames: dict   # the merged frames (for the traces)
    config: ScoringConfig  # the validated config
    draws: dict    # the bootstrap's per-resample values {"score": (B,), kpi: (B,)} (organisers only)
    reference_sha256: dict  # {set: sha256 of the reference file}, the draws' fingerprint


def score_predictions(reference_dir, predictions_dir, config_path=None, verify=True, baseline=None) -> Scored:
    """Read, verify (scoring.provenance, unless ``verify`` is False) and score PRED against DIR; no file written.

    ``baseline``: a scored folder (e.g. Solution-1's OUT) for the relative robustness (analyses).

    Raises SubmissionFailed when the predictions are missing, unverified or
    invalid, ChallengeError when the reference data or the config is bad.
    """
    # a usage error before any work; read once (the analyses get what was read)
    baseline = read_baseline(baseline) if baseline is not None else None
    warnings: list = []
    config_file = resolve_config(reference_dir, config_path, warnings)
    config = load_config(config_file)
    inputs = read_inputs(reference_dir, predictions_dir, verify)
    sandbox = check_sandbox(predictions_dir, config, verify)
    values: dict = {}
    scores, details = score_frames(inputs.frames, config, inputs.hashes, config_file, warnings + inputs.warnings,
                                   draws=values)
    details["provenance"] = inputs.provenance
    details["sandbox"] = sandbox
    # reported beyond the score, never part of it, from the frames read above (scoring.analyses)
    reported(reference_dir, predictions_dir, inputs.frames, config, details, baseline, labelling=inputs.labelling)
    return Scored(scores, details, inputs.frames, config, values,
                  {n: h["reference"] for n, h in inputs.hashes.items()})
