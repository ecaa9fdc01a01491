"""The scoring configuration: load a YAML file and validate every coefficient.

Every number of the score comes from here (docs/scoring.md defaults live in
``default_scoring.yaml``). Validation is strict so that a typo in an organiser's
config cannot silently change the score: an unknown key, a missing key, a value
of the wrong type or shape, a negative cost or a weight vector that does not sum
to 1 is one :class:`ChallengeError` naming the file and the key.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from challenge_welding.contract.names import KPI_KEYS, PERTURBATIONS
from challenge_welding.contract.errors import ChallengeError
from challenge_welding.contract.schema import Section, boolean, choice, key, number, schema_error, validate

DEFAULT_CONFIG_PATH = Path(__file__).with_name("default_scoring.yaml")
WEIGHT_SUM_TOL = 1e-9  # weight vectors that must sum to 1
ML_AVERAGES = ("binary", "macro", "precision")
TIME_METHODS = ("linear", "lower", "higher", "midpoint")


# the schema engine (contract/schema.py) is shared with the build config (data/build_sets.py)
COST = number(lo=0.0)
WEIGHT = number(lo=0.0, hi=1.0)
POSITIVE = number(lo=0.0, lo_open=True)
ALPHA = number(nullable=True)
COUNT = number(lo=1, integer=True)


# --- the config, one dataclass per YAML mapping (field order = the YAML's order) ---------------
# Adding a key: one field below (`name: type = key(CHECKER)`, or `key(CHECKER, default)` when older
# configs may leave it out), one line in default_scoring.yaml; readers then use config.<path>.<name>.
@dataclass(frozen=True)
class Ml(Section):
    beta: float = key(POSITIVE)
    average: str = key(choice(*ML_AVERAGES))
    pos_label: str = key(choice("KO", "OK"))
    zero_division: float = key(WEIGHT)


@dataclass(frozen=True)
class Time(Section):
    percentile: float = key(number(lo=0.0, hi=100.0))
    method: str = key(choice(*TIME_METHODS))


@dataclass(frozen=True)
class PerfKpi(Section):
    alpha_op: float = key(WEIGHT)
    alpha_ml: float = key(WEIGHT)
    k_c: float = key(number(lo=0.0))
    k_t: float = key(number(lo=0.0))


@dataclass(frozen=True)
class UncertaintyKpi(Section):
    ece_bins: int = key(COUNT)
    w_ko: float = key(WEIGHT)
    w_ok: float = key(WEIGHT)
    calib_factor: float = key(number(lo=0.0))
    degenerate_tol: float = key(number(lo=0.0))


@dataclass(frozen=True)
class RobustnessKpi(Section):
    weights: dict = key({p: WEIGHT for p in PERTURBATIONS})


@dataclass(frozen=True)
class OodKpi(Section):
    w_syn: float = key(WEIGHT)
    w_real: float = key(WEIGHT)


@dataclass(frozen=True)
class GeneralizationKpi(Section):
    alpha_op: float = key(WEIGHT)
    alpha_ml: float = key(WEIGHT)
    k_op: float = key(number(lo=0.0))


@dataclass(frozen=True)
class DriftKpi(Section):
    alpha_op: float = key(WEIGHT)
    alpha_ood: float = key(WEIGHT)
    k_op: float = key(number(lo=0.0))


@dataclass(frozen=True)
class Kpis(Section):
    perf: PerfKpi = key(PerfKpi)
    uncertainty: UncertaintyKpi = key(UncertaintyKpi)
    robustness: RobustnessKpi = key(RobustnessKpi)
    ood: OodKpi = key(OodKpi)
    generalization: GeneralizationKpi = key(GeneralizationKpi)
    drift: DriftKpi = key(DriftKpi)


@dataclass(frozen=True)
class Breakpoints(Section):
    """One KPI's calibrated breakpoints (both None until calibrated: the KPI is left unscaled)."""

    alpha1: float | None = key(ALPHA)
    alpha2: float | None = key(ALPHA)


@dataclass(frozen=True)
class Rescaling(Section):
    beta1: float = key(number(lo=0.0, hi=1.0, lo_open=True, hi_open=True))
    beta2: float = key(number(lo=0.0, hi=1.0, lo_open=True, hi_open=True))
    alpha: dict = key({k: Breakpoints for k in KPI_KEYS})  # KPI -> Breakpoints


@dataclass(frozen=True)
class Disclosure(Section):
    """What the published outputs may show (issue 10): each published number or curve point aggregates
    at least min_samples samples; curves have at most `points` steps."""

    min_samples: int = key(COUNT)
    points: int = key(COUNT)


@dataclass(frozen=True)
class Trust(Section):
    bins: int = key(COUNT)
    prior_weight: float = key(POSITIVE)


