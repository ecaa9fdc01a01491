"""Local leaderboard: scored folders ranked into a colour-coded HTML table and a CSV.

In the manner of the protocol's comparative table: every KPI and criterion of
scores.json, the score, the rank, each cell on a red -> green scale that is
absolute (the same colour means the same value on every board: see ``SCALES``),
with a legend for every abbreviation (from the criteria registry). Virtual
solutions (scoring.virtual) can be added as unranked reference rows.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

from challenge_welding.bundle.bundle import BUDGET_S_PER_IMAGE
from challenge_welding.contract.names import CRITERIA_KEYS, KPI_KEYS, SCORE_KEYS, VIRTUAL_KINDS
from challenge_welding.contract.checked import read_scores as checked_scores
from challenge_welding.contract.errors import ChallengeError
from challenge_welding.contract.files import make_folder, write_atomic
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


def rank(scores: list[float], reference: list[bool]) -> list[int | None]:
    """Competition ranking (1, 2, 2, 4) of the non-reference rows by descending score.

    Every score is a finite number: one that is not is never ranked nor listed (refused where
    scores.json is read, contract.checked.read_scores); here a ValueError says a caller broke that.
    """
    if not all(math.isfinite(s) for s in scores):
        raise ValueError("a score that is not a number is never ranked (contract.checked.read_scores)")
    ranked = sorted(s for s, r in zip(scores, reference) if not r)
    ranked.reverse()
    return [None if r else 1 + ranked.index(s) for s, r in zip(scores, reference)]


def read_scores(folder: Path) -> dict:
    """scores.json of one scored folder (contract.checked.read_scores: a score that is not a number is refused)."""
    return checked_scores(Path(folder) / "scores.json", "not ranked; re-score the folder with `score`")


def virtual_rows(data, workdir, kinds=VIRTUAL_KINDS, seed=0) -> list[tuple[str, dict]]:
    """Score the virtual solutions on DATA/reference_data; (name, scores) per kind."""
    from challenge_welding.scoring.score import write_scores
    from challenge_welding.scoring.virtual import make_virtual

    reference = Path(data) / "reference_data"
    if not reference.is_dir():
        raise ChallengeError(f"{reference} not found: --virtual takes a build-sets output folder")
    rows = []
    for kind in kinds:
        pred = Path(workdir) / kind / "predictions"
        out = Path(workdir) / kind
        make_virtual(reference, kind, pred, seed=seed)
        write_scores(reference, pred, out)  # reference rows: scores only, no page
        rows.append((f"virtual {kind}", read_scores(out)))
    return rows


def table(entries: list[tuple[str, dict, bool]]):
    """DataFrame (rank, solution, reference, score keys...) sorted by descending score."""
    import pandas as pd

    frame = pd.DataFrame([{"solution": n, "reference": ref, **s} for n, s, ref in entries])
    frame = frame.sort_values(["score", "solution"], ascending=[False, True], kind="stable")
    frame.insert(0, "rank", rank(list(frame["score"]), list(frame["reference"])))
    frame["rank"] = frame["rank"].astype("Int64")
    return frame.reset_index(drop=True)


def render_html(frame, title="Leaderboard", matrices=None, analyses=None) -> str:
    """Self-contained page (inline CSS, no script, no network)."""
    import jinja2

    from challenge_welding import __version__

    env = jinja2.Environment(loader=jinja2.PackageLoader("challenge_welding.report", "templates"),
                             autoescape=True)
    from challenge_welding.report.charts import rank_interval_chart

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
        rows.append({"rank": _int_text(rank_), "name": rec["solution"], "reference": bool(rec["reference"]),
                     "cells": cells, "interval": _interval_text(rec), "group": _group_text(rec)})
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
                 "hi": int(r["rank_hi"]), "group": _group_text(r)} for r in ranked], level)
    return Markup(svg.replace('role="img"', 'role="img" aria-label="rank intervals"', 1))


def _int_text(value) -> str:
    """'' for a missing (None, NaN, <NA>) integer, else its digits."""
    import pandas as pd

    return "" if value is None or pd.isna(value) else str(int(value))


def _group_text(rec) -> str:
    import pandas as pd

    group = rec.get("group")
    return "" if group is None or pd.isna(group) else str(group)


def _interval_text(rec) -> str:
    lo, hi = _int_text(rec.get("rank_lo")), _int_text(rec.get("rank_hi"))
    return f"{lo}-{hi}" if lo else ""


def text_table(frame) -> str:
    """Plain-text table for the terminal: rank, solution, score and the six KPIs."""
    sig = "rank_lo" in frame.columns
    widths = [max(12, len(k) + 2) for k in KPI_KEYS]  # a column name is never cut (generalization)
    head = (f"{'rank':>4}  " + (f"{'95% rank':>9} {'group':<6}" if sig else "")
            + f"{'solution':<28}{'score':>7}" + "".join(f"{k:>{w}}" for k, w in zip(KPI_KEYS, widths)))
    lines = [head, "-" * len(head)]
    for rec in frame.to_dict("records"):
        extra = f"{_interval_text(rec):>9} {_group_text(rec):<6}" if sig else ""
        lines.append(f"{_int_text(rec['rank']):>4}  {extra}{rec['solution'][:27]:<28}{rec['score']:>7.2f}"
                     + "".join(f"{rec[k]:>{w}.3f}" for k, w in zip(KPI_KEYS, widths)))
    return "\n".join(lines)


def output_paths(output) -> tuple[Path, Path]:
    """FILE -> (FILE.html, FILE.csv); a .html or .csv suffix on FILE is dropped first."""
    output = Path(output)
    if output.suffix.lower() in (".html", ".csv"):
        output = output.with_suffix("")
    return output.with_name(output.name + ".html"), output.with_name(output.name + ".csv")


def leaderboard(folders, output, virtual_data=None, names=None, title="Leaderboard",
                virtual_dir=None, significance=None, baseline=None):
    """Write OUTPUT.html and OUTPUT.csv; return the DataFrame.

    folders: scored folders (each with scores.json); a row is named after its
    folder unless ``names`` is given. virtual_data: a build-sets folder whose
    reference data scores the nine virtual solutions as reference rows (in
    ``virtual_dir``, else a temporary folder). significance: paired comparisons
    of the scored folders from their ``<OUT>.draws.npz`` (leaderboard_significance):
    None = when every folder has one, True = required, False = off; they add
    rank_lo, rank_hi and group columns, the matrices on the page and
    OUTPUT.pairwise.csv. baseline: the name of a ranked row (e.g. Solution-1's) that the
    relative robustness (mce column) compares with (leaderboard_analyses).
    """
    from challenge_welding.scoring import leaderboard_analyses
    from challenge_welding.scoring import leaderboard_significance as sig

    folders = [Path(f) for f in folders]
    names = list(names) if names else [f.resolve().name for f in folders]
    if len(set(names)) != len(names):
        raise ChallengeError(f"two scored folders share a name: {names}; rename one")
    entries = [(n, read_scores(f), False) for n, f in zip(names, folders)]
    draws = sig.load(folders, names, significance)
    metrics = None
    if draws:
        sig.check(draws, {n: s for n, s, _ in entries})
        metrics = sig.analyse(draws)
    if virtual_data is not None:
        if virtual_dir is None:
            with tempfile.TemporaryDirectory() as tmp:
                entries += [(n, s, True) for n, s in virtual_rows(virtual_data, tmp)]
        else:
            entries += [(n, s, True) for n, s in virtual_rows(virtual_data, virtual_dir)]
    if not entries:
        raise ChallengeError("nothing to rank: give scored folders or --virtual DATA")
    frame = table(entries)
    if metrics:
        frame = sig.add_columns(frame, metrics)
    # issue 20: reported beside the ranking, never changing it
    frame, analyses = leaderboard_analyses.columns(frame, folders, names, draws, baseline)
    html_path, csv_path = output_paths(output)
    make_folder(html_path.parent, "the leaderboard")
    matrices = sig.page_matrices(metrics, colour) if metrics else None
    # each file complete or absent; a write fault is one line (contract.files, exit status 3)
    write_atomic(html_path, render_html(frame, title, matrices, analyses), what="the leaderboard page")
    write_atomic(csv_path, frame.to_csv(index=False, float_format="%.6g"), what="the leaderboard table")
    pairwise = sig.pairwise_path(csv_path)
    if metrics:
        write_atomic(pairwise, sig.pairwise_frame(metrics).to_csv(index=False, float_format="%.6g"),
                     what="the pairwise comparisons")
    else:
        pairwise.unlink(missing_ok=True)  # no stale matrix beside a board without significance
    return frame
