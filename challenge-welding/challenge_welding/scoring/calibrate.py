"""Calibrate the rescaling breakpoints on a reference-data folder.

alpha1 of each KPI = its raw value for the virtual solution ``full_unknown``,
alpha2 = its raw value for ``good`` (docs/scoring.md, "Rescaling and final
score"); both are written into ``reference_dir/scoring.yaml``, starting from
the file already there (or ``config_path``, or the packaged default), so an
organiser's other settings are kept.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from challenge_welding.contract.names import KPI_KEYS, SET_NAMES
from challenge_welding.contract.files import write_atomic
from challenge_welding.scoring.config import DEFAULT_CONFIG_PATH, load_config, validate_config
from challenge_welding.scoring.criteria import compute, prepare
from challenge_welding.scoring.inputs import frames_from, read_reference
from challenge_welding.scoring.virtual import virtual_predictions

LOW_KIND, HIGH_KIND = "full_unknown", "good"


def raw_kpis_of(references, kind, config, seed=0):
    """Raw KPIs of a virtual solution on reference frames."""
    frames, _ = frames_from(references, virtual_predictions(references, kind, seed))
    return {k: float(v) for k, v in compute(prepare(frames, config), config)["raw"].items()}


def _fmt(x):
    return f"{x:.10g}" if "." in f"{x:.10g}" or "e" in f"{x:.10g}" else f"{x:.1f}"


def _with_alphas(text, alphas):
    """Replace the alpha lines in the YAML text (keeps comments); None if the layout differs."""
    for kpi in KPI_KEYS:
        a = alphas[kpi]
        pattern = re.compile(rf"^(\s+{kpi}:\s*)\{{\s*alpha1:[^,}}]*,\s*alpha2:[^}}]*\}}[ \t]*(#.*)?$", re.M)
        new, count = pattern.subn(
            lambda mt: f"{mt.group(1)}{{alpha1: {_fmt(a['alpha1'])}, alpha2: {_fmt(a['alpha2'])}}}"
                       + (f"  {mt.group(2)}" if mt.group(2) else ""), text)
        if count != 1:
            return None
        text = new
    return text


def calibrate(reference_dir, config_path=None) -> dict:
    """Compute alpha1/alpha2 of every KPI and write them into reference_dir/scoring.yaml.

    Returns {kpi: {"alpha1": float, "alpha2": float}}.
    """
    reference_dir = Path(reference_dir)
    target = reference_dir / "scoring.yaml"
    source = Path(config_path) if config_path else (target if target.is_file() else DEFAULT_CONFIG_PATH)
    config = load_config(source)
    references = {name: read_reference(reference_dir, name) for name in SET_NAMES}
    low = raw_kpis_of(references, LOW_KIND, config)
    high = raw_kpis_of(references, HIGH_KIND, config)
    alphas = {k: {"alpha1": float(_fmt(low[k])), "alpha2": float(_fmt(high[k]))} for k in KPI_KEYS}
    text = _with_alphas(source.read_text(encoding="utf-8"), alphas)
    if text is None:  # unusual layout: rewrite the whole file (comments lost)
        raw = yaml.safe_load(source.read_text(encoding="utf-8"))
        raw["rescaling"]["alpha"] = alphas
        text = "# Scoring configuration, calibrated by `challenge-welding calibrate`.\n" + \
            yaml.safe_dump(raw, sort_keys=False)
    validate_config(yaml.safe_load(text), source=target)
    write_atomic(target, text)
    return alphas
