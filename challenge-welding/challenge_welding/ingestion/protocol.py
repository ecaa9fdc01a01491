"""Parent side of the image hand-over: one fresh, nameless memory file per batch.

A decode thread writes a whole batch of RGB images into a new buffer (cv2
writes straight into it, see decode.py). At hand-over the parent passes the
buffer's file descriptor to the child over the control socket (SCM_RIGHTS) and
forgets it; the child maps the same bytes and wraps them in numpy views, so the
images cross the process boundary without a copy.

Why a buffer per batch, reused only once nobody else holds it:
- no peeking: the buffer has no name (``memfd_create``, or a file unlinked at
  once), so the child cannot open a batch before its descriptor arrives with the
  hand-over message; the parent is made non-dumpable (see reaper.py), so the
  child cannot reach it through /proc/<parent>/fd or /proc/<parent>/mem either;
- kept images stay valid: the child never unmaps or rewrites a batch; a mapping
  lives exactly as long as the submission holds a view on it, across batches,
  sets and resolution changes (a reused, regrown slot is what made kept images
  crash);
- speed: fresh shared pages cost about as much CPU as decoding the image (page
  allocation, zeroing, freeing), so :class:`BufferPool` reuses a buffer once no
  process of the submission maps it or holds a descriptor of it any more (checked
  in /proc, see reaper.held), which is the usual case. A buffer still held (a
  component keeping images) is left to its holder and a new one is made.

A memfd lives in RAM outside /dev/shm, so a container's 64 MB /dev/shm does not
limit it. Without memfd (not Linux) the buffer is a file created and unlinked in
/dev/shm when it has room, else in the temporary folder; its space is reserved up
front (posix_fallocate when available) so that a full folder is an error here,
not a SIGBUS on first write.
"""

from __future__ import annotations

import mmap
import os
import secrets
import tempfile
import threading

import numpy as np


def buffer_dirs() -> list[str]:
    """Where file-backed buffers may live, preferred first: /dev/shm (RAM), then the temp folder."""
    dirs = [d for d in ("/dev/shm",) if os.path.isdir(d) and os.access(d, os.W_OK)]
    return dirs + [tempfile.gettempdir()]


def _reserve(fd: int, size: int) -> None:
    if hasattr(os, "posix_fallocate"):
        os.posix_fallocate(fd, 0, size)
    else:  # macOS: no fallocate; ftruncate makes a sparse file
        os.ftruncate(fd, size)


def _unlinked_file(size: int, dirs: list[str]) -> tuple[int, str]:
    errors = []
    for folder in dirs:
        path = os.path.join(folder, f"cw{os.getpid()}-{secrets.token_hex(8)}")
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as exc:
            errors.append(f"{folder}: {exc.strerror or exc}")
            continue
        os.unlink(path)  # nameless from now on: only descriptors reach it
        try:
            _reserve(fd, size)
            return fd, folder
        except OSError as exc:
            errors.append(f"{folder}: {exc.strerror or exc}")
            os.close(fd)
    raise OSError(f"no room for a {size >> 20} MiB image buffer ({'; '.join(errors)})")


class BatchBuffer:
    """One batch's images in a nameless memory file, mapped read-write by the parent.

    ``dirs`` forces the file-backed variant in those folders (tests); by default
    a memfd is used when the platform has one.
    """

    def __init__(self, nbytes: int, dirs: list[str] | None = None):
        size = max(1, nbytes)
        if dirs is None and hasattr(os, "memfd_create"):
            self.fd = os.memfd_create("cw-batch")  # close-on-exec by default
            os.ftruncate(self.fd, size)
            self.where = "memfd"
        else:
            self.fd, self.where = _unlinked_file(size, dirs or buffer_dirs())
        self.size = size
        self.mm: mmap.mmap | None = mmap.mmap(self.fd, size)
        st = os.fstat(self.fd)
        self.ident = (st.st_dev, st.st_ino)  # how /proc shows it in another process

    def view(self, offset: int, h: int, w: int) -> np.ndarray:
        return np.ndarray((h, w, 3), dtype=np.uint8, buffer=self.mm, offset=offset)

    def unmap(self) -> None:
        """Drop the parent's mapping once written; the descriptor still holds the bytes."""
        if self.mm is not None:
            try:
                self.mm.close()
            except BufferError:  # a view of ours is still alive: the GC unmaps it later
                pass
            self.mm = None

    def close(self) -> None:
        """Forget the batch on the parent's side (after hand-over, or when never handed over)."""
        self.unmap()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


