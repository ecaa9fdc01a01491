"""The writer: the answers kept in memory become ``PRED/<set>.parquet`` and a manifest.

Files are written atomically (a temporary name, then a rename) and never through
a link: a temporary name the submission planted (a symlink to a file it
controls) is removed first and the file is created exclusively, without
following links. The manifest holds the sha256 of the bytes written, computed
from memory, not read back from disk.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd

from challenge_welding.contract.names import PRED_COLUMNS
from challenge_welding.ingestion.predict import SetAnswers
from challenge_welding.contract.files import sha256_bytes, write_atomic  # the hash the scorer checks


def frame(answers: SetAnswers) -> pd.DataFrame:
    """The prediction file's rows, in the contract's column order."""
    p = answers.probabilities
    return pd.DataFrame({
        "sample_id": answers.sample_ids, "predicted_state": answers.states,
        "scores KO": p[:, 0], "scores OK": p[:, 1], "scores UNKNOWN": p[:, 2],
        "scores OOD": answers.ood, "compute_time": answers.times})[list(PRED_COLUMNS)]


def parquet_bytes(df: pd.DataFrame) -> bytes:
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    return buf.getvalue()


def write_set(output: Path, answers: SetAnswers) -> tuple[str, str]:
    """Write one set's file; return its name in the output folder and its sha256."""
    data = parquet_bytes(frame(answers))
    name = f"{answers.name}.parquet"
    write_atomic(output / name, data)
    return name, sha256_bytes(data)


def write_sets(output: Path, answers: dict[str, SetAnswers]) -> dict[str, str]:
    """Write every set from memory; return the manifest {"<set>.parquet": sha256 hex}."""
    return dict(write_set(output, a) for a in answers.values())


def write_json(path: Path, data: dict) -> None:
    write_atomic(path, (json.dumps(data, indent=2, default=str) + "\n").encode())
