"""Read and validate the reference sets and the predictions, merged into one frame per set.

Every problem found is one line naming the set, the column and a sample id; all
problems of all sets are gathered and raised together as one ChallengeError, so
a participant fixes everything in one go. Recoverable issues (probabilities off
1 by more than the tolerance, missing probabilities or OOD scores) become
warnings.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd

from challenge_welding.constants import PERTURBATIONS, SET_NAMES, STATES
from challenge_welding.errors import ChallengeError

PROBA_COLUMNS = ("scores KO", "scores OK", "scores UNKNOWN")
OOD_COLUMN = "scores OOD"
SUM_TOL = 1e-3
OOD_SETS = ("ood_real", "ood_synthetic", "drift")
REFERENCE_COLUMNS = {
    "performance": (), "generalization": (),
    "robustness": ("perturbation", "level"),
    "ood_real": ("ood",), "ood_synthetic": ("ood",), "drift": ("ood", "position"),
}


def sha256_file(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _sample(ids, mask):
    """First offending sample id and the count, for messages."""
    hit = np.flatnonzero(np.asarray(mask))
    return ids[hit[0]], len(hit)


def _line(name, column, what, ids, mask):
    sid, count = _sample(ids, mask)
    return f"set '{name}', column '{column}': {what} ({count} row{'s' * (count > 1)}, e.g. sample_id {sid!r})"


def _normalised_codes(values, names):
    """Codes of ``values`` in ``names`` (-1 outside), trying case/whitespace normalisation on misses.

    Returns (codes, renamed mask). Categorical codes are hash-based: fast on 10^6 rows.
    """
    values = pd.Series(values, dtype=object)
    codes = pd.Index(list(names)).get_indexer(values).astype(np.int16)
    renamed = np.zeros(len(values), dtype=bool)
    miss = np.flatnonzero(codes < 0)
    if miss.size:
        fixed = values.iloc[miss].astype(str).str.strip().str.upper()
        again = pd.Index(list(names)).get_indexer(fixed)
        ok = (again >= 0) & values.iloc[miss].notna().to_numpy()
        codes[miss[ok]] = again[ok]
        renamed[miss[ok]] = True
    return codes, renamed


def _read_parquet(path, name, kind):
    try:
        return pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises several types for a corrupt file
        raise ChallengeError(f"set '{name}': cannot read {kind} file {path} ({type(exc).__name__}: {exc})") from None


def read_reference(reference_dir, name) -> pd.DataFrame:
    """One reference set, checked: labels KO/OK, the set's extra columns, unique ids."""
    path = Path(reference_dir) / f"{name}.parquet"
    if not path.is_file():
        raise ChallengeError(f"set '{name}': reference file {path} is missing")
    ref = _read_parquet(path, name, "reference")
    needed = ("sample_id", "class", "welding-seams") + REFERENCE_COLUMNS[name]
    missing = [c for c in needed if c not in ref.columns]
    if missing:
        raise ChallengeError(f"set '{name}': reference file {path} has no column '{missing[0]}'")
    ref = ref[list(needed)].copy()
    ref["sample_id"] = ref["sample_id"].astype(str)
    ids = ref["sample_id"].to_numpy(dtype=object)
    problems = []
    if ref["sample_id"].duplicated().any():
        problems.append(_line(name, "sample_id", "duplicate ids in the reference", ids,
                              ref["sample_id"].duplicated().to_numpy()))
    codes, _ = _normalised_codes(ref["class"].to_numpy(dtype=object), ("KO", "OK"))
    bad = codes < 0
    if bad.any():
        problems.append(_line(name, "class", "reference label outside KO/OK", ids, bad))
    ref["class"] = np.array(["KO", "OK", "?"], dtype=object)[codes]
    ref["welding-seams"] = ref["welding-seams"].astype(str)
    if name == "robustness":
        pert = ref["perturbation"].to_numpy(dtype=object)
        bad = pd.Index(list(PERTURBATIONS) + ["none"]).get_indexer(pert) < 0
        if bad.any():
            problems.append(_line(name, "perturbation", "unknown perturbation type", ids, bad))
        level = pd.to_numeric(ref["level"], errors="coerce").to_numpy(dtype=float)
        bad = ~np.isfinite(level)
        if bad.any():
            problems.append(_line(name, "level", "level not a finite number", ids, bad))
        ref["perturbation"], ref["level"] = pert, level
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
    """Check one prediction frame against its reference; return a clean frame or None."""
    if "sample_id" not in pred.columns:
        problems.append(f"set '{name}', column 'sample_id': column missing from the predictions")
        return None
    pred = pred.copy()
    null_ids = pred["sample_id"].isna().to_numpy()
    pred["sample_id"] = pred["sample_id"].astype(str)
    ids = pred["sample_id"].to_numpy(dtype=object)
    if null_ids.any():
        problems.append(_line(name, "sample_id", "missing (null) sample id", np.arange(len(ids)), null_ids))
    dup = pred["sample_id"].duplicated(keep="first").to_numpy()
    if dup.any():
        problems.append(_line(name, "sample_id", "duplicate sample id", ids, dup))
    ref_ids = ref["sample_id"].to_numpy(dtype=object)
    where = pd.Index(ref_ids).get_indexer(ids)  # hash lookup; the reference ids are unique
    unknown = where < 0
    if unknown.any():
        problems.append(_line(name, "sample_id", "unknown sample id (not in the evaluation set)", ids, unknown))
    absent = np.ones(len(ref_ids), dtype=bool)
    absent[where[~unknown]] = False
    if absent.any():
        problems.append(_line(name, "sample_id", "no prediction for this sample", ref_ids, absent))

    for column in ("predicted_state", "compute_time"):
        if column not in pred.columns:
            problems.append(f"set '{name}', column '{column}': column missing from the predictions")
    if "predicted_state" in pred.columns:
        raw = pred["predicted_state"].to_numpy(dtype=object)
        codes, renamed = _normalised_codes(raw, STATES)
        bad = codes < 0
        if bad.any():
            value = raw[np.flatnonzero(bad)[0]]
            problems.append(_line(name, "predicted_state", f"label outside KO/OK/UNKNOWN (e.g. {value!r})",
                                  ids, bad))
        if renamed.any():
            warnings.append(_line(name, "predicted_state", "labels normalised (case, whitespace)", ids, renamed))
        pred["predicted_state"] = np.array(list(STATES) + ["?"], dtype=object)[codes]
    if "compute_time" in pred.columns:
        t = pd.to_numeric(pred["compute_time"], errors="coerce").to_numpy(dtype=float)
        bad = ~np.isfinite(t) | (t < 0)
        if bad.any():
            problems.append(_line(name, "compute_time", "missing, infinite or negative time", ids, bad))
        pred["compute_time"] = t

    present = [c for c in PROBA_COLUMNS if c in pred.columns]
    values = (pred[present].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=float)
              if present else np.empty((len(pred), 0)))
    if not present or np.isnan(values).all():
        warnings.append(f"set '{name}': no probabilities given: one-hot of predicted_state used")
        pred["_onehot"] = True
    elif len(present) < 3:
        problems.append(f"set '{name}', column '{next(c for c in PROBA_COLUMNS if c not in present)}': "
                        "probability column missing (give all three or none)")
    else:
        for j, column in enumerate(PROBA_COLUMNS):
            col = values[:, j]
            if np.isnan(col).any():
                problems.append(_line(name, column, "missing (NaN) probability", ids, np.isnan(col)))
            if np.isinf(col).any():
                problems.append(_line(name, column, "infinite probability", ids, np.isinf(col)))
            if (col < 0).any():
                problems.append(_line(name, column, "negative probability", ids, col < 0))
        total = values.sum(axis=1)
        finite = np.isfinite(total)
        zero = finite & (total == 0)
        if zero.any():
            problems.append(_line(name, "scores KO", "probabilities sum to 0", ids, zero))
        off = finite & ~zero & (np.abs(total - 1) > SUM_TOL)
        if off.any():
            warnings.append(_line(name, "scores KO", f"probabilities off 1 by more than {SUM_TOL:g}: renormalised",
                                  ids, off))
        with np.errstate(invalid="ignore", divide="ignore"):
            values = values / np.where(zero | ~finite, 1.0, total)[:, None]
        for j, column in enumerate(PROBA_COLUMNS):
            pred[column] = values[:, j]
        pred["_onehot"] = False

    s = (pd.to_numeric(pred[OOD_COLUMN], errors="coerce").to_numpy(dtype=float)
         if OOD_COLUMN in pred.columns else np.full(len(pred), np.nan))
    if OOD_COLUMN not in pred.columns or np.isnan(s).all():
        if name in OOD_SETS:
            warnings.append(f"set '{name}': no OOD scores given: 0 used (AUROC 0.5)")
        s = np.zeros(len(pred))
    else:
        bad = ~np.isfinite(s) | (s < 0)
        if bad.any():
            problems.append(_line(name, OOD_COLUMN, "missing (NaN), infinite or negative OOD score", ids, bad))
    pred[OOD_COLUMN] = s
    return pred


