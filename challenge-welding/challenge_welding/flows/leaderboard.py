"""Local leaderboard: scored folders ranked into a colour-coded HTML table and a CSV.

In the manner of the protocol's comparative table: every KPI and criterion of
scores.json, the score, the rank, each cell on a red -> green scale that is
absolute (the same colour means the same value on every board: see ``SCALES``),
with a legend for every abbreviation (from the criteria registry). Virtual
solutions (scoring.virtual) can be added as unranked reference rows. The order of the
steps and the files written live here; the page is drawn by report.leaderboard.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

from challenge_welding.contract.names import KPI_KEYS, VIRTUAL_KINDS
from challenge_welding.contract.checked import read_scores as checked_scores
from challenge_welding.contract.errors import ChallengeError
from challenge_welding.contract.files import make_folder, write_atomic
from challenge_welding.report.leaderboard import group_text, int_text, interval_text, page_matrices, render_html


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
    from challenge_welding.contract.checked import write_scores
    from challenge_welding.scoring.score import details_json, score_predictions, write_output
    from challenge_welding.scoring.virtual import make_virtual

    reference = Path(data) / "reference_data"
    if not reference.is_dir():
        raise ChallengeError(f"{reference} not found: --virtual takes a build-sets output folder")
    rows = []
    for kind in kinds:
        pred = Path(workdir) / kind / "predictions"
        out = Path(workdir) / kind
        make_virtual(reference, kind, pred, seed=seed)
        scored = score_predictions(reference, pred)  # reference rows: scores and details, no page
        make_folder(out, "the virtual solutions")
        write_scores(out / "scores.json", scored.scores)
        write_output(out / "details.json", details_json(scored.details))
        rows.append((f"virtual {kind}", scored.scores))  # as written: not read back
    return rows


def table(entries: list[tuple[str, dict, bool]]):
    """DataFrame (rank, solution, reference, score keys...) sorted by descending score."""
    import pandas as pd

    frame = pd.DataFrame([{"solution": n, "reference": ref, **s} for n, s, ref in entries])
    frame = frame.sort_values(["score", "solution"], ascending=[False, True], kind="stable")
    frame.insert(0, "rank", rank(list(frame["score"]), list(frame["reference"])))
    frame["rank"] = frame["rank"].astype("Int64")
    return frame.reset_index(drop=True)


def text_table(frame) -> str:
    """Plain-text table for the terminal: rank, solution, score and the six KPIs."""
    sig = "rank_lo" in frame.columns
    widths = [max(12, len(k) + 2) for k in KPI_KEYS]  # a column name is never cut (generalization)
    head = (f"{'rank':>4}  " + (f"{'95% rank':>9} {'group':<6}" if sig else "")
            + f"{'solution':<28}{'score':>7}" + "".join(f"{k:>{w}}" for k, w in zip(KPI_KEYS, widths)))
    lines = [head, "-" * len(head)]
    for rec in frame.to_dict("records"):
        extra = f"{interval_text(rec):>9} {group_text(rec):<6}" if sig else ""
        lines.append(f"{int_text(rec['rank']):>4}  {extra}{rec['solution'][:27]:<28}{rec['score']:>7.2f}"
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
    relative robustness (mce column) compares with (scoring.analyses.leaderboard).
    """
    from challenge_welding.scoring.analyses import leaderboard as leaderboard_analyses
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
    matrices = page_matrices(metrics) if metrics else None
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
