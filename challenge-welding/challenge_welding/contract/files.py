"""File helpers every part uses: the one atomic write and the sha256 of the manifests.

An output file is either complete or absent: it is written under a temporary name in its
own folder, flushed to disk, then renamed over the target (``os.replace``, atomic on POSIX).
The temporary file is created exclusively and without following links, after removing
whatever sits at its name: a link planted there (by a submission sharing the folder)
cannot redirect the write.

A write that fails on our side (no space left, a read-only file system, a file where a
folder is needed, no permission) becomes one :class:`OutputError` line naming the path,
the cause and what was needed (:func:`writing`), exit status 3. Temporary folders of a run
are :class:`OwnedFolder`: a lock held while the run lives tells the next run which ones a
killed run left (:func:`remove_stale`).
"""

from __future__ import annotations

import contextlib
import errno
import glob
import hashlib
import os
import re
import shutil
import tempfile
from pathlib import Path

from challenge_welding.contract.errors import OutputError

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
# errors only a write meets: whatever file the OSError names, the output is at fault
WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG})


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    return f"{n / 1024:.1f} KiB" if n < 1 << 20 else f"{n / (1 << 20):.1f} MiB"


def _nearest(path: Path) -> Path:
    """``path`` or its nearest ancestor that exists (links not followed)."""
    for p in (path, *path.parents):
        if os.path.lexists(p):
            return p
    return Path("/")


def _first_of_copy(exc: OSError) -> OSError:
    """shutil.copytree's Error lists (source, target, "why") per file: the first as an OSError."""
    if isinstance(exc, shutil.Error) and exc.args and isinstance(exc.args[0], list) and exc.args[0]:
        _src, dst, why = exc.args[0][0]
        code = re.match(r"\[Errno (\d+)\]", str(why))
        if code:
            return OSError(int(code[1]), os.strerror(int(code[1])), dst)
    return exc


def fault_line(exc: OSError, path, what: str, size: int | None = None) -> str:
    """One line for ``exc``, met writing ``what`` at ``path``: the cause and the path first,
    then what was needed and the fix. ``size``: the bytes that were to be written."""
    exc = _first_of_copy(exc)
    named = os.fsdecode(exc.filename) if exc.filename is not None else None
    # the target, not our temporary file or staging folder beside or below it
    if named is not None and exc.errno not in WRITE_ERRNOS and not _within(Path(named), Path(path)):
        path = Path(named)
    else:
        path = Path(path)
    there = _nearest(path)
    code = exc.errno
    if code in (errno.ENOSPC, errno.EDQUOT):
        folder = there if there.is_dir() else there.parent
        free = os.statvfs(folder).f_bavail * os.statvfs(folder).f_frsize
        need = f"{_size(size)} needed, " if size else ""
        elsewhere = "point TMPDIR elsewhere" if Path(tempfile.gettempdir()) in path.parents \
            else "choose another output folder"
        return (f"no space left on device writing {what} to {path} ({need}{_size(free)} free "
                f"on that file system): free space there or {elsewhere}")
    if code == errno.EROFS:
        return (f"read-only file system at {path}: a writable folder is needed for {what}; "
                "choose another output folder or remount it read-write")
    if code in (errno.ENOTDIR, errno.EEXIST) and not there.is_dir():
        where = "" if there == path else f" ({path})"
        return (f"{there} is a file where a folder is needed for {what}{where}: move the file "
                "away or choose another output path")
    if code == errno.EISDIR:
        return (f"{path} is a folder where a file is needed for {what}: remove it or choose "
                "another output path")
    if code in (errno.EACCES, errno.EPERM):
        folder = there if there.is_dir() else there.parent
        return (f"permission denied writing {what} to {path}: write permission is needed on "
                f"{folder}; choose another output folder or change its permissions")
    if code == errno.ENOENT:
        return (f"{path} cannot be written ({what}): its folder is missing ({there} is the "
                "last that exists; removed during the run?); create it or choose another output")
    return f"{exc.strerror or exc} writing {what} to {path}"


@contextlib.contextmanager
def writing(path, what: str, size: int | None = None):
    """Turn an OSError met while writing ``what`` at ``path`` into one :class:`OutputError`
    line (exit status 3). An OSError naming another file (an input read inside the block)
    is not ours to explain and passes unchanged, unless only a write can meet it. Nested,
    the outermost says it: it knows the whole of what was being written."""
    path = Path(path)
    try:
        yield path
    except OutputError as inner:
        if inner.os_error is None:
            raise
        raise OutputError(fault_line(inner.os_error, path, what, size), inner.os_error) from None
    except OSError as exc:
        first = _first_of_copy(exc)
        named = os.fsdecode(first.filename) if first.filename is not None else None
        ours = named is None or first.errno in WRITE_ERRNOS or _within(Path(named), path)
        if not ours:
            raise
        raise OutputError(fault_line(exc, path, what, size), exc) from None


