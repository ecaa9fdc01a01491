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
  each file's bytes hash to the listed value;
* the folder holds nothing else (:func:`check_contents`): only the manifest's
  files, ``ingestion.json``, the logs it names under ``logs``, the entries it
  names under ``preexisting`` (there before the run: on Codabench, the copy of
  the submission the worker puts in the output) and the worker's ``metadata``
  (a submission's copy of an evaluation image, or any planted file or folder,
  is refused by name).

Any failure is a :class:`SubmissionFailed` (exit status 1) with one line. The
bytes that were hashed are the bytes that are parsed (:func:`check_file` runs
on the bytes the scorer then parses), so a file cannot change between the
check and the scoring.
Predictions made by hand for experiments skip these checks with
``score --unverified``, which the Codabench scoring program refuses.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from challenge_welding.contract.checked import FileRefused, read_json
from challenge_welding.contract.errors import ChallengeError, SubmissionFailed
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


def check_interrupted(predictions_dir) -> None:
    """Refuse, in one line naming the sets it did not finish, a folder whose ingestion was
    interrupted (Ctrl-C, SIGTERM: ingestion.json's status "interrupted"). Not the submission's
    fault, so bad input (exit status 2), not a failed submission (1); its finished sets are
    not scored alone: a score needs every set. No report, or an unreadable one: the other
    checks speak."""
    path = Path(predictions_dir) / REPORT_FILE
    try:
        report = read_json(path)  # checked: sizes and nesting before parsing
    except (FileRefused, OSError):
        return
    if not isinstance(report, dict) or report.get("status") != "interrupted":
        return
    sets = report.get("sets") if isinstance(report.get("sets"), dict) else {}
    undone = sorted(str(n) for n, info in sets.items()
                    if not (isinstance(info, dict) and info.get("status") == "ok"))
    raise ChallengeError(f"{path}: the ingestion was interrupted before it finished the "
                         f"set(s) {', '.join(undone) or '(unknown)'}; nothing is scored: "
                         "run ingest again (it redoes every set)")


def read_report(predictions_dir) -> dict:
    """ingestion.json, required with status ok and a manifest mapping."""
    path = Path(predictions_dir) / REPORT_FILE
    if not path.is_file():
        raise SubmissionFailed(f"no {REPORT_FILE} in {predictions_dir}: only predictions written by the "
                               "ingestion (or `virtual`) are scored; for hand-made predictions use "
                               "`score --unverified`")
    try:
        report = read_json(path)  # sizes and nesting checked before parsing (contract.checked)
    except FileRefused as exc:
        raise SubmissionFailed(str(exc)) from None
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
    check_contents(predictions_dir, report)
    return report


def check_contents(predictions_dir, report: dict) -> None:
    """Refuse a prediction folder holding an entry the ingestion did not write."""
    logs = report.get("logs")
    logs = [v for v in logs.values() if isinstance(v, str)] if isinstance(logs, dict) else []
    # entries there before the ingestion ran (on Codabench: the submission's copy the worker
    # puts in the output); the ingestion removed anything new inside them
    before = report.get("preexisting")
    before = [v for v in before if isinstance(v, str)] if isinstance(before, list) else []
    allowed = set(report[MANIFEST_KEY]) | set(logs) | set(before) | {REPORT_FILE, WORKER_METADATA}
    extra = sorted(p.name for p in Path(predictions_dir).iterdir() if p.name not in allowed)
    if extra:
        raise SubmissionFailed(f"{Path(predictions_dir) / extra[0]} is not in the manifest of "
                               f"{REPORT_FILE}: the ingestion did not write it"
                               + (f" (and {len(extra) - 1} more)" if len(extra) > 1 else ""))


def check_file(predictions_dir, report: dict, name: str, content: bytes) -> None:
    """Refuse ``content`` (the bytes of PRED/name, about to be parsed) unless the manifest lists its sha256."""
    manifest = report[MANIFEST_KEY]
    if name not in manifest:
        raise SubmissionFailed(f"{name} is not in the manifest of {Path(predictions_dir) / REPORT_FILE}: "
                               "it was not written by the ingestion")
    if sha256_bytes(content) != manifest[name].lower():
        raise SubmissionFailed(f"{Path(predictions_dir) / name} changed after the ingestion wrote it "
                               "(sha256 differs from its manifest)")


def sandbox_line(report: dict | None) -> str:
    """One line on what confined the submission (ingestion.json's ``sandbox`` section)."""
    if report is None:
        return "sandbox: unknown (predictions not verified)"
    if report.get("origin") == "virtual":
        return "sandbox: none needed (virtual predictions, no participant code)"
    box = report.get("sandbox")
    if not isinstance(box, dict) or not box:
        return "sandbox: none recorded (ingestion without a sandbox section)"
    abi = box.get("landlock_abi")
    run = box.get("run") if isinstance(box.get("run"), dict) else {}
    lay = box.get("layers") if isinstance(box.get("layers"), dict) else {}
    parts = [f"Landlock ABI {abi}" if abi else "UNSAFE, files not confined (--unsafe-unconfined)"
             if box.get("unsafe_unconfined") else "no Landlock, files in a mount namespace"
             if lay.get("files_confined") else "NO Landlock (files not confined)"]
    if lay.get("namespaces"):
        parts.append("namespaces: " + ", ".join(map(str, lay["namespaces"])))
    if lay.get("capabilities") == "none":
        parts.append("no capabilities")
    if run.get("net"):
        parts.append(f"network: {run['net']}")
    if run.get("scoping"):
        parts.append("signals scoped")
    if run.get("seccomp"):
        parts.append("seccomp signal/process-group guard")
    if box.get("max_processes"):
        parts.append(f"at most {box['max_processes']} processes")
    return "sandbox: " + "; ".join(parts)


def check_sandbox(predictions_dir, config: dict, verify: bool = True) -> str:
    """The one line on what confined the submission, for the results page; refuses (one line)
    predictions whose ingestion ran without Landlock when the scoring config's
    ``integrity.require_sandbox`` says so. Virtual predictions ran no code."""
    if not verify:
        return sandbox_line(None)
    path = Path(predictions_dir) / REPORT_FILE
    try:
        report = read_json(path)
    except FileRefused:
        report = {}
    report = report if isinstance(report, dict) else {}
    box = report.get("sandbox")
    if config.integrity.require_sandbox and report.get("origin") != "virtual" \
            and not (isinstance(box, dict) and (box.get("landlock_abi") or (
                isinstance(box.get("layers"), dict) and box["layers"].get("files_confined")))):
        raise SubmissionFailed(f"{path}: the submission ran without a sandbox (no Landlock) and "
                               "the scoring config requires one (integrity.require_sandbox)")
    return sandbox_line(report)


def provenance_of(report: dict | None) -> dict:
    """{"verified": bool, "origin": ...} for details.json (report None: not verified)."""
    if report is None:
        return {"verified": False, "origin": "unverified (score --unverified)"}
    return {"verified": True, "origin": str(report.get("origin", "ingestion"))}
