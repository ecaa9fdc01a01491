"""Read and validate the reference sets and the predictions, merged into one frame per set.

Every problem found is one line naming the set, the column and a sample id; all
problems of all sets are gathered and raised together as one ChallengeError, so
a participant fixes everything in one go. The rules of a row are
``challenge_welding.contract.prediction_rules`` (shared with the ingestion); recoverable
issues (probabilities off 1 by more than the tolerance, missing probabilities
or OOD scores, negative OOD scores clipped to 0) become warnings.
"""

from __future__ import annotations

import io
from pathlib import Path

from dataclasses import dataclass

import numpy as np
import pandas as pd

from challenge_welding.contract.names import (
    CLASSES, OOD_COLUMN, OOD_SETS, PERTURBATIONS, PROBA_COLUMNS, REFERENCE_BASE_COLUMNS, REFERENCE_COLUMNS, SET_NAMES,
    STATES,
)
from challenge_welding.contract.checked import FileRefused, read_json
from challenge_welding.contract.errors import ChallengeError, SubmissionFailed
from challenge_welding.contract.files import sha256_bytes
from challenge_welding.contract.prediction_rules import (
    PROBA_SUM_TOL_TEXT, check_ood_scores, check_probabilities, label_codes,
)
from challenge_welding.scoring.provenance import (
    check_file, check_interrupted, check_worker_metadata, provenance_of, read_report,
)



def _sample(ids, mask):
    """First offending sample id and the count, for messages."""
    hit = np.flatnonzero(np.asarray(mask))
    first = ids.iloc[hit[0]] if hasattr(ids, "iloc") else ids[hit[0]]
    return first, len(hit)


def _line(name, column, what, ids, mask):
    sid, count = _sample(ids, mask)
    return f"set '{name}', column '{column}': {what} ({count} row{'s' * (count > 1)}, e.g. sample_id {sid!r})"


def _read_parquet(source, name, kind, path=None):
    """A parquet file (a path, or its bytes in a buffer named by ``path``); unreadable -> one line."""
    error = SubmissionFailed if kind == "predictions" else ChallengeError
    try:
        return pd.read_parquet(source)
    except Exception as exc:  # pyarrow raises several types for a corrupt file
        raise error(f"set '{name}': cannot read {kind} file {path or source} ({type(exc).__name__}: {exc})") from None


def read_reference(reference_dir, name, data: bytes | None = None, labelling: dict | None = None) -> pd.DataFrame:
    """One reference set, checked: labels KO/OK, the set's extra columns, unique ids.

    ``data``: the file's bytes when the caller has read them already (to hash them: the file
    is then read once). ``labelling``: a dict that receives {name: {sample_id: labelling_type}}
    when the file has that column (the analyses' annotators; never scored).
    """
    path = Path(reference_dir) / f"{name}.parquet"
    if data is None and not path.is_file():
        raise ChallengeError(f"set '{name}': reference file {path} is missing")
    ref = _read_parquet(path if data is None else io.BytesIO(data), name, "reference", path)
    if labelling is not None and "labelling_type" in ref.columns:
        labelling[name] = dict(zip(ref["sample_id"].astype(str), ref["labelling_type"].astype(str)))
    needed = REFERENCE_BASE_COLUMNS + REFERENCE_COLUMNS[name]
    missing = [c for c in needed if c not in ref.columns]
    if missing:
        raise ChallengeError(f"set '{name}': reference file {path} has no column '{missing[0]}'")
    ref = ref[list(needed)].copy()
    ref["sample_id"] = ref["sample_id"].astype(str)
    ids = ref["sample_id"]
    problems = []
    dup = ids.duplicated().to_numpy()
    if dup.any():
        problems.append(_line(name, "sample_id", "duplicate ids in the reference", ids, dup))
    codes, _ = label_codes(ref["class"], CLASSES)
    bad = codes < 0
    if bad.any():
        problems.append(_line(name, "class", "reference label outside KO/OK", ids, bad))
    # categoricals: small, fast to compare and to code (labels are a closed vocabulary)
    ref["class"] = pd.Categorical.from_codes(np.maximum(codes, 0), CLASSES)
    ref["welding-seams"] = ref["welding-seams"].astype(str)
    if name == "robustness":
        names = list(PERTURBATIONS) + ["none"]
        pert = pd.Index(names).get_indexer(ref["perturbation"])
        bad = pert < 0
        if bad.any():
            problems.append(_line(name, "perturbation", "unknown perturbation type", ids, bad))
        level = pd.to_numeric(ref["level"], errors="coerce").to_numpy(dtype=float)
        bad = ~np.isfinite(level)
        if bad.any():
            problems.append(_line(name, "level", "level not a finite number", ids, bad))
        ref["perturbation"] = pd.Categorical.from_codes(np.maximum(pert, 0), names)
        ref["level"] = level
    if "ood" in ref.columns:
        ood = pd.to_numeric(ref["ood"], errors="coerce").to_numpy(dtype=float)
        bad = ~np.isin(ood, [0.0, 1.0])
        if bad.any():
            problems.append(_line(name, "ood", "OOD label outside 0/1", ids, bad))
        ref["ood"] = np.where(bad, 0, ood).astype(int)
    if "position" in ref.columns:
        ref = ref.sort_values("position", kind="stable").reset_index(drop=True)
    if problems:
        raise ChallengeError(f"reference file {path}:\n" + "\n".join(problems))
    return ref


