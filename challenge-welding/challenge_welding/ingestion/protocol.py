"""Parent side of the image hand-over: a ring of shared-memory slots.

A decode thread takes a free slot, writes a whole batch of RGB images into it
(cv2 writes straight into the block, see decode.py) and the child wraps the
same bytes in numpy views: the images cross the process boundary without a
copy. A slot goes back to the pool once the child has answered for its batch.
The message names live in child.py, the one file both sides can import.
"""

from __future__ import annotations

import os
import queue
import secrets
from multiprocessing import shared_memory

import numpy as np


class Slot:
    """One shared-memory block, grown (replaced under a new name) when a batch needs more room."""

    def __init__(self, prefix: str, index: int):
        self.base = f"{prefix}-s{index}"
        self.generation = 0
        self.shm: shared_memory.SharedMemory | None = None

    @property
    def name(self) -> str:
        return self.shm.name if self.shm is not None else ""

    def ensure(self, nbytes: int) -> None:
        if self.shm is not None and self.shm.size >= nbytes:
            return
        self.release()
        self.generation += 1
        # Round up to 8 MiB steps so slightly larger batches do not trigger a regrow each time.
        size = max(1, -(-nbytes // (8 << 20)) * (8 << 20))
        self.shm = shared_memory.SharedMemory(name=f"{self.base}-{self.generation}", create=True,
                                              size=size)

    def view(self, offset: int, h: int, w: int) -> np.ndarray:
        return np.ndarray((h, w, 3), dtype=np.uint8, buffer=self.shm.buf, offset=offset)

    def release(self) -> None:
        if self.shm is not None:
            try:
                self.shm.close()
            except BufferError:  # a view is still alive somewhere; unlink anyway
                pass
            try:
                self.shm.unlink()
            except FileNotFoundError:
                pass
            self.shm = None


class SlotPool:
    """A fixed number of slots; ``acquire`` blocks until one is free."""

    def __init__(self, count: int):
        prefix = f"cw{os.getpid()}{secrets.token_hex(3)}"
        self.slots = [Slot(prefix, i) for i in range(count)]
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