def _within(named: Path, path: Path) -> bool:
    """Whether ``named`` is ``path``, below it, above it (a parent made for it) or a sibling
    temporary file of it."""
    named, path = Path(os.path.abspath(named)), Path(os.path.abspath(path))
    return named == path or path in named.parents or named in path.parents \
        or named.parent == path.parent


def remove_entry(path: Path) -> None:
    """Remove a file, a link (not its target) or a folder; nothing there is fine."""
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    except FileNotFoundError:
        pass


def make_folder(path, what: str) -> Path:
    """``mkdir -p path``, or one :class:`OutputError` line (a file in the way, read-only...)."""
    path = Path(path)
    with writing(path, what):
        path.mkdir(parents=True, exist_ok=True)
    return path


def _temporary_name(path: Path) -> Path:
    """A hidden sibling of ``path`` that keeps its suffix (np.savez appends .npz to a name without it)."""
    return path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")


def _fresh(tmp: Path) -> None:
    try:
        tmp.unlink()  # a planted file or link at the temporary name goes first
    except FileNotFoundError:
        pass


def write_atomic(path, data: bytes | str, encoding: str = "utf-8", what: str | None = None) -> Path:
    """Write ``data`` (bytes, or text in ``encoding``) to ``path``: complete or absent, never through a link.

    A failure of the write is one :class:`OutputError` line about ``what`` (default: the
    file's name), unless an enclosing :func:`writing` says more."""
    path = Path(path)
    payload = data.encode(encoding) if isinstance(data, str) else data
    with writing(path, what or path.name, len(payload)):
        tmp = _temporary_name(path)
        _fresh(tmp)
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
def atomic_path(path, what: str | None = None):
    """For writers that need a file name (parquet, npz, zip): yield a temporary path, then move it to ``path``.

    The file appears at ``path`` only if the block ends without an exception; otherwise the
    temporary file is removed and the exception propagates (``path`` is left as it was); an
    OSError of the write is one :class:`OutputError` line about ``what``.
    """
    path = Path(path)
    with writing(path, what or path.name):
        tmp = _temporary_name(path)
        _fresh(tmp)
        try:
            yield tmp
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            raise


try:
    import fcntl
except ImportError:  # Windows: no flock; folders are then never locked, and never swept
    fcntl = None

OWNER_FILE = ".cw-owner"  # locked (flock) by the run that made the folder, while it lives


class OwnedFolder:
    """A temporary folder of this run (``tempfile.mkdtemp``), with a lock on its owner file
    held until :meth:`remove` (or the process's death, SIGKILL included: the kernel drops the
    lock). :func:`remove_stale` removes the folders whose lock nobody holds."""

    def __init__(self, prefix: str, dir=None):
        self.path = Path(tempfile.mkdtemp(prefix=prefix, dir=dir))
        # locked under another name, then renamed: a sweeper never sees the owner file
        # unlocked (the lock follows the inode). Non-inheritable (Python's default): a
        # process we start cannot keep the lock alive.
        locking = self.path / (OWNER_FILE + ".new")
        self._fd = None
        if fcntl is None:
            return
        self._fd = os.open(locking, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.rename(locking, self.path / OWNER_FILE)

    def keep(self) -> Path:
        """Leave the folder for the user (never removed as stale): drop its owner file."""
        with contextlib.suppress(OSError):
            os.unlink(self.path / OWNER_FILE)
        self._close()
        return self.path

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        self._close()

    def _close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def remove_stale(prefix: str, dir=None) -> list[Path]:
    """Remove the ``prefix*`` folders of ``dir`` (default: the temporary folder) that an
    :class:`OwnedFolder` made and whose owner is dead (its lock is free); return them.

    A folder without an owner file is left alone (kept on purpose, or not ours); a live
    run's lock is held, so two runs at once never remove each other's folders."""
    removed = []
    if fcntl is None:  # no lock to tell a dead owner from a live one: sweep nothing
        return removed
    base = Path(dir or tempfile.gettempdir())
    try:
        entries = sorted(base.glob(glob.escape(prefix) + "*"))
    except OSError:
        return removed
    for entry in entries:
        try:
            fd = os.open(entry / OWNER_FILE, os.O_RDONLY | _NOFOLLOW)
        except OSError:  # no owner file, a link, not a folder, not ours to open
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: its run is alive
            os.close(fd)
            continue
        try:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
                removed.append(entry)
        finally:
            os.close(fd)
    return removed


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