def _validate_predictions(pred, ref, name, problems, warnings):
    """Check one prediction frame against its reference.

    Returns None when a problem was found (listed in ``problems``), else the
    clean columns aligned to the reference rows: {"predicted_state": codes,
    "proba": (n, 3) or None for one-hot, "ood": scores, "time": seconds}.
    Problems and warnings are listed in a fixed order: ids, state and time, probabilities, OOD scores.
    """
    if "sample_id" not in pred.columns:
        problems.append(f"set '{name}', column 'sample_id': column missing from the predictions")
        return None
    before = len(problems)
    ids = pred["sample_id"].astype(str).reset_index(drop=True)
    where = _check_ids(pred, ref, ids, name, problems)
    codes, t = _check_state_and_time(pred, ids, name, problems, warnings)
    values = _check_probabilities(pred, ids, name, problems, warnings)
    s = _check_ood_scores(pred, ids, name, problems, warnings)
    if len(problems) > before:
        return None
    # align to the reference rows (ids are a permutation of the reference's here)
    order = np.empty(len(where), dtype=np.int64)
    order[where] = np.arange(len(where))
    return {"predicted_state": codes[order], "proba": None if values is None else values[order],
            "ood": s[order], "time": t[order]}


def _check_ids(pred, ref, ids, name, problems) -> np.ndarray:
    """Null, duplicate, unknown and missing sample ids; returns each row's index in the reference (-1: unknown)."""
    null_ids = pred["sample_id"].isna().to_numpy()
    if null_ids.any():
        problems.append(_line(name, "sample_id", "missing (null) sample id", np.arange(len(ids)), null_ids))
    dup = ids.duplicated(keep="first").to_numpy()
    if dup.any():
        problems.append(_line(name, "sample_id", "duplicate sample id", ids, dup))
    where = pd.Index(ref["sample_id"]).get_indexer(ids)  # hash lookup; the reference ids are unique
    unknown = where < 0
    if unknown.any():
        problems.append(_line(name, "sample_id", "unknown sample id (not in the evaluation set)", ids, unknown))
    absent = np.ones(len(ref), dtype=bool)
    absent[where[~unknown]] = False
    if absent.any():
        problems.append(_line(name, "sample_id", "no prediction for this sample", ref["sample_id"], absent))
    return where


