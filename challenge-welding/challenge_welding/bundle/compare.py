"""Compare two scores.json files (a container dry run against the host run).

Three keys depend on wall time, so they differ between two runs of the same
component on the same data: ``time_p95`` (the measured 95th percentile per
image), ``perf`` (I_perf divides by 1 + k_t ln(1 + t)) and ``score`` (it
includes perf). Every other key is a function of the predictions only and must
be equal: same data, same pinned requirements, same scoring code.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

from challenge_welding.contract.checked import FileRefused, read_json
from challenge_welding.contract.names import SCORE_KEYS

TIME_DEPENDENT_KEYS = ("score", "perf", "time_p95")


def compare_scores(a: dict, b: dict, *, ignore=TIME_DEPENDENT_KEYS, rel_tol: float = 1e-9,
                   abs_tol: float = 1e-12) -> list[str]:
    """Differences between two scores.json dicts, one line each (empty: the same).

    Both must hold exactly contract.names.SCORE_KEYS; keys in ``ignore`` are only
    checked to be finite numbers. Values are compared with ``math.isclose``
    (the tolerances absorb nothing but the last bits of a float).
    """
    out = []
    for name, d in (("first", a), ("second", b)):
        if set(d) != set(SCORE_KEYS):
            out.append(f"{name}: keys {sorted(set(d) ^ set(SCORE_KEYS))} differ from SCORE_KEYS")
    for key in SCORE_KEYS:
        x, y = a.get(key), b.get(key)
        if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in (x, y)):
            out.append(f"{key}: not finite numbers ({x!r}, {y!r})")
        elif key not in ignore and not math.isclose(x, y, rel_tol=rel_tol, abs_tol=abs_tol):
            out.append(f"{key}: {x!r} != {y!r}")
    return out


def compare_files(first: str | Path, second: str | Path, **kwargs) -> list[str]:
    """compare_scores of two files, each read by contract.checked (bounded, strict JSON; FileRefused otherwise)."""
    a, b = (read_json(p, "pass a scores.json written by `score`") for p in (first, second))
    if not (isinstance(a, dict) and isinstance(b, dict)):
        return [f"{p}: not a JSON object" for p, d in ((first, a), (second, b)) if not isinstance(d, dict)]
    return compare_scores(a, b, **kwargs)


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m challenge_welding.bundle.compare FIRST.json SECOND.json",
              file=sys.stderr)
        return 2
    try:
        diffs = compare_files(*args)
    except FileRefused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for d in diffs:
        print(f"differs: {d}")
    if not diffs:
        print(f"same scores.json (time-dependent keys {', '.join(TIME_DEPENDENT_KEYS)} not "
              "compared)")
    return 1 if diffs else 0


if __name__ == "__main__":
    raise SystemExit(main())
