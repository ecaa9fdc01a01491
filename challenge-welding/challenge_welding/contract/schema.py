"""The config schema engine shared by the scoring config and the build config: typed keys, leaf
checkers, one validation pass.

A schema node is a frozen dataclass (subclass :class:`Section`, one field per key, made with
:func:`key`; ``key(node, default)`` for a key that may be left out), a dict of nodes (fixed,
required keys), ``("map", leaf)`` (free string keys) or a leaf checker ``check(value, where)``. A bad
value is one ChallengeError, ``"<file>: key 'a.b' must be ..., got X"``: the file and the key
first, what is expected and what was given (:func:`schema_error`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import field

from challenge_welding.contract.errors import ChallengeError

REQUIRED = object()


def schema_error(where, msg) -> ChallengeError:
    """The one line for a bad value at ``where`` = (file, key, subkey, ...)."""
    key = f"key '{'.'.join(where[1:])}'" if len(where) > 1 else "the top level"
    return ChallengeError(f"{where[0]}: {key} {msg}")


def number(lo=None, hi=None, lo_open=False, hi_open=False, nullable=False, integer=False):
    """A leaf checker: a finite number (not a bool) within the bounds; None if ``nullable``."""
    def check(value, where):
        if value is None and nullable:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise schema_error(where, f"must be a number, got {value!r}")
        if integer and int(value) != value:
            raise schema_error(where, f"must be an integer, got {value!r}")
        value = int(value) if integer else float(value)
        if not math.isfinite(value):
            raise schema_error(where, f"must be finite, got {value!r}")
        if lo is not None and (value < lo or (lo_open and value == lo)):
            raise schema_error(where, f"must be {'>' if lo_open else '>='} {lo}, got {value!r}")
        if hi is not None and (value > hi or (hi_open and value == hi)):
            raise schema_error(where, f"must be {'<' if hi_open else '<='} {hi}, got {value!r}")
        return value
    return check


def choice(*options):
    """A leaf checker: one of ``options``."""
    def check(value, where):
        if value not in options:
            raise schema_error(where, f"must be one of {', '.join(map(str, options))}, got {value!r}")
        return value
    return check


def boolean(value, where):
    """A leaf checker: true or false."""
    if not isinstance(value, bool):
        raise schema_error(where, f"must be true or false, got {value!r}")
    return value


def key(schema, default=REQUIRED):
    """A dataclass field for a config key: its schema node and, for a key that may be left out,
    its default (as written in YAML)."""
    return field(metadata={"schema": schema, "default": default})


class Section:
    """A validated, frozen section of a config, read by attribute only (``config.kpis.perf.alpha_op``):
    a misspelt name is an AttributeError where it is read, not a KeyError deep in a plain dict."""

    def as_dict(self) -> dict:
        """The section as plain data, in the YAML's order (details.json, fingerprints)."""
        return dataclasses.asdict(self)

    def replaced(self, changes: dict):
        """A copy with ``changes`` applied, nested as in the YAML (``{"robustness": {"size": 40}}``):
        the config stays frozen, a change is a new config (dataclasses.replace at each level). A
        misspelt key is a TypeError. The values are the caller's: they are not checked again."""
        return dataclasses.replace(self, **{
            name: getattr(self, name).replaced(value)
            if isinstance(value, dict) and isinstance(getattr(self, name), Section) else value
            for name, value in changes.items()})


def _keys(schema) -> dict:
    """{key: (schema node, default)} of a fixed-key node: a dataclass or a dict of nodes."""
    if dataclasses.is_dataclass(schema):
        return {f.name: (f.metadata["schema"], f.metadata["default"]) for f in dataclasses.fields(schema)}
    return {k: (node, REQUIRED) for k, node in schema.items()}


def validate(node, schema, where):
    """``node`` (parsed YAML) checked against ``schema``; the typed value (a dataclass for a
    dataclass node). ``where``: (file, keys...) of ``node``, for the error line."""
    if isinstance(schema, tuple):  # ("map", leaf): free string keys
        if not isinstance(node, dict) or not node:
            raise schema_error(where, "must be a non-empty mapping")
        return {str(k): schema[1](v, where + (str(k),)) for k, v in node.items()}
    if isinstance(schema, dict) or dataclasses.is_dataclass(schema):
        keys = _keys(schema)
        if not isinstance(node, dict):
            raise schema_error(where, f"must be a mapping with keys {', '.join(keys)}, got {node!r}")
        unknown = [k for k in node if k not in keys]
        if unknown:
            raise schema_error(where + (str(unknown[0]),), f"is unknown (allowed here: {', '.join(keys)})")
        missing = [k for k, (_, default) in keys.items() if k not in node and default is REQUIRED]
        if missing:
            raise schema_error(where + (missing[0],), "is missing")
        values = {k: validate(node[k] if k in node else default, sub, where + (k,))
                  for k, (sub, default) in keys.items()}
        return schema(**values) if dataclasses.is_dataclass(schema) else values
    return schema(node, where)