def _check_state_and_time(pred, ids, name, problems, warnings):
    """(label codes, seconds per image) of the rows, None for a column missing."""
    for column in ("predicted_state", "compute_time"):
        if column not in pred.columns:
            problems.append(f"set '{name}', column '{column}': column missing from the predictions")
    codes = t = None
    if "predicted_state" in pred.columns:
        raw = pred["predicted_state"].reset_index(drop=True)
        codes, renamed = label_codes(raw, STATES)
        bad = codes < 0
        if bad.any():
            value = raw.iloc[np.flatnonzero(bad)[0]]
            problems.append(_line(name, "predicted_state", f"label outside KO/OK/UNKNOWN (e.g. {value!r})",
                                  ids, bad))
        if renamed.any():
            warnings.append(_line(name, "predicted_state", "labels normalised (case, whitespace)", ids, renamed))
    if "compute_time" in pred.columns:
        t = pd.to_numeric(pred["compute_time"], errors="coerce").to_numpy(dtype=float)
        bad = ~np.isfinite(t) | (t < 0)
        if bad.any():
            problems.append(_line(name, "compute_time", "missing, infinite or negative time", ids, bad))
    return codes, t


def _check_probabilities(pred, ids, name, problems, warnings):
    """The (n, 3) probabilities by the shared row rules (prediction_rules), None when none are given."""
    present = [c for c in PROBA_COLUMNS if c in pred.columns]
    values = (pred[present].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=float)
              if present else np.empty((len(pred), 0)))
    if not present or np.isnan(values).all():
        warnings.append(f"set '{name}': no probabilities given: one-hot of predicted_state used")
        return None
    if len(present) < 3:
        problems.append(f"set '{name}', column '{next(c for c in PROBA_COLUMNS if c not in present)}': "
                        "probability column missing (give all three or none)")
        return values
    check = check_probabilities(values)  # the shared row rules, worded per column
    for j, column in enumerate(PROBA_COLUMNS):
        for mask, what in ((check.nan[:, j], "missing (NaN) probability"),
                           (check.inf[:, j], "infinite probability"),
                           (check.negative[:, j], "negative probability")):
            if mask.any():
                problems.append(_line(name, column, what, ids, mask))
    if check.zero_sum.any():
        problems.append(_line(name, "scores KO", "probabilities sum to 0", ids, check.zero_sum))
    if check.infinite_sum.any():
        problems.append(_line(name, "scores KO", "probabilities sum to infinity (each row must sum to 1)", ids,
                              check.infinite_sum))
    if check.renormalised.any():
        warnings.append(_line(name, "scores KO", f"probabilities off 1 by more than {PROBA_SUM_TOL_TEXT}: "
                              "renormalised", ids, check.renormalised))
    return check.values


def _check_ood_scores(pred, ids, name, problems, warnings) -> np.ndarray:
    """The OOD scores (0 when none are given; negative ones clipped to 0)."""
    s = (pd.to_numeric(pred[OOD_COLUMN], errors="coerce").to_numpy(dtype=float)
         if OOD_COLUMN in pred.columns else np.full(len(pred), np.nan))
    if OOD_COLUMN not in pred.columns or np.isnan(s).all():
        if name in OOD_SETS:
            warnings.append(f"set '{name}': no OOD scores given: 0 used (AUROC 0.5)")
        return np.zeros(len(pred))
    non_finite, negative, s = check_ood_scores(s)
    if non_finite.any():
        problems.append(_line(name, OOD_COLUMN, "missing (NaN) or infinite OOD score", ids, non_finite))
    if negative.any():
        warnings.append(_line(name, OOD_COLUMN, "negative OOD scores clipped to 0", ids, negative))
    return s


def _frame(ref, clean):
    """The merged frame of one set: reference columns then the prediction columns."""
    frame = ref.copy()
    codes = clean["predicted_state"]
    frame["predicted_state"] = pd.Categorical.from_codes(codes, STATES)
    proba = np.eye(3)[codes] if clean["proba"] is None else clean["proba"]
    for j, column in enumerate(PROBA_COLUMNS):
        frame[column] = proba[:, j]
    frame[OOD_COLUMN] = clean["ood"]
    frame["compute_time"] = clean["time"]
    return frame


