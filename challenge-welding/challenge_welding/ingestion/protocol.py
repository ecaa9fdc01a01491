"""Parent side of the image hand-over: a ring of shared-memory slots.

A decode thread takes a free slot, writes a whole batch of RGB images into it
(cv2 writes straight into the block, see decode.py) and the child wraps the
same bytes in numpy views: the images cross the process boundary without a
copy. A slot goes back to the pool once the child has answered for its batch.
The message names live in child.py, the one file both sides can import.

A slot is a file mapped by both processes, in /dev/shm when it has room, else
in the temporary folder: containers get a 64 MB /dev/shm by default (Codabench's
worker sets no --shm-size), smaller than one batch of full-HD images, and a
POSIX shared-memory block that outgrows its tmpfs dies with SIGBUS on first
write. The space is reserved up front (posix_fallocate), so a full folder is an
ENOSPC here, and the next folder is tried.
"""

from __future__ import annotations

import mmap
import os
import queue
import secrets
import tempfile

import numpy as np


def slot_dirs() -> list[str]:
    """Where slots may live, preferred first: /dev/shm (RAM), then the temporary folder."""
    dirs = [d for d in ("/dev/shm",) if os.path.isdir(d) and os.access(d, os.W_OK)]
    return dirs + [tempfile.gettempdir()]


class Slot:
    """One mapped file, grown (replaced under a new name) when a batch needs more room."""

    def __init__(self, prefix: str, index: int, dirs: list[str] | None = None):
        self.base = f"{prefix}-s{index}"
        self.dirs = dirs or slot_dirs()
        self.generation = 0
        self.path = ""
        self.mm: mmap.mmap | None = None

    @property
    def name(self) -> str:
        """The path the child maps (sent in the batch message)."""
        return self.path

    def ensure(self, nbytes: int) -> None:
        if self.mm is not None and len(self.mm) >= nbytes:
            return
        self.release()
        self.generation += 1
        # Round up to 8 MiB steps so slightly larger batches do not trigger a regrow each time.
        size = max(1, -(-nbytes // (8 << 20)) * (8 << 20))
        errors = []
        for folder in self.dirs:
            path = os.path.join(folder, f"{self.base}-{self.generation}")
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            except OSError as exc:
                errors.append(f"{folder}: {exc.strerror or exc}")
                continue
            try:
                os.posix_fallocate(fd, 0, size)
                self.mm = mmap.mmap(fd, size)
                self.path = path
                return
            except OSError as exc:
                errors.append(f"{folder}: {exc.strerror or exc}")
                os.unlink(path)
            finally:
                os.close(fd)
        raise OSError(f"no room for a {size >> 20} MiB image buffer ({'; '.join(errors)})")

    def view(self, offset: int, h: int, w: int) -> np.ndarray:
        return np.ndarray((h, w, 3), dtype=np.uint8, buffer=self.mm, offset=offset)

    def release(self) -> None:
        if self.mm is not None:
            try:
                self.mm.close()
            except BufferError:  # a view is still alive somewhere; unlink anyway
                pass
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
            self.mm, self.path = None, ""


class SlotPool:
    """A fixed number of slots; ``acquire`` blocks until one is free."""

    def __init__(self, count: int, dirs: list[str] | None = None):
        prefix = f"cw{os.getpid()}{secrets.token_hex(3)}"
        dirs = dirs or slot_dirs()
        self.slots = [Slot(prefix, i, dirs) for i in range(count)]
        self._free: queue.Queue[Slot] = queue.Queue()
        for slot in self.slots:
            self._free.put(slot)

    def acquire(self, timeout: float | None = None) -> Slot:
        return self._free.get(timeout=timeout)

    def release(self, slot: Slot) -> None:
        self._free.put(slot)

    def close(self) -> None:
        for slot in self.slots:
            slot.release()

    def __enter__(self) -> "SlotPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def layout(shapes: list[tuple[int, int]]) -> tuple[list[tuple[int, int, int]], int]:
    """Byte offsets of images of the given (h, w) packed one after another, 64-byte aligned."""
    items, offset = [], 0
    for h, w in shapes:
        items.append((offset, h, w))
        offset += -(-(h * w * 3) // 64) * 64
    return items, offset
