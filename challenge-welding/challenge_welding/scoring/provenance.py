"""Score only what the ingestion wrote: the checks that tie a prediction folder to its ingestion.

On Codabench the submission runs as the same user as the ingestion and can
write the prediction folder, and a submission carrying its own ``metadata.yaml``
is run by the worker as a second container beside the ingestion. So before a
prediction is read, the scorer requires (issue 10, docs/contracts.md):

* where the worker's ``metadata`` file (YAML, written by Codabench after the
  ingestion; the worker refuses to run if one already exists, so a submission
  cannot forge it) is present: ``ingestionExitCode: 0``;
* ``ingestion.json`` with ``status: ok`` (written by the ingestion at its very
  end, after every process of the submission is dead);
* its ``manifest`` ({"<set>.parquet": sha256 hex}) lists every set file, and
  each file's bytes hash to the listed value.

Any failure is a :class:`SubmissionFailed` (exit status 1) with one line. The
bytes that were hashed are the bytes that are parsed (:func:`check_file` runs
on the bytes the scorer then parses), so a file cannot change between the
check and the scoring.
Predictions made by hand for experiments skip these checks with
``score --unverified``, which the Codabench scoring program refuses.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from challenge_welding.contract.errors import SubmissionFailed
from challenge_welding.contract.files import sha256_bytes

REPORT_FILE = "ingestion.json"
WORKER_METADATA = "metadata"  # written by Codabench's compute worker into the prediction output
MANIFEST_KEY = "manifest"


def manifest_of(folder, file_names) -> dict:
    """{file name: sha256 hex} of the given files of ``folder`` (what a writer puts in its report)."""
    return {name: sha256_bytes((Path(folder) / name).read_bytes()) for name in file_names}


def check_worker_metadata(predictions_dir) -> None:
    """Refuse the folder when Codabench's worker says the ingestion did not exit with 0."""
    path = Path(predictions_dir) / WORKER_METADATA
    if not path.is_file():
        return
    try:
        meta = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise SubmissionFailed(f"{path}: the worker's metadata is unreadable ({type(exc).__name__})") from None
    tracks = meta if isinstance(meta, list) else [meta]  # the worker writes a list for multi-track runs
    codes = [t.get("ingestionExitCode") if isinstance(t, dict) else None for t in tracks]
    if not codes or any(code != 0 for code in codes):
        shown = codes[0] if len(codes) == 1 else codes
        raise SubmissionFailed(f"the ingestion exited with status {shown} ({path}): "
                               "its prediction files are not scored")


def read_report(predictions_dir) -> dict:
    """ingestion.json, required with status ok and a manifest mapping."""
    path = Path(predictions_dir) / REPORT_FILE
    if not path.is_file():
        raise SubmissionFailed(f"no {REPORT_FILE} in {predictions_dir}: only predictions written by the "
                               "ingestion (or `virtual`) are scored; for hand-made predictions use "
                               "`score --unverified`")
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise SubmissionFailed(f"{path} is not valid JSON ({type(exc).__name__})") from None
    if not isinstance(report, dict):
        raise SubmissionFailed(f"{path} is not a JSON object")
    status = report.get("status")
    if status != "ok":
        errors = report.get("errors") or []
        first = str(errors[0]).splitlines()[0] if errors else ""
        raise SubmissionFailed(f"ingestion status is {status!r}, not 'ok' ({path})" + (f": {first}" if first else ""))
    manifest = report.get(MANIFEST_KEY)
    if not isinstance(manifest, dict) or not all(isinstance(v, str) for v in manifest.values()):
        raise SubmissionFailed(f"{path} has no manifest of the prediction files' sha256")
    return report


def check_file(predictions_dir, report: dict, name: str, content: bytes) -> None:
    """Refuse ``content`` (the bytes of PRED/name, about to be parsed) unless the manifest lists its sha256."""
    manifest = report[MANIFEST_KEY]
    if name not in manifest:
        raise SubmissionFailed(f"{name} is not in the manifest of {Path(predictions_dir) / REPORT_FILE}: "
                               "it was not written by the ingestion")
    if sha256_bytes(content) != manifest[name].lower():
        raise SubmissionFailed(f"{Path(predictions_dir) / name} changed after the ingestion wrote it "
                               "(sha256 differs from its manifest)")


def provenance_of(report: dict | None) -> dict:
    """{"verified": bool, "origin": ...} for details.json (report None: not verified)."""
    if report is None:
        return {"verified": False, "origin": "unverified (score --unverified)"}
    return {"verified": True, "origin": str(report.get("origin", "ingestion"))}
