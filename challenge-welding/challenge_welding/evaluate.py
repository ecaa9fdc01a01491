"""Evaluate one submission end to end: ingest it, then score its predictions.

OUT/predictions/ holds the ingestion output (<set>.parquet, ingestion.json,
logs); OUT/ holds scores.json, details.json and detailed_results.html. Any
failure of either step is one ChallengeError naming the step and where its log
is; what was computed before stays on disk.
"""

from __future__ import annotations

from pathlib import Path

from challenge_welding.errors import ChallengeError, SubmissionFailed


def evaluate(submission, data, output, **ingest_options) -> dict:
    """Ingest ``submission`` over ``data/input_data``, score against ``data/reference_data``.

    Returns the scores.json content. Raises ChallengeError when the submission
    fails (ingestion status not "ok") or the score cannot be computed.
    """
    from challenge_welding.ingestion.run import ingest
    from challenge_welding.scoring.score import score

    submission, data, output = Path(submission), Path(data), Path(output)
    input_data, reference = data / "input_data", data / "reference_data"
    for folder in (input_data, reference):
        if not folder.is_dir():
            raise ChallengeError(f"{folder} not found: --data must be a build-sets output "
                                 "(input_data/ and reference_data/)")
    if not submission.exists():
        raise ChallengeError(f"submission {submission} not found")
    predictions = output / "predictions"
    report = ingest(submission, input_data, predictions, **ingest_options)
    if report.get("status") != "ok":
        errors = report.get("errors") or ["unknown failure"]
        first = errors[0] if isinstance(errors[0], str) else str(errors[0])
        raise SubmissionFailed(f"ingestion of {submission} failed: {first.splitlines()[0]} "
                             f"(see {predictions / 'ingestion.log'})")
    try:
        return score(reference, predictions, output)
    except ChallengeError as exc:
        raise ChallengeError(f"scoring of {predictions} failed: {exc}") from exc
