"""The writer: what the ingestion keeps in memory becomes the output folder, and nothing else.

Called once every process of the submission is dead (run.py):

1. :func:`clean_output` removes every entry of the output folder that the ingestion
   is not about to write and that was not there before the run (a submission's
   copies of input images, folders planted anywhere, links; inside folders that
   were there before too), and names them; a file there before whose content
   changed fails the run (run.py);
2. :func:`publish` writes the files into a private folder it creates inside the
   output folder (``tempfile.mkdtemp``: an unpredictable name, created exclusively,
   so nothing planted at a guessable temporary name plays any part), then moves
   each into place with a rename, replacing whatever sits at the final name (a
   planted folder or link included, never followed);
3. ``ingestion.json`` is published last, with the manifest ({name: sha256} of the
   bytes written, computed from memory, not read back) of every other file.

The scorer (scoring/provenance.py) refuses a prediction folder holding any entry
outside that manifest, ``ingestion.json`` and Codabench's own ``metadata``.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tempfile
from pathlib import Path

import pandas as pd

from challenge_welding.contract.names import PRED_COLUMNS
from challenge_welding.ingestion.predict import SetAnswers
from challenge_welding.contract.files import sha256_bytes, write_atomic  # the hash the scorer checks
from challenge_welding.scoring.explainability_io import file_name as maps_file_name

STAGE_PREFIX = ".cw-publish-"


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


from challenge_welding.contract.files import sha256_bytes, write_atomic  # the hash the scorer checks
from challenge_welding.scoring.explainability_io import file_name as maps_file_name


def report_bytes(data: dict) -> bytes:
    return (json.dumps(data, indent=2, default=str) + "\n").encode()
