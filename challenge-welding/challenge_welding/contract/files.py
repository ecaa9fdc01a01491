"""File helpers every part uses: the one atomic write and the sha256 of the manifests.

An output file is either complete or absent: it is written under a temporary name in its
own folder, flushed to disk, then renamed over the target (``os.replace``, atomic on POSIX).
The temporary file is created exclusively and without following links, after removing
whatever sits at its name: a link planted there (by a submission sharing the folder)
cannot redirect the write.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _temporary_name(path: Path) -> Path:
    """A hidden sibling of ``path`` that keeps its suffix (np.savez appends .npz to a name without it)."""
    return path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")


def _fresh(tmp: Path) -> None:
    try:
        tmp.unlink()  # a planted file or link at the temporary name goes first
    except FileNotFoundError:
        pass


def write_atomic(path, data: bytes | str, encoding: str = "utf-8") -> Path:
    """Write ``data`` (bytes, or text in ``encoding``) to ``path``: complete or absent, never through a link."""
    path = Path(path)
    tmp = _temporary_name(path)
    _fresh(tmp)
    payload = data.encode(encoding) if isinstance(data, str) else data
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o644)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)  # replaces a link at ``path`` itself, not its target
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    return path


@contextlib.contextmanager
def atomic_path(path):
    """For writers that need a file name (parquet, npz, zip): yield a temporary path, then move it to ``path``.

    The file appears at ``path`` only if the block ends without an exception; otherwise the
    temporary file is removed and the exception propagates (``path`` is left as it was).
    """
    path = Path(path)
    tmp = _temporary_name(path)
    _fresh(tmp)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


def sha256_bytes(data: bytes) -> str:
    """The hex sha256 of ``data`` (the manifests' hash)."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path) -> str:
    """The hex sha256 of a file, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
