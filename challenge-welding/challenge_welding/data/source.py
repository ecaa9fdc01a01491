"""Datasets in the challenge's published format, read as the organisers publish them.

A storage root STORE holds ``challenge-welding/datasets/<name>/metadata/ds_meta.parquet``
and the images at ``STORE/<path>``, ``path`` being relative to STORE
(``challenge-welding/datasets/<name>/<seam>/<labelling_type>/sample_<n>.jpeg``). Accepted
on input as well: ``path`` relative to the dataset folder, ``sha256`` as hex text instead
of the 32 raw bytes, ``data-origin`` (the docs' spelling) for ``data_origin``, a
resolution of strings, either timestamp form of the published data, optional columns
missing or extra, an optional ``OOD_class``.

This module holds the pure normalisers (one value in, the normal value or a ValueError
naming the cause out) and the dataset location rules; build_sets.py does the I/O.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path, PurePosixPath

from challenge_welding.contract.names import SOURCE_META
from challenge_welding.contract.errors import ChallengeError

DATASETS_PREFIX = ("challenge-welding", "datasets")
REQUIRED_COLUMNS = ("sample_id", "class", "welding-seams", "path", "sha256")
# The published forms: "22/01/20 12:49" (expert rows), "18/07/2022 20:18" (operator rows).
TIMESTAMP_FORMATS = ("%d/%m/%y %H:%M", "%d/%m/%Y %H:%M", "%d/%m/%Y %H:%M:%S", "%Y-%m-%dT%H:%M:%S",
                     "%Y-%m-%d %H:%M:%S")
PHOTO_SUFFIXES = (".jpeg", ".jpg", ".png")
_HEX = re.compile(r"^[0-9a-fA-F]{64}$")


def storage_root(dataset_dir: Path) -> Path | None:
    """STORE when ``dataset_dir`` is STORE/challenge-welding/datasets/<name>, else None."""
    parts = dataset_dir.resolve().parts
    if len(parts) >= 4 and tuple(parts[-3:-1]) == DATASETS_PREFIX:
        return dataset_dir.resolve().parents[2]
    return None


def dataset_path(store: Path, name: str) -> Path:
    """STORE/challenge-welding/datasets/<name>."""
    return store.joinpath(*DATASETS_PREFIX, name)


def published_path(name: str, seam: str, labelling_type: str, file_name: str) -> str:
    """The ``path`` value of the published layout (relative to the storage root)."""
    return "/".join((*DATASETS_PREFIX, name, seam, labelling_type, file_name))


def find_meta(folder: Path, option: str) -> Path:
    """``folder``/metadata/ds_meta.parquet, or a clear error naming ``option`` and the cause."""
    meta = folder / SOURCE_META
    if meta.is_file():
        return meta
    if not folder.is_dir():
        raise ChallengeError(f"{option} {folder}: no such folder")
    inside = sorted(p.parent.parent for p in folder.glob("challenge-welding/datasets/*/" + SOURCE_META))
    if inside:
        names = ", ".join(str(p) for p in inside)
        raise ChallengeError(f"{option} {folder}: this is a storage root; pass the dataset folder "
                             f"itself (one of: {names})")
    raise ChallengeError(f"{option} {folder}: no {SOURCE_META} (not a dataset in the published format)")


def file_candidates(dataset_dir: Path, path: str) -> list[Path]:
    """Where the file of ``path`` may be: STORE/path first for a storage-root path, else
    dataset_dir/path first (and the other one after)."""
    store = storage_root(dataset_dir)
    rel = PurePosixPath(str(path))
    local = dataset_dir / rel
    if store is None:
        return [local]
    at_root = store / rel
    return [at_root, local] if rel.parts[:2] == DATASETS_PREFIX else [local, at_root]


def missing_file_cause(dataset_dir: Path, path: str) -> str:
    """Why no file was found for ``path`` (the real cause, not just 'missing')."""
    rel = PurePosixPath(str(path))
    store = storage_root(dataset_dir)
    if rel.parts[:2] == DATASETS_PREFIX and store is None:
        return (f"path is relative to a storage root (challenge-welding/datasets/...), but "
                f"{dataset_dir} is not inside STORE/challenge-welding/datasets/: keep the dataset "
                "in its storage root and pass STORE/challenge-welding/datasets/<name>")
    tried = " or ".join(str(p) for p in file_candidates(dataset_dir, path))
    return f"missing file (not at {tried})"


def normal_sha256(value) -> str:
    """Lower-case hex digest from 32 raw bytes (published) or 64 hex characters."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        if len(raw) == 32:
            return raw.hex()
        try:
            text = raw.decode("ascii")
        except UnicodeDecodeError:
            text = ""
        if _HEX.match(text):
            return text.lower()
        raise ValueError(f"sha256 is {len(raw)} bytes, neither the 32 raw bytes of a digest nor "
                         "64 hex characters")
    if isinstance(value, str):
        if _HEX.match(value.strip()):
            return value.strip().lower()
        raise ValueError(f"sha256 {value[:70]!r} is not 64 hex characters (nor 32 raw bytes)")
    if value is None or value != value:  # None or NaN
        raise ValueError("sha256 is empty")
    raise ValueError(f"sha256 of type {type(value).__name__} is neither raw bytes nor hex text")


def normal_resolution(value) -> list[int]:
    """[width, height] as ints, from ints, strings or a text such as '1920x1080' / '[1920, 1080]'."""
    if isinstance(value, str):
        items = re.findall(r"-?\d+(?:\.\d+)?", value)
    else:
        try:
            items = list(value)
        except TypeError:
            items = []
    try:
        w, h = (int(float(x)) for x in items)
    except (TypeError, ValueError):
        raise ValueError(f"resolution {value!r} is not [width, height]") from None
    if w <= 0 or h <= 0:
        raise ValueError(f"resolution {value!r} is not positive")
    return [w, h]


def parse_timestamp(value) -> datetime | None:
    """A datetime from either published form (or ISO 8601); None for an empty value."""
    if value is None or value != value or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, datetime):
        return value
    if hasattr(value, "to_pydatetime"):
        return value.to_pydatetime()
    text = str(value).strip()
    for fmt in TIMESTAMP_FORMATS:
        try:
            return datetime.strptime(text, fmt)
        except ValueError:
            pass
    raise ValueError(f"timestamp {text!r} is in neither published form (22/01/20 12:49, "
                     "18/07/2022 20:18) nor ISO 8601")


def normalise_columns(meta):
    """The frame with the published column names: ``data-origin`` -> ``data_origin``."""
    if "data-origin" in meta.columns:
        if "data_origin" in meta.columns:
            meta = meta.drop(columns=["data-origin"])
        else:
            meta = meta.rename(columns={"data-origin": "data_origin"})
    return meta


def photo_files(folder: Path) -> list[Path]:
    """The JPEG/PNG files of a plain photo folder (any names, sub-folders included), sorted."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in PHOTO_SUFFIXES
                  and not p.name.startswith("."))