@dataclass(frozen=True)
class Bootstrap(Section):
    n: int = key(number(lo=0, integer=True))
    seed: int = key(number(lo=0, integer=True))
    level: float = key(number(lo=0.0, hi=1.0, lo_open=True, hi_open=True))


@dataclass(frozen=True)
class Extras(Section):
    trust: Trust = key(Trust)
    bootstrap: Bootstrap = key(Bootstrap)


@dataclass(frozen=True)
class Integrity(Section):
    """Organisers may refuse runs whose submission was not confined by Landlock (docs/integrity.md)."""

    require_sandbox: bool = key(boolean)


@dataclass(frozen=True)
class AnalysisWeights(Section):
    """The leaderboard's winner-that-holds: Dirichlet(concentration * w0) weights, breakpoints +- jitter."""

    concentration: float = key(POSITIVE)
    jitter: float = key(WEIGHT)
    seed: int = key(number(lo=0, integer=True))


@dataclass(frozen=True)
class Analyses(Section):
    """Reported beyond the score, never scored (docs/analyses.md)."""

    ood_tpr: float = key(number(lo=0.0, hi=1.0, lo_open=True, hi_open=True))
    breaking_margin: float = key(WEIGHT)
    drift_false_alarm_rate: float = key(number(lo=0.0, hi=1.0, lo_open=True, hi_open=True))
    weights: AnalysisWeights = key(AnalysisWeights)


@dataclass(frozen=True)
class ScoringConfig(Section):
    """The whole scoring config, validated once (load_config / validate_config); every number of the score."""

    cost: dict = key({t: {p: COST for p in ("KO", "OK", "UNKNOWN")} for t in ("KO", "OK")})  # cost[true][pred]
    seam_weights: dict = key(("map", POSITIVE))
    default_seam_weight: float = key(POSITIVE)
    ml: Ml = key(Ml)
    time: Time = key(Time)
    kpis: Kpis = key(Kpis)
    rescaling: Rescaling = key(Rescaling)
    final_weights: dict = key({k: WEIGHT for k in KPI_KEYS})
    # optional: older configs keep working
    disclosure: Disclosure = key(Disclosure, {"min_samples": 25, "points": 20})
    integrity: Integrity = key(Integrity, {"require_sandbox": False})
    analyses: Analyses = key(Analyses, {"ood_tpr": 0.95, "breaking_margin": 0.05,
                                        "drift_false_alarm_rate": 0.05,
                                        "weights": {"concentration": 200.0, "jitter": 0.02,
                                                    "seed": 0}})
    extras: Extras = key(Extras)


# Weight vectors docs/scoring.md defines as summing to 1 (path of the mapping, keys summed).
SUMS_TO_ONE = (
    (("final_weights",), KPI_KEYS),
    (("kpis", "robustness", "weights"), PERTURBATIONS),
    (("kpis", "ood"), ("w_syn", "w_real")),
    (("kpis", "perf"), ("alpha_op", "alpha_ml")),
    (("kpis", "uncertainty"), ("w_ko", "w_ok")),
    (("kpis", "generalization"), ("alpha_op", "alpha_ml")),
    (("kpis", "drift"), ("alpha_op", "alpha_ood")),
)


def validate_config(raw, source="<config>") -> ScoringConfig:
    """Check ``raw`` (a parsed YAML mapping) against the schema; return the typed, frozen config."""
    where = (str(source),)
    config = validate(raw, ScoringConfig, where)
    for path, keys in SUMS_TO_ONE:
        node = config
        for part in path:
            node = getattr(node, part)
        total = sum(node[k] if isinstance(node, dict) else getattr(node, k) for k in keys)
        if abs(total - 1.0) > WEIGHT_SUM_TOL:
            raise schema_error(where + path, f"weights {', '.join(keys)} must sum to 1, got {total:.12g}")
    r = config.rescaling
    if not r.beta1 < r.beta2:
        raise schema_error(where + ("rescaling", "beta1"), f"must be below beta2 ({r.beta2}), got {r.beta1}")
    for kpi, pair in r.alpha.items():
        if (pair.alpha1 is None) != (pair.alpha2 is None):
            raise schema_error(where + ("rescaling", "alpha", kpi),
                       "alpha1 and alpha2 must be both set or both null")
    return config


def load_config(path=None) -> ScoringConfig:
    """Load and validate a scoring config (the packaged default when ``path`` is None): a ScoringConfig."""
    path = Path(path) if path is not None else DEFAULT_CONFIG_PATH
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ChallengeError(f"{path}: cannot read the scoring config ({exc.strerror or exc})") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ChallengeError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    return validate_config(raw, source=path)

