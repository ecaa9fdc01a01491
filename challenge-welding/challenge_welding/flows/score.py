"""Write the outputs of a scoring: scores.json, then details.json, then the page.

Used by the ``score`` and ``evaluate`` commands and the Codabench scoring
program. The numbers come from scoring (the score, then the extras), the page
from report, which only draws them (docs/architecture.md). scores.json is written first, so whatever happens in the report the score is
not lost; the extras and the page never change it (a failure there becomes a
warning and a plain fallback page); details.json is written once, after the
page, so it holds the page's warnings too.
"""

from __future__ import annotations

import html
import json
import sys
from pathlib import Path

from challenge_welding.contract.checked import json_text
from challenge_welding.contract.errors import ChallengeError
from challenge_welding.scoring.extras import compute_extras, sample_traces
from challenge_welding.report.html import render_report
from challenge_welding.scoring import draws
from challenge_welding.scoring.score import details_json, score_predictions, write_output

OUTPUT_FILES = ("scores.json", "details.json", "detailed_results.html")


def score(reference_dir, predictions_dir, output_dir, config_path=None, verify=True, traces=None,
          draws_path=None, baseline=None) -> dict:
    """Score PRED against DIR and write OUT/scores.json, OUT/details.json, OUT/detailed_results.html.

    ``verify=False`` (``score --unverified``) skips the provenance checks (said in
    the outputs). ``traces``: a parquet file for organisers with one row per
    sample (scoring.extras.sample_traces); it must lie outside OUT, whose files
    are published. ``baseline``: a scored folder (Solution-1's OUT) for the relative
    robustness of the analyses. ``draws_path``: also write the bootstrap's per-resample values
    there for the leaderboard's significance (scoring.draws; not inside OUT).
    Returns the scores.json content. Raises SubmissionFailed
    (exit 1) or ChallengeError (exit 2) before anything is written.
    """
    if traces is not None and _inside(Path(traces), Path(output_dir)):
        raise ChallengeError(f"--traces {traces} is inside the output folder {output_dir}, which is published: "
                             "per-sample traces give labels away; write them elsewhere")
    if draws_path is not None:  # a usage error before any work
        draws.check_unpublished(draws_path, output_dir)
    if baseline is not None:  # a usage error before any work (the analyses read it again, checked alike)
        from challenge_welding.scoring.analyses.sources import read_baseline
        read_baseline(baseline)
    scored = score_predictions(reference_dir, predictions_dir, config_path, verify, baseline=baseline)
    scores, details = scored.scores, scored.details
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_output(out / "scores.json", json_text(scores))
    if draws_path is not None:
        draws.save(draws_path, draws.build(scored.draws, scores, scored.reference_sha256, scored.config),
                   published_dir=out)
    try:
        details["extras"] = compute_extras(scored.frames, scored.config)
    except Exception as exc:  # noqa: BLE001 - the extras never change the score: report the failure
        details["warnings"].append(f"report extras failed: {type(exc).__name__}: {exc}")
    try:
        page = render_report(details, scored.config)
    except Exception as exc:  # noqa: BLE001 - same for the page
        details["warnings"].append(f"detailed results page failed: {type(exc).__name__}: {exc}")
        page = fallback_page(scores, exc)
    write_output(out / "details.json", details_json(details))
    write_output(out / "detailed_results.html", page)
    if traces is not None:
        Path(traces).parent.mkdir(parents=True, exist_ok=True)
        sample_traces(scored.frames, scored.config).to_parquet(traces, index=False)
    for w in details["warnings"]:
        print(f"warning: {w}", file=sys.stderr)
    return scores


def _inside(path: Path, folder: Path) -> bool:
    return path.resolve().is_relative_to(folder.resolve())


def fallback_page(scores: dict, exc: Exception) -> str:
    """A plain page with the scores, when the detailed one cannot be drawn."""
    return ("<!doctype html><html><head><meta charset='utf-8'><title>Detailed results</title></head><body>"
            f"<h1>Score {scores['score']:.2f}</h1><p>The detailed page could not be rendered: "
            f"{html.escape(type(exc).__name__)}.</p><pre>{html.escape(json.dumps(scores, indent=1))}</pre>"
            "</body></html>")