def _merge(ref, pred):
    frame = ref.merge(pred.drop(columns=[c for c in ref.columns if c != "sample_id" and c in pred.columns]),
                      on="sample_id", how="left", validate="one_to_one")
    if frame.pop("_onehot").any():
        for j, column in enumerate(PROBA_COLUMNS):
            frame[column] = (frame["predicted_state"] == STATES[j]).astype(float)
    keep = list(ref.columns) + ["predicted_state", *PROBA_COLUMNS, OOD_COLUMN, "compute_time"]
    return frame[keep]


def ingestion_summary(predictions_dir) -> str:
    """A short note on the ingestion status, for messages about missing sets."""
    path = Path(predictions_dir) / "ingestion.json"
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError):
        return ""
    status = info.get("status")
    errors = info.get("errors") or []
    if status and status != "ok":
        first = errors[0] if errors else ""
        return f" (ingestion status: {status}{': ' + str(first) if first else ''})"
    return ""


def read_frames(reference_dir, predictions_dir):
    """Read the six sets; return ``(frames, warnings, hashes)``.

    ``frames``: {set: DataFrame} with the reference columns, predicted_state,
    the three probabilities (filled and renormalised), the OOD score and
    compute_time. ``hashes``: {set: {"reference": sha256, "predictions": sha256}}.
    Raises ChallengeError listing every problem (set, column, sample id).
    """
    reference_dir, predictions_dir = Path(reference_dir), Path(predictions_dir)
    missing = [n for n in SET_NAMES if not (predictions_dir / f"{n}.parquet").is_file()]
    if missing:
        raise ChallengeError(
            f"predictions missing for set{'s' * (len(missing) > 1)} {', '.join(missing)}: "
            f"no {predictions_dir / (missing[0] + '.parquet')}{ingestion_summary(predictions_dir)}")
    references, predictions, hashes = {}, {}, {}
    for name in SET_NAMES:
        references[name] = read_reference(reference_dir, name)
        pred_path = predictions_dir / f"{name}.parquet"
        predictions[name] = _read_parquet(pred_path, name, "predictions")
        hashes[name] = {"reference": sha256_file(reference_dir / f"{name}.parquet"),
                        "predictions": sha256_file(pred_path)}
    frames, warnings = frames_from(references, predictions, where=str(predictions_dir))
    return frames, warnings, hashes


def frames_from(references, predictions, where="predictions"):
    """Validate in-memory predictions against reference frames; return ``(frames, warnings)``."""
    frames, warnings, problems = {}, [], []
    for name in SET_NAMES:
        pred = _validate_predictions(predictions[name], references[name], name, problems, warnings)
        if pred is not None and not problems:
            frames[name] = _merge(references[name], pred)
    if problems:
        raise ChallengeError(f"invalid predictions in {where} ({len(problems)} problem"
                             f"{'s' * (len(problems) > 1)}):\n" + "\n".join(problems))
    return frames, warnings
