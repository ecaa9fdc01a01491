"""The leaderboard page: the ranked table, its legend, its colours and the significance matrices.

Drawn from what flows.leaderboard gives (the table as a DataFrame, the significance results,
the analyses' columns), with the one template environment of report.html; nothing computed
but the colours and the cells' text. Every cell's colour is on an absolute scale (``SCALES``):
the same colour means the same value on every board.
"""

from __future__ import annotations

import math

from challenge_welding.contract.names import BUDGET_S_PER_IMAGE, CRITERIA_KEYS, KPI_KEYS, SCORE_KEYS
from challenge_welding.contract.registry import BY_KEY, KPIS, lower_better_keys

# Columns where a smaller value is better (costs, time, calibration errors): the criteria registry's.
LOWER_BETTER = lower_better_keys()

# Absolute colour scales, (red at, green at) per registry metric, so that a colour reads the same on
# every board and in every column: where the score itself stops rewarding. OP: 1 = a human-only
# process, 0 = perfect; ECE: I_U's calibration factor reaches 0 at 0.5; UOP: I_U clips it to [0, 1];
# AUROC: 0.5 = chance. The time p95 is red at the challenge's budget (1/12 s per image), green at 0.
SCALES = {"OP": (1.0, 0.0), "ML": (0.0, 1.0), "UOP": (0.0, 1.0), "ECE": (0.5, 0.0), "r_x": (0.0, 1.0),
          "AUROC": (0.5, 1.0), "time_p95": (BUDGET_S_PER_IMAGE, 0.0)}
# Short headers where the key is wide; the legend spells each one out.
SHORT = {"uncertainty": "uncert.", "robustness": "robust.", "generalization": "gen.", "time_p95": "t p95 ms"}


def scale(key: str) -> tuple[float, float]:
    """(value shown red, value shown green) of a scores.json column on the board."""
    if key == "score":
        return 0.0, 100.0
    if key in BY_KEY:
        return SCALES[BY_KEY[key].metric]
    return 0.0, 1.0  # the rescaled KPIs


def absolute_colour(value: float, key: str) -> str:
    """The cell colour of ``value`` in column ``key`` on its absolute scale (values beyond it clipped)."""
    red, green = scale(key)
    return colour(value, min(red, green), max(red, green), lower_better=red > green)


def _scale_text(key: str) -> str:
    """The column's scale in words, values beyond its ends included (a negative UOP is as red as 0)."""
    red, green = scale(key)
    worse, better = ("or more", "or less") if red > green else ("or less", "or more")
    if key == "time_p95":
        return f"red at the budget {1000 * red:.1f} ms per image {worse}, green at 0"
    return f"red at {red:g} {worse}, green at {green:g} {better}"


def legend() -> list[dict]:
    """One row per column abbreviation: header, what it is, its colour scale (from the registry)."""
    rows = [{"key": "score", "head": "score", "text": "the leaderboard score, 0-100 (weighted rescaled KPIs)",
             "scale": _scale_text("score")}]
    rows += [{"key": k.key, "head": SHORT.get(k.key, k.key),
              "text": f"KPI {k.label}, rescaled 0-1 (on {k.sets}; 0.9 = the 'good' reference)",
              "scale": _scale_text(k.key)} for k in KPIS]
    for key in CRITERIA_KEYS:
        c = BY_KEY[key]
        unit = " (shown in ms; seconds in the CSV)" if key == "time_p95" else ""
        rows.append({"key": key, "head": SHORT.get(key, key),
                     "text": f"{c.label}: {c.meaning}{unit}; {c.set} set, feeds {c.kpi}; {c.better} is better",
                     "scale": _scale_text(key)})
    return rows


