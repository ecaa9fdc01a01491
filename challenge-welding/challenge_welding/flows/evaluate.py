"""Evaluate one submission end to end: ingest it, then score its predictions (flows.score).

OUT/predictions/ holds the ingestion output (<set>.parquet, ingestion.json,
logs); OUT/ holds scores.json, details.json and detailed_results.html. A
failure of either step is one error printed once (the ingestion prints its own;
this module then says where its log is); what was computed before stays on disk.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from challenge_welding.contract.errors import ChallengeError, SubmissionFailed
from challenge_welding.contract.files import make_folder, writing
from challenge_welding.flows.score import score
from challenge_welding.ingestion.options import IngestOptions
from challenge_welding.ingestion.run.ingest import ingest
from challenge_welding.contract.draws import draws_path


def evaluate(submission, data, output, draws=True, options: IngestOptions | None = None,
             **changes) -> dict:
    """Ingest ``submission`` over ``data/input_data``, score against ``data/reference_data``.

    ``options``: the ingestion's IngestOptions, ``changes`` options set by keyword on top of it.

    ``draws``: also write the per-resample values beside OUT, as ``<OUT>.draws.npz`` (contract.draws).

    Returns the scores.json content. Raises SubmissionFailed (exit 1) when the
    submission fails (ingestion status not "ok", predictions refused by the
    scorer), ChallengeError (exit 2) for bad data or options.
    """
    submission, data, output = Path(submission), Path(data), Path(output)
    input_data, reference = data / "input_data", data / "reference_data"
    for folder in (input_data, reference):
        if not folder.is_dir():
            raise ChallengeError(f"{folder} not found: --data must be a build-sets output "
                                 "(input_data/ and reference_data/)")
    if not submission.exists():
        raise ChallengeError(f"submission {submission} not found")
    fault = output_fault(submission, output)
    if fault:
        raise ChallengeError(fault)
    predictions = output / "predictions"
    make_folder(output, "the evaluation output")  # a file in the way or read-only: one line, 3
    draws_file = draws_path(output)
    with writing(draws_file, "the draws"):
        draws_file.unlink(missing_ok=True)  # never leave a previous run's draws beside new scores
    options = IngestOptions(**changes) if options is None else dataclasses.replace(options, **changes)
    report = ingest(submission, input_data, predictions, options)
    if report.get("status") != "ok":
        log = predictions / "ingestion.log"
        if options.verbose:  # the ingestion printed its error: say where, not what again
            raise SubmissionFailed(f"the ingestion of {submission} failed (error above; log {log}); "
                                   "nothing was scored")
        errors = report.get("errors") or ["unknown failure"]
        raise SubmissionFailed(f"the ingestion of {submission} failed: {str(errors[0]).splitlines()[0]} "
                               f"(log {log}); nothing was scored")
    return score(reference, predictions, output, draws_path=draws_file if draws else None)


def output_fault(submission, output) -> str | None:
    """The line refusing an OUT folder that is the submission or lies inside it, else None.

    Results written there (predictions, scores, the page, ``<OUT>.draws.npz`` beside OUT)
    would ship inside the participant's next zip of that folder. Compared after resolving
    symbolic links, and also with case folded: ``OUT/Solution-1`` and ``OUT/solution-1`` are
    two folders on Linux but one on macOS and Windows (case-insensitive file systems).
    Example: submission ``S``, output ``S`` or ``S/results`` -> refused; ``S-results`` -> None.
    """
    sub, out = Path(submission).resolve(), Path(output).resolve()
    suggestion = sub.with_name(f"{sub.name}-results")
    if out == sub or sub in out.parents:
        return (f"--output {output}: inside the submission {submission} (its results would ship "
                f"in the submission's next zip): write them elsewhere, e.g. --output {suggestion}")
    folded = Path(str(out).casefold())
    if folded == Path(str(sub).casefold()) or Path(str(sub).casefold()) in folded.parents:
        return (f"--output {output}: the submission {submission} on macOS and Windows (the "
                "names differ only by case), so its results would ship in the submission's next "
                f"zip: write them elsewhere, e.g. --output {suggestion}")
    return None
