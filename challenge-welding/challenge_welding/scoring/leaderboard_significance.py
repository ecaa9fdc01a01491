"""The leaderboard's significance part: read each scored folder's draws, compare, lay out for the page and CSV.

For the scored folders OUT given to ``leaderboard``, the per-resample values
live in ``<OUT>.draws.npz`` (contract.draws). Runs are compared only when their
fingerprints are equal (same reference data, config, seed and B); the
arithmetic is in challenge_welding.scoring.significance.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from challenge_welding.contract.errors import ChallengeError
from challenge_welding.contract import draws as draws_io
from challenge_welding.scoring.significance import ALPHA, LEVEL, Comparison, compare

POINT_TOL = 1e-6  # scores.json keeps 10 significant digits; the draws file keeps the same values


@dataclass
class Metric:
    """One metric's comparison, rows ordered by the metric's point value (best first)."""

    key: str
    names: list
    point: np.ndarray
    result: Comparison


def load(folders, names, required: bool | None):
    """{name: Draws} for every folder, or None when significance is off.

    required None: on when every folder has its draws file, else off (with a
    note on stderr); True: a missing file is an error; False: off.
    """
    if required is False or not folders:
        return None
    paths = {n: draws_io.draws_path(f) for n, f in zip(names, folders)}
    missing = [str(p) for p in paths.values() if not p.is_file()]
    if missing:
        if required:
            raise ChallengeError(f"--significance needs the per-resample values of every scored folder; missing: "
                                 f"{', '.join(missing)} (written by `evaluate`, or `score --draws FILE`)")
            print(f"note: no significance columns ({len(missing)} of {len(paths)} draws files missing, "
              f"e.g. {missing[0]})", file=sys.stderr)
        return None
    return {n: draws_io.load(p) for n, p in paths.items()}


def check(draws: dict, scores: dict) -> None:
    """One-line refusal when runs are not comparable or a draws file is stale."""
    names = list(draws)
    first = draws[names[0]]
    for n in names[1:]:
        if draws[n].fingerprint != first.fingerprint:
            raise ChallengeError(
                f"cannot compare {names[0]!r} and {n!r}: scored on different reference data, config, seed or B "
                f"(fingerprints {first.fingerprint[:12]} vs {draws[n].fingerprint[:12]})")
    for n, d in draws.items():
        if abs(d.point["score"] - scores[n]["score"]) > POINT_TOL * max(1.0, abs(scores[n]["score"])):
            raise ChallengeError(f"{d.path} does not belong to the scores of {n!r} (score {d.point['score']} vs "
                                 f"{scores[n]['score']}): re-score it")


def analyse(draws: dict) -> dict:
    """{metric key: Metric} for the score and the six KPIs.

    Levels from the config the draws were made with (extras.bootstrap.level,
    0.95 by default): rank intervals of that coverage, groups at alpha = 1 - level.
    """
    level = next(iter(draws.values())).header.get("level", LEVEL)
    alpha = 1.0 - level if 0 < level < 1 else ALPHA
    out = {}
    for key in draws_io.DRAW_KEYS:
        names = sorted(draws, key=lambda n: (-draws[n].point[key], n))
        point = np.array([draws[n].point[key] for n in names])
        values = np.stack([draws[n].values[key] for n in names])
        out[key] = Metric(key, names, point, compare(values, point, alpha, level))
    return out


def add_columns(frame, metrics: dict):
    """Rank interval (rank_lo, rank_hi) and score group letters for the ranked rows of ``frame``."""
    m = metrics["score"]
    where = {n: i for i, n in enumerate(m.names)}
    rows = [where.get(n) for n in frame["solution"]]
    pos = frame.columns.get_loc("rank") + 1
    for offset, (column, values) in enumerate((
            ("rank_lo", [None if i is None else int(m.result.rank_interval[i, 0]) for i in rows]),
            ("rank_hi", [None if i is None else int(m.result.rank_interval[i, 1]) for i in rows]),
            ("group", [None if i is None else m.result.letters[i] for i in rows]))):
        frame.insert(pos + offset, column, values)
    frame["rank_lo"] = frame["rank_lo"].astype("Int64")
    frame["rank_hi"] = frame["rank_hi"].astype("Int64")
    return frame


def pairwise_frame(metrics: dict):
    """Long table: metric, a, b, P(a > b), p-value, distinguishable (Holm) for every ordered pair."""
    records = []
    for key, m in metrics.items():
        r = m.result
        for i, a in enumerate(m.names):
            for j, b in enumerate(m.names):
                if i != j:
                    records.append({"metric": key, "a": a, "b": b, "p_a_beats_b": r.p[i, j],
                                    "p_value": r.pvalue[i, j], "distinguishable": bool(r.differ[i, j])})
    return pd.DataFrame(records, columns=["metric", "a", "b", "p_a_beats_b", "p_value", "distinguishable"])


def pairwise_path(csv_path) -> Path:
    """FILE.csv -> FILE.pairwise.csv."""
    csv_path = Path(csv_path)
    return csv_path.with_name(csv_path.stem + ".pairwise.csv")
