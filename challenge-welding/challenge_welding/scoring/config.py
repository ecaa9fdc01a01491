"""The scoring configuration: load a YAML file and validate every coefficient.

Every number of the score comes from here (docs/scoring.md defaults live in
``default_scoring.yaml``). Validation is strict so that a typo in an organiser's
config cannot silently change the score: an unknown key, a missing key, a value
of the wrong type or shape, a negative cost or a weight vector that does not sum
to 1 is one :class:`ChallengeError` naming the file and the key.
"""

from __future__ import annotations

import math
from pathlib import Path

import yaml

from challenge_welding.contract.names import KPI_KEYS, PERTURBATIONS
from challenge_welding.contract.errors import ChallengeError

DEFAULT_CONFIG_PATH = Path(__file__).with_name("default_scoring.yaml")
WEIGHT_SUM_TOL = 1e-9  # weight vectors that must sum to 1
ML_AVERAGES = ("binary", "macro", "precision")
TIME_METHODS = ("linear", "lower", "higher", "midpoint")


# --- schema: a nested dict of leaf checkers; ("map", checker) = free string keys --------------
def _num(lo=None, hi=None, lo_open=False, hi_open=False, nullable=False, integer=False):
    def check(value, where):
        if value is None and nullable:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _err(where, f"must be a number, got {value!r}")
        if integer and int(value) != value:
            raise _err(where, f"must be an integer, got {value!r}")
        value = int(value) if integer else float(value)
        if not math.isfinite(value):
            raise _err(where, f"must be finite, got {value!r}")
        if lo is not None and (value < lo or (lo_open and value == lo)):
            raise _err(where, f"must be {'>' if lo_open else '>='} {lo}, got {value!r}")
        if hi is not None and (value > hi or (hi_open and value == hi)):
            raise _err(where, f"must be {'<' if hi_open else '<='} {hi}, got {value!r}")
        return value
    return check


def _choice(*options):
    def check(value, where):
        if value not in options:
            raise _err(where, f"must be one of {', '.join(map(str, options))}, got {value!r}")
        return value
    return check


def _err(where, msg):
    key = f"key '{'.'.join(where[1:])}'" if len(where) > 1 else "the top level"
    return ChallengeError(f"{where[0]}: {key} {msg}")


class Optional:
    """A schema node that may be left out: its default (validated like a written value) is used then."""

    def __init__(self, schema, default):
        self.schema, self.default = schema, default


COST = _num(lo=0.0)
WEIGHT = _num(lo=0.0, hi=1.0)
POSITIVE = _num(lo=0.0, lo_open=True)
ALPHA = _num(nullable=True)

SCHEMA = {
    "cost": {t: {p: COST for p in ("KO", "OK", "UNKNOWN")} for t in ("KO", "OK")},
    "seam_weights": ("map", POSITIVE),
    "default_seam_weight": POSITIVE,
    "ml": {"beta": POSITIVE, "average": _choice(*ML_AVERAGES), "pos_label": _choice("KO", "OK"),
           "zero_division": WEIGHT},
    "time": {"percentile": _num(lo=0.0, hi=100.0), "method": _choice(*TIME_METHODS)},
    "kpis": {
        "perf": {"alpha_op": WEIGHT, "alpha_ml": WEIGHT, "k_c": _num(lo=0.0), "k_t": _num(lo=0.0)},
        "uncertainty": {"ece_bins": _num(lo=1, integer=True), "w_ko": WEIGHT, "w_ok": WEIGHT,
                        "calib_factor": _num(lo=0.0), "degenerate_tol": _num(lo=0.0)},
        "robustness": {"weights": {p: WEIGHT for p in PERTURBATIONS}},
        "ood": {"w_syn": WEIGHT, "w_real": WEIGHT},
        "generalization": {"alpha_op": WEIGHT, "alpha_ml": WEIGHT, "k_op": _num(lo=0.0)},
        "drift": {"alpha_op": WEIGHT, "alpha_ood": WEIGHT, "k_op": _num(lo=0.0)},
    },
    "rescaling": {
        "beta1": _num(lo=0.0, hi=1.0, lo_open=True, hi_open=True),
        "beta2": _num(lo=0.0, hi=1.0, lo_open=True, hi_open=True),
        "alpha": {k: {"alpha1": ALPHA, "alpha2": ALPHA} for k in KPI_KEYS},
    },
    "final_weights": {k: WEIGHT for k in KPI_KEYS},
    # what the published outputs may show (issue 10): each published number or curve point aggregates at
    # least min_samples samples; curves have at most `points` steps. Optional: older configs keep working.
    "disclosure": Optional({"min_samples": _num(lo=1, integer=True), "points": _num(lo=1, integer=True)},
                           {"min_samples": 25, "points": 20}),
    "extras": {
        "trust": {"bins": _num(lo=1, integer=True), "prior_weight": POSITIVE},
        "bootstrap": {"n": _num(lo=0, integer=True), "seed": _num(lo=0, integer=True),
                      "level": _num(lo=0.0, hi=1.0, lo_open=True, hi_open=True)},
    },
}

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


def _validate(node, schema, where):
    if isinstance(schema, tuple):  # ("map", leaf): free string keys
        if not isinstance(node, dict) or not node:
            raise _err(where, "must be a non-empty mapping")
        return {str(k): schema[1](v, where + (str(k),)) for k, v in node.items()}
    if isinstance(schema, dict):
        if not isinstance(node, dict):
            raise _err(where, f"must be a mapping with keys {', '.join(schema)}, got {node!r}")
        unknown = [k for k in node if k not in schema]
        if unknown:
            raise _err(where + (str(unknown[0]),), f"is unknown (allowed here: {', '.join(schema)})")
        missing = [k for k in schema if k not in node and not isinstance(schema[k], Optional)]
        if missing:
            raise _err(where + (missing[0],), "is missing")
        return {k: _validate(node[k] if k in node else schema[k].default, schema[k], where + (k,)) for k in schema}
    if isinstance(schema, Optional):
        return _validate(node, schema.schema, where)
    return schema(node, where)


def validate_config(raw, source="<config>") -> dict:
    """Check ``raw`` (a parsed YAML mapping) against the schema; return a clean copy."""
    where = (str(source),)
    config = _validate(raw, SCHEMA, where)
    for path, keys in SUMS_TO_ONE:
        node = config
        for part in path:
            node = node[part]
        total = sum(node[k] for k in keys)
        if abs(total - 1.0) > WEIGHT_SUM_TOL:
            raise _err(where + path, f"weights {', '.join(keys)} must sum to 1, got {total:.12g}")
    r = config["rescaling"]
    if not r["beta1"] < r["beta2"]:
        raise _err(where + ("rescaling", "beta1"), f"must be below beta2 ({r['beta2']}), got {r['beta1']}")
    for kpi, pair in r["alpha"].items():
        if (pair["alpha1"] is None) != (pair["alpha2"] is None):
            raise _err(where + ("rescaling", "alpha", kpi),
                       "alpha1 and alpha2 must be both set or both null")
    return config


def load_config(path=None) -> dict:
    """Load and validate a scoring config (the packaged default when ``path`` is None).

    Returns a plain nested dict; ``config["_source"]`` is not added, so the dict
    is exactly the validated YAML content.
    """
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

