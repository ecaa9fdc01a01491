"""The writer: what the ingestion keeps in memory becomes the output folder, and nothing else.

Called once every process of the submission is dead (ingest.py):

1. :func:`clean_output` removes every entry of the output folder that the ingestion
   is not about to write and that was not there before the run (a submission's
   copies of input images, folders planted anywhere, links; inside folders that
   were there before too), and names them; a file there before whose content
   changed fails the run (ingest.py);
2. :func:`publish` writes every file into a private folder it creates inside the
   output folder (``tempfile.mkdtemp``: an unpredictable name, created exclusively,
   so nothing planted at a guessable temporary name plays any part), then moves
   each into place with a rename, replacing whatever sits at the final name (a
   planted folder or link included, never followed);
3. ``ingestion.json`` is moved last, with the manifest ({name: sha256} of the
   bytes written, computed from memory, not read back: :func:`manifest`) of every
   set file.

Every file is written in full before the first one moves: a full or read-only file
system fails the publishing with one line (contract.files.OutputError, exit status 3)
and leaves none of them; a rename, which needs no space, moves ``ingestion.json``
after the rest, so a folder without it is never taken for a finished run.

The scorer (scoring/provenance.py) refuses a prediction folder holding any entry
outside that manifest, ``ingestion.json`` and Codabench's own ``metadata``.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pandas as pd

from challenge_welding.contract.checked import json_text, plain
from challenge_welding.contract.names import PRED_COLUMNS
from challenge_welding.contract.explanation_maps import file_name as maps_file_name
from challenge_welding.ingestion.run.predict import SetAnswers
from challenge_welding.contract.files import (OwnedFolder, remove_entry,
                                              sha256_bytes, write_atomic, writing)

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


def set_files(answers: dict[str, SetAnswers]) -> dict[str, bytes]:
    """{file name: bytes} of every set answered: its predictions and, when returned, its maps."""
    files = {}
    for a in answers.values():
        files[f"{a.name}.parquet"] = parquet_bytes(frame(a))
        if a.maps is not None:
            files[maps_file_name(a.name)] = a.maps
    return files


def snapshot(output: Path) -> dict:
    """{relative path: (inode, ctime_ns, size)} of everything under ``output``, links not
    followed. The ctime cannot be set back by an unprivileged process: a file rewritten
    in place shows."""
    out = {}
    for folder, dirs, files in os.walk(output):
        for name in dirs + files:
            path = os.path.join(folder, name)
            st = os.lstat(path)
            out[os.path.relpath(path, output)] = (st.st_ino, st.st_ctime_ns, st.st_size)
    return out


def clean_output(output: Path, keep, before: dict) -> tuple[list[str], list[str]]:
    """Remove what appeared under ``output`` since ``before`` (a :func:`snapshot`), except
    the top-level names in ``keep`` (about to be written). Returns (removed, changed): the
    removed paths (the top of each removed tree) and the files there before whose content
    changed, both relative and sorted. Folders there before are walked: a file planted in
    a folder of the user's (or the submission's copy Codabench puts there) goes too."""
    removed, changed = [], []
    for folder, dirs, files in os.walk(output):
        rel_folder = os.path.relpath(folder, output)
        for name in sorted(dirs + files):
            rel = os.path.normpath(os.path.join(rel_folder, name))
            if rel_folder == "." and name in keep:
                if name in dirs:
                    dirs.remove(name)  # replaced by the writer: not walked
                continue
            if rel not in before:
                removed.append(rel)
                remove_entry(output / rel)
                if name in dirs:
                    dirs.remove(name)
            else:
                st = os.lstat(output / rel)
                if name in files and (st.st_ino, st.st_ctime_ns, st.st_size) != before[rel]:
                    changed.append(rel)
    return sorted(removed), sorted(changed)


def manifest(files: dict[str, bytes]) -> dict[str, str]:
    """{name: sha256 hex} of the bytes about to be written (ingestion.json's manifest)."""
    return {name: sha256_bytes(data) for name, data in files.items()}


def publish(output: Path, files: dict[str, bytes], what: str = "the predictions") -> None:
    """Write ``files`` through a private folder, then move each into place in their order
    (put ``ingestion.json`` last). A write that fails (no space left, read-only...) is one
    OutputError line naming ``output`` and the bytes needed, and nothing is moved."""
    size = sum(len(d) for d in files.values())
    with writing(output, what, size):
        stage = OwnedFolder(STAGE_PREFIX, dir=output)
        try:
            for name, data in files.items():
                write_atomic(stage.path / name, data)
            for name in files:
                remove_entry(output / name)  # a planted folder would make the rename fail
                os.replace(stage.path / name, output / name)
        finally:
            stage.remove()


def keep_elsewhere(folder: Path, files: dict[str, bytes]) -> bool:
    """Best effort, after the output folder refused them: ``files`` into ``folder`` (the
    run's private folder, on another file system as a rule). True when all were written."""
    try:
        for name, data in files.items():
            write_atomic(folder / name, data)
    except Exception:  # already failing with the output's line
        return False
    return True


def report_bytes(data: dict) -> bytes:
    return json_text(plain(data), indent=2, default=str).encode()  # strict JSON: a stray NaN -> null
