"""The draws file (``<OUT>.draws.npz``): its format, its one writer and its one reader.

Per-resample values of one scored submission: the organisers' file for paired comparisons.
It lives in contract because two layers meet in it (the scoring writes it, the leaderboard's
significance and analyses read it) and because what we read back is checked here, with the
limits named once in contract.checked (the archive's declared sizes before anything is
inflated, the header's nesting before it is parsed).

The bootstrap (scoring.bootstrap) draws its resamples from the reference data
and the seed only, so two submissions scored on the same reference data with
the same config share their resamples, and their per-resample values can be
compared pairwise (challenge_welding.scoring.significance).

These values are kept out of the published scoring output: a participant
downloads OUT/, and B values per KPI computed on resamples drawn with a public
seed give more to probe than one number. The file is written beside OUT, as
``<OUT>.draws.npz`` (``evaluate`` does it by default, ``score --draws FILE``
on demand), never inside it.

File format (numpy .npz, no pickle): one float64 array of length B per key of
DRAW_KEYS (the score, then the six rescaled KPIs), ``point`` (the scores.json
values of the same keys) and ``header`` (a JSON string: fingerprint, B, seed,
level, the config and reference hashes, the package version).
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from challenge_welding import __version__
from challenge_welding.contract.names import KPI_KEYS, SET_NAMES
from challenge_welding.contract.checked import MAX_JSON_DEPTH, FileRefused, nesting, npz_members
from challenge_welding.contract.errors import ChallengeError
from challenge_welding.contract.files import atomic_path, make_folder
from challenge_welding.contract.schema import Section

DRAW_KEYS = ("score",) + KPI_KEYS
RAW_KEYS = tuple(f"raw_{k}" for k in KPI_KEYS)  # optional (older files lack them): the weight sensitivity's input
SUFFIX = ".draws.npz"


def draws_path(output_dir) -> Path:
    """Where the draws of the scored folder OUT live: ``<OUT>.draws.npz``, beside OUT."""
    out = Path(output_dir).resolve()
    return out.with_name(out.name + SUFFIX)


def _plain(config: Section | dict) -> dict:
    """The scoring config as plain data (scoring.config.ScoringConfig is a contract.schema.Section)."""
    return config.as_dict() if isinstance(config, Section) else config


def fingerprint(reference_sha256: dict, config: Section | dict) -> str:
    """sha256 over the reference files' hashes, the config (seed and B included) and the draw keys.

    Two runs are comparable resample by resample exactly when their
    fingerprints are equal: same reference rows (hence the same strata), same
    config (criteria, rescaling, bootstrap seed, B and level).
    """
    missing = [s for s in SET_NAMES if not reference_sha256.get(s)]
    if missing:
        raise ChallengeError(f"no hash of the reference file(s) {', '.join(missing)}: cannot fingerprint the draws")
    payload = {"reference": {s: reference_sha256[s] for s in SET_NAMES}, "config": _plain(config),
               "keys": list(DRAW_KEYS)}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


@dataclass
class Draws:
    """The per-resample values of one submission."""

    values: dict          # key of DRAW_KEYS -> (B,) float array
    point: dict           # key of DRAW_KEYS -> scores.json value
    fingerprint: str
    header: dict
    path: Path | None = None


def build(values: dict, scores: dict, reference_sha256: dict, config: Section | dict) -> Draws:
    """Draws from the bootstrap's ``values`` and the scores.json content; ``config``: the scoring
    config (typed, or its plain dict: contract imports nothing of scoring)."""
    plain = _plain(config)
    boot = plain["extras"]["bootstrap"]
    if not values:
        raise ChallengeError("no per-resample values: the bootstrap is off (extras.bootstrap.n = 0)")
    header = {"fingerprint": fingerprint(reference_sha256, plain), "n": int(boot["n"]),
              "seed": int(boot["seed"]), "level": float(boot["level"]),
              "reference_sha256": {s: reference_sha256[s] for s in SET_NAMES},
              "config_sha256": hashlib.sha256(json.dumps(plain, sort_keys=True, default=str).encode()).hexdigest(),
              "version": __version__}
    header["rescaling"] = plain["rescaling"]          # the weight sensitivity jitters these breakpoints
    header["final_weights"] = plain["final_weights"]  # and draws weights around these
    header["analyses"] = plain["analyses"]            # with this concentration and jitter
    keys = DRAW_KEYS + tuple(k for k in RAW_KEYS if k in values)
    return Draws({k: np.asarray(values[k], dtype=float) for k in keys},
                 {k: float(scores[k]) for k in DRAW_KEYS}, header["fingerprint"], header)


def check_unpublished(path, published_dir) -> Path:
    """``path`` resolved; a ChallengeError when it lies inside ``published_dir`` (what participants download)."""
    path, pub = Path(path).resolve(), Path(published_dir).resolve()
    if path == pub or pub in path.parents:
        raise ChallengeError(f"--draws {path} is inside the published output {pub}: write it elsewhere "
                             f"(e.g. {draws_path(pub)})")
    return path


def save(path, draws: Draws, published_dir=None) -> Path:
    """Write ``draws`` to ``path`` (atomically); refuse a path inside ``published_dir``."""
    path = Path(path).resolve() if published_dir is None else check_unpublished(path, published_dir)
    make_folder(path.parent, "the draws")
    with atomic_path(path, "the draws") as tmp:
        np.savez(tmp, point=np.array([draws.point[k] for k in DRAW_KEYS]),
                 header=np.array(json.dumps(draws.header)), **draws.values)
    return path


def load(path) -> Draws:
    """Read a draws file; one clear error (exit 2) when it is missing, not one, or over the limits.

    The archive's declared sizes are checked before anything is inflated (contract.checked), the
    header's nesting before it is parsed; every array must be 1-D, numeric and of the header's B.
    """
    path = Path(path)
    if not path.is_file():
        raise ChallengeError(f"{path} not found: score with `evaluate` (writes it) or `score --draws {path}`")
    npz_members(path)
    try:
        with np.load(path, allow_pickle=False) as f:
            text = str(f["header"])
            if nesting(text.encode()) > MAX_JSON_DEPTH:
                raise ValueError(f"key 'header' is nested deeper than {MAX_JSON_DEPTH}")
            header = json.loads(text, parse_constant=_refuse_constant)
            values = {k: _numbers(f[k], k) for k in DRAW_KEYS + RAW_KEYS if k in f.files}
            missing = [k for k in DRAW_KEYS if k not in values]
            if missing:
                raise KeyError(missing[0])
            point = dict(zip(DRAW_KEYS, (float(v) for v in _numbers(f["point"], "point"))))
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        raise FileRefused(f"{path} is not a draws file ({type(exc).__name__}: {exc})") from None
    if not isinstance(header, dict) or not isinstance(header.get("fingerprint"), str):
        raise FileRefused(f"{path}: key 'header' has no 'fingerprint' text")
    lengths = {len(v) for v in values.values()}
    if lengths != {header.get("n")}:
        raise FileRefused(f"{path}: per-resample arrays of lengths {sorted(lengths)}, header says B = "
                          f"{header.get('n')}")
    if len(point) != len(DRAW_KEYS):
        raise FileRefused(f"{path}: key 'point' holds {len(point)} values, expected {len(DRAW_KEYS)}")
    return Draws(values, point, header["fingerprint"], header, path)


def _refuse_constant(name):
    raise ValueError(f"key 'header' holds {name}")


def _numbers(array, key) -> np.ndarray:
    """A 1-D float array (NaN kept: a KPI undefined on a resample); ValueError naming ``key`` otherwise."""
    if array.ndim != 1 or array.dtype.kind not in "fiu":
        raise ValueError(f"key {key!r} is a {array.dtype} array of shape {array.shape}, expected 1-D numbers")
    return array.astype(float)
