"""Parent-side JPEG decoding, ahead of the child, in background threads.

cv2.imdecode and cv2.cvtColor release the GIL, so plain threads use every
core. Decoded images are converted BGR -> RGB straight into the batch's
hand-over buffer (``cvtColor(dst=...)``): the conversion pass we need anyway is
also the only write into it, no extra copy.
"""

from __future__ import annotations

import collections
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np

from challenge_welding.contract.errors import ChallengeError
from challenge_welding.ingestion.protocol import BatchBuffer, BufferPool, layout


def read_rgb(path: str | Path) -> np.ndarray:
    """Decode one image file to an RGB uint8 HxWx3 array (the starter kit's format)."""
    return cv2.cvtColor(read_bgr(path), cv2.COLOR_BGR2RGB)


def read_bgr(path: str | Path) -> np.ndarray:
    try:
        data = np.fromfile(str(path), dtype=np.uint8)
    except OSError as exc:
        raise ChallengeError(f"cannot read image {path}: {exc.strerror or exc}") from None
    image = cv2.imdecode(data, cv2.IMREAD_COLOR) if data.size else None
    if image is None:
        raise ChallengeError(f"cannot decode image {path} (not a readable JPEG/PNG file)")
    return image


@dataclass
class DecodedBatch:
    index: int
    buffer: BatchBuffer
    items: list[tuple[int, int, int]]  # (offset, h, w) per image


@dataclass
class DecodeStats:
    seconds: float = 0.0  # summed over threads
    images: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    intervals: list = field(default_factory=list)  # (start, end) perf_counter per image

    def timed_read(self, path: str) -> np.ndarray:
        t0 = time.perf_counter()
        image = read_bgr(path)
        t1 = time.perf_counter()
        with self.lock:
            self.seconds += t1 - t0
            self.images += 1
            self.intervals.append((t0, t1))
        return image


def assemble(index: int, images, pool: BufferPool, convert=None) -> DecodedBatch:
    """Wait for a batch's decoded BGR images and write them, as RGB, into a buffer.

    ``convert``: an executor for the per-image conversions (they release the GIL), so
    that writing the batch is not one thread's work while the cores wait."""
    bgr = [f.result() if hasattr(f, "result") else f for f in images]
    items, nbytes = layout([im.shape[:2] for im in bgr])
    try:
        buffer = pool.take(nbytes)
    except OSError as exc:  # the evaluator's machine, not the submission: stop with a clear line
        raise ChallengeError(f"cannot hold batch {index + 1}'s images in memory: {exc}") from None

    def write(k):
        off, h, w = items[k]
        cv2.cvtColor(bgr[k], cv2.COLOR_BGR2RGB, dst=buffer.view(off, h, w))

    try:
        list(convert.map(write, range(len(bgr))) if convert else map(write, range(len(bgr))))
    except BaseException:
        buffer.close()
        raise
    return DecodedBatch(index, buffer, items)


def default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


class Prefetcher:
    """Yield the decoded batches in order while up to ``lookahead`` later ones decode.

    Images are decoded one per task on ``workers`` threads, in batch order, so
    that even the first batch uses every core; one assembler thread then writes
    each batch, in order, into a buffer of ``pool``. The consumer owns each yielded
    batch's buffer (hands it over, then gives it back or closes it); at most ``lookahead`` batches
    wait decoded, so the memory held is bounded.

    With ``ahead=False`` (bursts) nothing decodes while the consumer holds a batch:
    once the stock of decoded batches is used up and the consumer asks for the next
    one, a stock of batches whose buffers total at most ``stock_bytes`` (at least one
    batch) is decoded on every core, and only when all of it is ready is the first
    yielded. So decoding runs in large all-core bursts between predict() calls, never
    during one, and the stock lives in buffers of ours that no descriptor has left yet.
    """

    def __init__(self, batches: list[list[str]], pool: BufferPool, workers: int, lookahead: int,
                 stats: DecodeStats | None = None, ahead: bool = True, stock_bytes: int = 0):
        self.batches = batches
        self.pool = pool
        self.ahead = ahead
        self.stock_bytes = stock_bytes
        self.stats = stats if stats is not None else DecodeStats()
        self.lookahead = max(1, lookahead)
        self.executor = ThreadPoolExecutor(max_workers=max(1, workers),
                                           thread_name_prefix="decode")
        self.assembler = ThreadPoolExecutor(max_workers=1, thread_name_prefix="assemble")
        self.converter = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="rgb")
        self.pending: collections.deque = collections.deque()
        self.ready: collections.deque = collections.deque()  # the stock of a burst
        self.next_index = 0
        self.wait_s = 0.0  # time the consumer waited for decoding (0 when decoding keeps ahead)

    def _submit(self) -> None:
        while len(self.pending) < self.lookahead and self.next_index < len(self.batches):
            i = self.next_index
            images = [self.executor.submit(self.stats.timed_read, p) for p in self.batches[i]]
            self.pending.append(self.assembler.submit(assemble, i, images, self.pool,
                                                      self.converter))
            self.next_index += 1

    def _stock_size(self, batch_bytes: int) -> int:
        """Batches per burst: as many as ``stock_bytes`` holds, at least one."""
        return max(1, self.stock_bytes // max(1, batch_bytes))

    def __iter__(self):
        if not self.ahead:
            yield from self._bursts()
            return
        self._submit()
        while self.pending:
            t0 = time.perf_counter()
            batch = self.pending.popleft().result()
            self.wait_s += time.perf_counter() - t0
            self._submit()
            yield batch

    def _bursts(self):
        largest = 0  # bytes of the largest batch seen: sizes the next stock
        ready = self.ready
        while True:
            if not ready:  # the consumer holds nothing of ours: refill on every core
                if self.next_index >= len(self.batches):
                    return
                self.lookahead = self._stock_size(largest) if largest else 1
                t0 = time.perf_counter()
                self._submit()
                while self.pending:  # all of the stock before the first hand-over
                    ready.append(self.pending.popleft().result())
                self.wait_s += time.perf_counter() - t0
                largest = max([largest] + [b.buffer.size for b in ready])
            yield ready.popleft()

    def close(self) -> None:
        for fut in self.pending:
            fut.cancel()
        self.executor.shutdown(wait=True, cancel_futures=True)
        self.assembler.shutdown(wait=True)
        self.converter.shutdown(wait=True)
        for fut in self.pending:  # batches decoded but never handed over: reuse their buffers
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                self.pool.give_back(fut.result().buffer, held=False)
        self.pending.clear()
        while self.ready:
            self.pool.give_back(self.ready.popleft().buffer, held=False)