def colour(value: float, lo: float, hi: float, lower_better: bool = False) -> str:
    """Red (worst) -> yellow -> green (best) for ``value`` on the column range [lo, hi].

    A constant column (hi == lo) or a non-finite value gets a neutral grey.
    """
    if not (math.isfinite(value) and math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return "hsl(0, 0%, 92%)"
    x = (value - lo) / (hi - lo)
    if lower_better:
        x = 1.0 - x
    return f"hsl({120.0 * min(max(x, 0.0), 1.0):.0f}, 70%, 78%)"


# how the page words "row beats column" for each metric
VERBS = {
    "score": "scores higher than",
    "perf": "performs better than",
    "uncertainty": "handles uncertainty better than",
    "robustness": "is more robust than",
    "ood": "detects out-of-distribution samples better than",
    "generalization": "generalises better than",
    "drift": "copes with drift better than",
}
def render_html(frame, title="Leaderboard", matrices=None, analyses=None) -> str:
    """Self-contained page (inline CSS, no script, no network)."""
    from challenge_welding import __version__
    from challenge_welding.report.charts import rank_interval_chart
    from challenge_welding.report.html import environment

    env = environment()

    keys = list(SCORE_KEYS)
    rows = []
    for rec in frame.to_dict("records"):
        cells = []
        for k in keys:
            v = rec[k]
            if not measured(rec, k):
                cells.append({"text": "-", "colour": colour(float("nan"), 0, 1)})
                continue
            text = f"{v:.2f}" if k == "score" else (f"{1000 * v:.1f}" if k == "time_p95" else f"{v:.3f}")
            cells.append({"text": text, "colour": absolute_colour(v, k)})
        rank_ = rec["rank"]
        rows.append({"rank": int_text(rank_), "name": rec["solution"], "reference": bool(rec["reference"]),
                     "cells": cells, "interval": interval_text(rec), "group": group_text(rec)})
    return env.get_template("leaderboard.html.j2").render(
        title=title, kpis=KPI_KEYS, criteria=CRITERIA_KEYS, lower_better=LOWER_BETTER, rows=rows,
        heads={k: SHORT.get(k, k) for k in keys}, legend=legend(),
        version=__version__, matrices=matrices or [], significance="rank_lo" in frame.columns,
        analyses=analyses, rank_chart=_rank_chart(frame, rank_interval_chart, matrices))


def measured(rec, key) -> bool:
    """Whether a board cell holds a measurement: a virtual row's time was never measured (it is 0 by
    construction, scoring.virtual), and a missing value is not one either."""
    v = rec.get(key)
    if v is None or not math.isfinite(float(v)):
        return False
    return not (key == "time_p95" and bool(rec.get("reference")))


def _rank_chart(frame, draw, matrices):
    """The ranked rows' rank intervals as an inline SVG (None without significance)."""
    from markupsafe import Markup

    if "rank_lo" not in frame.columns:
        return None
    ranked = [r for r in frame.to_dict("records") if not r["reference"]]
    level = matrices[0]["level"] if matrices else 0.95
    svg = draw([{"name": r["solution"], "rank": int(r["rank"]), "lo": int(r["rank_lo"]),
                 "hi": int(r["rank_hi"]), "group": group_text(r)} for r in ranked], level)
    return Markup(svg.replace('role="img"', 'role="img" aria-label="rank intervals"', 1))


def int_text(value) -> str:
    """'' for a missing (None, NaN, <NA>) integer, else its digits."""
    import pandas as pd

    return "" if value is None or pd.isna(value) else str(int(value))


def group_text(rec) -> str:
    import pandas as pd

    group = rec.get("group")
    return "" if group is None or pd.isna(group) else str(group)


def interval_text(rec) -> str:
    lo, hi = int_text(rec.get("rank_lo")), int_text(rec.get("rank_hi"))
    return f"{lo}-{hi}" if lo else ""


def page_matrices(metrics: dict) -> list:
    """Template data per metric: names, letters, rank intervals and coloured cells with their sentence.

    ``metrics``: scoring.leaderboard_significance.analyse's {key: metric} (names, point values and a
    significance result: p, differ, alpha, level, letters, rank_interval), drawn as given.
    """
    out = []
    for key, m in metrics.items():
        r = m.result
        rows = []
        for i, a in enumerate(m.names):
            cells = []
            for j, b in enumerate(m.names):
                if i == j:
                    cells.append({"text": "", "colour": "hsl(0, 0%, 85%)", "title": a, "tie": False})
                    continue
                p = r.p[i, j]
                tie = not r.differ[i, j]
                verdict = ("not distinguishable" if tie else "distinguishable") + \
                    f" at the {100 * r.alpha:g} % family-wise level (Holm)"
                cells.append({"text": f"{p:.2f}", "colour": colour(p, 0.0, 1.0), "tie": tie,
                              "title": f"{a} {VERBS[key]} {b} with P = {p:.2f}; {verdict}"})
            rows.append({"name": a, "value": m.point[i], "letters": r.letters[i],
                         "interval": f"{r.rank_interval[i, 0]}-{r.rank_interval[i, 1]}", "cells": cells})
        out.append({"key": key, "verb": VERBS[key], "names": m.names, "rows": rows, "alpha": r.alpha,
                    "level": r.level})
    return out
