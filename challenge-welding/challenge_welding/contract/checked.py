"""Strict JSON out, checked reads in: the limits of every file we read back, named once.

Writers: :func:`json_text` is the one JSON encoder of our outputs (ingestion.json,
scores.json, details.json): standard JSON only (``allow_nan=False``), so a browser's
``JSON.parse`` or any strict reader accepts what we write; a NaN or an infinity that
reaches it is refused (ValueError), never written as a bare ``NaN``. :func:`write_scores`
is the one writer of a scores.json (through contract.files' atomic write), the mirror of
:func:`read_scores`.

Readers: a scored folder handed to ``leaderboard`` or ``score --baseline`` is somebody
else's bytes. :func:`read_json` checks the size and the nesting *before* ``json.loads``
sees the text (no RecursionError, no gigabytes), and refuses NaN/Infinity;
:func:`npz_members` checks a ``.npz``'s declared uncompressed sizes *before* anything is
inflated (zipfile never inflates a member beyond its declared size: a lie ends in a CRC
error). Every refusal is a :class:`FileRefused` (exit status 2) naming the file and the
key, cause first.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import zipfile
from pathlib import Path

import numpy as np

from challenge_welding.contract.errors import ChallengeError
from challenge_welding.contract.files import write_atomic
from challenge_welding.contract.names import SCORE_KEYS

# The limits, in one place (a real details.json at 4,000 images is well under 1 MB, nesting ~8;
# a draws file holds ~14 arrays of B <= 10^4 float64).
MAX_JSON_BYTES = 16 << 20      # a scores.json / details.json / ingestion.json read back
MAX_JSON_DEPTH = 64            # bracket nesting of such a file
MAX_NPZ_MEMBERS = 64           # arrays in a .draws.npz
MAX_NPZ_MEMBER_BYTES = 16 << 20  # one array, uncompressed (2 * 10^6 float64)
MAX_NPZ_BYTES = 64 << 20       # all arrays together, uncompressed


class FileRefused(ChallengeError):
    """A file we read back breaks its format or the limits above (exit status 2)."""


def json_text(data, indent: int | None = 1, **kwargs) -> str:
    """``data`` as standard JSON text with a final newline; ValueError on NaN or infinity."""
    return json.dumps(data, indent=indent, allow_nan=False, **kwargs) + "\n"


def plain(obj):
    """``obj`` with numpy values as Python ones, dataclasses as dicts, paths as text and NaN/infinity
    as None (JSON null): the one cleaner of what we publish as JSON.

    For reports where "not a number" means "undefined" (details.json); a score is refused instead.

    >>> plain({"a": np.float64("nan"), "b": [np.int64(2), float("inf")], "c": np.array([0.5])})
    {'a': None, 'b': [2, None], 'c': [0.5]}
    """
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        obj = dataclasses.asdict(obj)
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return plain(obj.tolist())
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Path):
        return str(obj)
    return obj


# A JSON string (escapes included): removed before brackets are counted. Linear: the two
# alternatives cannot both match a character.
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]{}")


def nesting(data: bytes) -> int:
    """Deepest bracket nesting of a JSON text (brackets inside strings do not count).

    >>> nesting(b'{"a": [1, {"b": "[[["}]}')
    3
    """
    brackets = _STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    if len(brackets) <= 256:  # the usual header: a few brackets, a plain loop is fastest
        depth = deepest = 0
        for c in brackets:
            depth += 1 if c in (91, 123) else -1  # [ {
            deepest = max(deepest, depth)
        return deepest
    # "[" and "{" have bit 2 clear, "]" and "}" have it set
    step = 1 - 2 * ((np.frombuffer(brackets, np.uint8) >> 2) & 1).astype(np.int64)
    return int(np.cumsum(step).max())


def _non_finite(obj, where=""):
    """The dotted key of the first NaN or infinity in parsed JSON, None when there is none (depth is bounded)."""
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for k, v in items:
        key = f"{where}.{k}" if where else str(k)
        if isinstance(v, float) and not math.isfinite(v):
            return key, v
        found = _non_finite(v, key) if isinstance(v, (dict, list)) else None
        if found:
            return found
    return None


def read_json(path, what: str = "") -> object:
    """The parsed content of a JSON file we wrote (or were handed); FileRefused when it is not one.

    Refused: missing, over MAX_JSON_BYTES, nested deeper than MAX_JSON_DEPTH, not UTF-8,
    not strict JSON (NaN, Infinity). ``what`` says how to get a good one (end of the line).
    """
    path = Path(path)
    fix = f": {what}" if what else ""
    try:
        size = path.stat().st_size
        if size > MAX_JSON_BYTES:
            raise FileRefused(f"{path} is {size:,} bytes, over the {MAX_JSON_BYTES:,} read back{fix}")
        data = path.read_bytes()
    except OSError as exc:
        raise FileRefused(f"{path} cannot be read ({exc.strerror or type(exc).__name__}){fix}") from None
    depth = nesting(data)
    if depth > MAX_JSON_DEPTH:
        raise FileRefused(f"{path} is nested {depth} levels deep (at most {MAX_JSON_DEPTH}){fix}")
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise FileRefused(f"{path} is not valid JSON ({exc}){fix}") from None
    found = _non_finite([value])  # NaN / Infinity are not JSON: refused, naming the key
    if found:
        key = found[0].removeprefix("0").removeprefix(".") or "(the whole file)"
        raise FileRefused(f"{path}: key {key!r} is {found[1]}, not a finite number (not JSON){fix}")
    return value


def read_scores(path, what: str = "re-score the folder with `score`") -> dict:
    """A scores.json: {key: float} for every contract key (contract.names.SCORE_KEYS), each a finite number.

    A score that is not a number is never ranked nor compared: the file is refused in one line
    naming the key (FileRefused, exit status 2), never listed. Missing file, over the limits,
    not an object, a key absent or not a number: refused alike. ``what``: the fix, end of the line.
    """
    path = Path(path)
    if not path.is_file():
        raise FileRefused(f"{path} not found: pass folders written by `evaluate` or `score`")
    scores = read_json(path, what)
    if not isinstance(scores, dict):
        raise FileRefused(f"{path} is not a JSON object: {what}")
    bad = [k for k in SCORE_KEYS if not _number(scores.get(k))]  # read_json refused NaN and infinities
    if bad:
        text = repr(scores[bad[0]]) if bad[0] in scores else "absent"
        text = text if len(text) <= 40 else text[:37] + "..."
        raise FileRefused(f"{path}: key {bad[0]!r} is {text}, not a number"
                          f"{f' (and {len(bad) - 1} more key(s))' if len(bad) > 1 else ''}: {what}")
    return {k: float(scores[k]) for k in SCORE_KEYS}


def write_scores(path, scores: dict) -> Path:
    """Write ``scores`` to the scores.json at ``path``: the contract's keys in their order, each a finite number.

    The one writer of the format (:func:`read_scores` is its reader): strict JSON (:func:`json_text`),
    complete or absent (contract.files.write_atomic). Anything else is our own bug, refused before a
    byte is written: ChallengeError (exit status 2), "internal error" naming the key.
    """
    if tuple(scores) != SCORE_KEYS:
        raise ChallengeError(f"internal error: scores.json keys {list(scores)[:3]}... are not the contract's "
                             f"{list(SCORE_KEYS)[:3]}...")
    bad = [k for k in SCORE_KEYS if not _real(scores[k])]
    if bad:
        raise ChallengeError(f"internal error: scores.json key {bad[0]!r} is {scores[bad[0]]!r}, not a finite number")
    return write_atomic(path, json_text(scores), what="scores.json")


def field(data, key: str, kinds, path, default=None):
    """``data[key]`` when it is of ``kinds``; ``default`` when absent; FileRefused naming file and key otherwise."""
    value = data.get(key, default) if isinstance(data, dict) else None
    if value is default:
        return default
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        text = repr(value)
        text = text if len(text) <= 40 else text[:37] + "..."
        raise FileRefused(f"{path}: key {key!r} is {text}, expected {' or '.join(k.__name__ for k in kinds)}")
    return value


def npz_members(path) -> list[str]:
    """The array names of a ``.npz`` whose declared sizes fit the limits; FileRefused otherwise (nothing inflated)."""
    path = Path(path)
    try:
        with zipfile.ZipFile(path) as z:
            infos = z.infolist()
    except (OSError, zipfile.BadZipFile) as exc:
        raise FileRefused(f"{path} is not an .npz archive ({exc})") from None
    if len(infos) > MAX_NPZ_MEMBERS:
        raise FileRefused(f"{path} holds {len(infos)} arrays (at most {MAX_NPZ_MEMBERS})")
    for info in infos:
        if info.file_size > MAX_NPZ_MEMBER_BYTES:
            raise FileRefused(f"{path}: array {info.filename.removesuffix('.npy')!r} inflates to "
                              f"{info.file_size:,} bytes (at most {MAX_NPZ_MEMBER_BYTES:,})")
    total = sum(i.file_size for i in infos)
    if total > MAX_NPZ_BYTES:
        raise FileRefused(f"{path} inflates to {total:,} bytes (at most {MAX_NPZ_BYTES:,})")
    return [i.filename.removesuffix(".npy") for i in infos]


def curves(value, path, key: str = "robustness") -> dict:
    """details.json's robustness curves {type: {"levels": [numbers], "ml": [numbers or null]}}, checked.

    FileRefused naming the file and the key when a curve is not of that shape (strings, lists
    of unequal lengths, non-finite numbers), so that no reader meets them unchecked.
    """
    if not isinstance(value, dict):
        raise FileRefused(f"{path}: key {key!r} is not an object of curves")
    for kind, curve in value.items():
        where = f"{path}: key '{key}.{kind}'"
        if not isinstance(curve, dict):
            raise FileRefused(f"{where} is not an object with 'levels' and 'ml'")
        levels, ml = curve.get("levels"), curve.get("ml")
        if not (isinstance(levels, list) and isinstance(ml, list) and len(levels) == len(ml)):
            raise FileRefused(f"{where}: 'levels' and 'ml' must be lists of one length")
        if not all(_real(v) for v in levels) or not all(v is None or _real(v) for v in ml):
            raise FileRefused(f"{where}: 'levels' and 'ml' must hold finite numbers (null for an unpublished level)")
    return value


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _real(v) -> bool:
    return _number(v) and math.isfinite(v)
