"""Write the outputs of a scoring: scores.json, then details.json, then the page.

Used by the ``score`` and ``evaluate`` commands and the Codabench scoring
program. The numbers come from scoring (the score, then what is reported beyond it:
scoring.analyses, computed there once from the frames it read), the page from report,
which only draws them (docs/architecture.md). scores.json is written first
(contract.checked.write_scores, its one writer), so whatever happens in the report the
score is not lost; the page never changes it (a failure there becomes a warning and a
plain fallback page); details.json is written once, after the page, so it holds the
page's warnings too.
"""

from __future__ import annotations

import html
import json
import sys
from pathlib import Path

from challenge_welding.contract.checked import plain, write_scores
from challenge_welding.contract.errors import ChallengeError, OutputError
from challenge_welding.contract.files import atomic_path, make_folder, remove_entry, writing
from challenge_welding.scoring.analyses.extras import sample_traces
from challenge_welding.report.html import render_report
from challenge_welding.contract import draws
from challenge_welding.scoring.score import details_json, score_predictions, write_output

OUTPUT_FILES = ("scores.json", "details.json", "detailed_results.html")


def score(reference_dir, predictions_dir, output_dir, config_path=None, verify=True, traces=None,
          draws_path=None, baseline=None) -> dict:
    """:func:`score_and_details`'s scores.json content (the details stay on disk)."""
    return score_and_details(reference_dir, predictions_dir, output_dir, config_path, verify, traces,
                             draws_path, baseline)[0]


def score_and_details(reference_dir, predictions_dir, output_dir, config_path=None, verify=True, traces=None,
                      draws_path=None, baseline=None) -> tuple[dict, dict]:
    """Score PRED against DIR and write OUT/scores.json, OUT/details.json, OUT/detailed_results.html.

    ``verify=False`` (``score --unverified``) skips the provenance checks (said in
    the outputs). ``traces``: a parquet file for organisers with one row per
    sample (scoring.analyses.extras.sample_traces); it must lie outside OUT, whose files
    are published. ``baseline``: a scored folder (Solution-1's OUT) for the relative
    robustness of the analyses. ``draws_path``: also write the bootstrap's per-resample values
    there for the leaderboard's significance (contract.draws; not inside OUT).
    Returns the scores.json and details.json contents, as written (the command prints them
    without reading back what it just wrote). Raises SubmissionFailed
    (exit 1) or ChallengeError (exit 2) before anything is written.
    """
    if traces is not None and _inside(Path(traces), Path(output_dir)):
        raise ChallengeError(f"--traces {traces} is inside the output folder {output_dir}, which is published: "
                             "per-sample traces give labels away; write them elsewhere")
    if draws_path is not None:  # a usage error before any work
        draws.check_unpublished(draws_path, output_dir)
    scored = score_predictions(reference_dir, predictions_dir, config_path, verify, baseline=baseline)
    out = make_folder(output_dir, "the scoring output")
    # a previous run's files go first; a write fault then removes this run's: OUT never holds
    # a scores.json without the page and details.json of the same run
    with writing(out, "the scoring output"):
        for name in OUTPUT_FILES:
            remove_entry(out / name)
    try:
        return _write(scored, out, traces, draws_path)
    except OutputError:
        for name in OUTPUT_FILES:
            remove_entry(out / name)
        raise


def _write(scored, out: Path, traces, draws_path) -> tuple[dict, dict]:
    scores, details = scored.scores, scored.details
    write_scores(out / "scores.json", scores)  # the one writer of the format (contract.checked)
    if draws_path is not None:
        draws.save(draws_path, draws.build(scored.draws, scores, scored.reference_sha256, scored.config),
                   published_dir=out)
    try:
        page = render_report(details, scored.config)
    except Exception as exc:  # the page never changes the score: a warning and a plain page
        details["warnings"].append(f"detailed results page failed: {type(exc).__name__}: {exc}")
        page = fallback_page(scores, exc)
    details = plain(details)  # as written: numpy values as Python ones, NaN as null
    write_output(out / "details.json", details_json(details))
    write_output(out / "detailed_results.html", page)
    if traces is not None:
        make_folder(Path(traces).parent, "the traces")
        with atomic_path(traces, "the traces") as tmp:
            sample_traces(scored.frames, scored.config).to_parquet(tmp, index=False)
    for w in details["warnings"]:
        print(f"warning: {w}", file=sys.stderr)
    return scores, details


def _inside(path: Path, folder: Path) -> bool:
    return path.resolve().is_relative_to(folder.resolve())


def fallback_page(scores: dict, exc: Exception) -> str:
    """A plain page with the scores, when the detailed one cannot be drawn."""
    return ("<!doctype html><html><head><meta charset='utf-8'><title>Detailed results</title></head><body>"
            f"<h1>Score {scores['score']:.2f}</h1><p>The detailed page could not be rendered: "
            f"{html.escape(type(exc).__name__)}.</p><pre>{html.escape(json.dumps(scores, indent=1))}</pre>"
            "</body></html>")