STEP = 8 << 20  # buffer sizes in 8 MiB steps, so that a buffer fits later batches too


class BufferPool:
    """Batch buffers to reuse: a buffer comes back only when nobody else holds it.

    ``held(idents) -> set`` (optional) tells which buffers the submission still holds:
    buffers handed back with :meth:`hand_back` are checked with it all at once, when a
    buffer is next needed (one /proc pass per refill instead of one per batch, and
    never while a timed call runs, since no buffer is taken then)."""

    def __init__(self, keep: int = 4, dirs: list[str] | None = None, held=None):
        self.keep, self.dirs, self.held = keep, dirs, held
        self.free: list[BatchBuffer] = []
        self.returned: list[BatchBuffer] = []  # handed back, not checked yet
        self.lock = threading.Lock()
        self.made = self.reused = 0

    def hand_back(self, buffer: BatchBuffer) -> None:
        """A buffer back from the submission; whether it still holds it is checked later."""
        if self.held is None:
            buffer.close()  # nobody can tell: never reuse it
            return
        with self.lock:
            self.returned.append(buffer)

    def _settle(self) -> None:
        """Check the returned buffers at once: free the ones nobody holds (lock held)."""
        if not self.returned:
            return
        returned, self.returned = self.returned, []
        held = self.held({b.ident for b in returned})
        for buffer in returned:
            if buffer.ident not in held and buffer.mm is not None \
                    and len(self.free) < self.keep:
                self.free.append(buffer)
            else:
                buffer.close()

    def take(self, nbytes: int) -> BatchBuffer:
        with self.lock:
            self._settle()
            fits = [b for b in self.free if b.size >= nbytes and b.mm is not None]
            if fits:
                buffer = min(fits, key=lambda b: b.size)
                self.free.remove(buffer)
                self.reused += 1
                return buffer
            self.made += 1
        return BatchBuffer(max(1, -(-nbytes // STEP) * STEP), self.dirs)

    def prefill(self, nbytes: int, count: int) -> None:
        """Make ``count`` buffers for batches of ``nbytes`` and write every page once, ready
        for reuse: run while the child imports and loads its model, so that a fresh page's
        cost (allocation, zeroing, the fault; as much CPU as decoding into it) is not paid
        during a set."""
        for _ in range(min(count, self.keep)):
            buffer = BatchBuffer(max(1, -(-nbytes // STEP) * STEP), self.dirs)
            np.ndarray(buffer.size, np.uint8, buffer=buffer.mm)[::mmap.PAGESIZE] = 0
            with self.lock:
                self.made += 1
                self.free.append(buffer)

    def give_back(self, buffer: BatchBuffer, held: bool) -> None:
        """``held``: a process of the submission still maps it or holds its descriptor."""
        with self.lock:
            if not held and buffer.mm is not None and len(self.free) < self.keep:
                self.free.append(buffer)
                return
        buffer.close()

    def close(self) -> None:
        with self.lock:
            for buffer in self.free + self.returned:
                buffer.close()
            self.free.clear()
            self.returned.clear()


def layout(shapes: list[tuple[int, int]]) -> tuple[list[tuple[int, int, int]], int]:
    """Byte offsets of images of the given (h, w) packed one after another, 64-byte aligned."""
    items, offset = [], 0
    for h, w in shapes:
        items.append((offset, h, w))
        offset += -(-(h * w * 3) // 64) * 64
    return items, offset