def ingestion_summary(predictions_dir) -> str:
    """A short note on the ingestion status, for messages about missing sets."""
    path = Path(predictions_dir) / "ingestion.json"
    try:
        info = read_json(path)
    except FileRefused:
        return ""
    if not isinstance(info, dict):
        return ""
    status = info.get("status") if isinstance(info.get("status"), str) else None
    errors = info.get("errors") if isinstance(info.get("errors"), list) else []
    if status and status != "ok":
        first = errors[0] if errors else ""
        return f" (ingestion status: {status}{': ' + str(first) if first else ''})"
    return ""


@dataclass
class Inputs:
    """What the scorer read: merged frames, warnings, file hashes, and how the predictions were verified."""

    frames: dict
    warnings: list
    hashes: dict      # {set: {"reference": sha256, "predictions": sha256}}
    provenance: dict  # {"verified": bool, "origin": str}
    labelling: dict   # {set: {sample_id: labelling_type}} for the reference sets that carry it (never scored)


def read_frames(reference_dir, predictions_dir, verify=True):
    """``(frames, warnings, hashes)`` of :func:`read_inputs`."""
    inputs = read_inputs(reference_dir, predictions_dir, verify)
    return inputs.frames, inputs.warnings, inputs.hashes


def read_inputs(reference_dir, predictions_dir, verify=True) -> Inputs:
    """Read the six sets, verified (scoring.provenance) unless ``verify`` is False.

    ``frames``: {set: DataFrame} with the reference columns, predicted_state,
    the three probabilities (filled and renormalised), the OOD score and
    compute_time. ``hashes``: {set: {"reference": sha256, "predictions": sha256}}.
    With ``verify`` (the default) only predictions the ingestion wrote are
    accepted (scoring.provenance).
    Raises SubmissionFailed for missing, unverified or invalid predictions and
    ChallengeError for bad reference data, listing every problem (set, column, sample id).
    """
    reference_dir, predictions_dir = Path(reference_dir), Path(predictions_dir)
    if verify:
        check_worker_metadata(predictions_dir)
    check_interrupted(predictions_dir)
    missing = [n for n in SET_NAMES if not (predictions_dir / f"{n}.parquet").is_file()]
    if missing:
        raise SubmissionFailed(
            f"predictions missing for set{'s' * (len(missing) > 1)} {', '.join(missing)}: "
            f"no {predictions_dir / (missing[0] + '.parquet')}{ingestion_summary(predictions_dir)}")
    report = read_report(predictions_dir) if verify else None
    references, predictions, hashes, labelling = {}, {}, {}, {}
    for name in SET_NAMES:  # one file's bytes at a time: hashed, checked, then parsed (each read once)
        ref_file = reference_dir / f"{name}.parquet"
        ref_data = ref_file.read_bytes() if ref_file.is_file() else None
        references[name] = read_reference(reference_dir, name, ref_data, labelling)
        data = (predictions_dir / f"{name}.parquet").read_bytes()
        if report is not None:
            check_file(predictions_dir, report, f"{name}.parquet", data)
        predictions[name] = _read_parquet(io.BytesIO(data), name, "predictions", predictions_dir / f"{name}.parquet")
        hashes[name] = {"reference": sha256_bytes(ref_data), "predictions": sha256_bytes(data)}
        del data, ref_data
    provenance = provenance_of(report)
    frames, warnings = frames_from(references, predictions, where=str(predictions_dir))
    if not provenance["verified"]:
        warnings.insert(0, f"predictions of {predictions_dir} not verified (score --unverified): "
                           "no check that the ingestion wrote them")
    return Inputs(frames, warnings, hashes, provenance, labelling)


def frames_from(references, predictions, where="predictions"):
    """Validate in-memory predictions against reference frames; return ``(frames, warnings)``."""
    frames, warnings, problems = {}, [], []
    for name in SET_NAMES:
        clean = _validate_predictions(predictions[name], references[name], name, problems, warnings)
        if clean is not None and not problems:
            frames[name] = _frame(references[name], clean)
    if problems:
        raise SubmissionFailed(f"invalid predictions in {where} ({len(problems)} problem"
                             f"{'s' * (len(problems) > 1)}):\n" + "\n".join(problems))
    return frames, warnings
