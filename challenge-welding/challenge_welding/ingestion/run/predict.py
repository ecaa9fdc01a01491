"""Predict one set: hand its batches to the child, collect validated answers and times.

Nothing here writes a file. :func:`predict_set` returns a :class:`SetAnswers`
(arrays and timings) that the writer turns into ``PRED/<set>.parquet``.

Timing. A batch's time is measured by the parent (Child.handover), from handing
the batch over to receiving its answer, on CLOCK_MONOTONIC_RAW (no NTP or adjtimex
slew: clock.py), divided by the batch's size: the
per-image ``compute_time``. Where that time is scored (the performance set,
:data:`TIMED_SETS`), no decoding runs during a call: between an answer and the
next hand-over, when the stock of decoded batches is used up, a new stock (up to
``stock_bytes``, see Prefetcher) is decoded on every core, so our own CPU use
never lengthens the submission's measured time and decoding still runs at the
all-core rate. The stock's pixels sit in nameless buffers whose descriptors have
not left our (non-dumpable) process: the submission cannot reach a batch before
its hand-over. Elsewhere decoding overlaps predict() to keep the run short.

Buffers. Every batch is decoded into a fresh buffer that never left our process and is
sealed before its hand-over; once handed over, a buffer is closed on our side and never
written or reused (buffers.py): whatever the submission keeps of it, it holds only the
batch it was handed.

Warm-up. Before the first timed call, one untimed call on a synthetic batch
(noise images with the first batch's shapes and metadata) leaves lazy
initialisation out of the times; its answer is discarded. It shows no evaluation
image, so it gives the submission nothing to precompute.

Hand-over overhead. :func:`handover_overhead` times round trips that run the
whole hand-over path (message, descriptor, mapping, views, answer) without
calling predict(): the constant cost included in every measured time, read from
the same clock (each round is a Child.handover).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from challenge_welding.contract.explanation_maps import MapsWriter
from challenge_welding.contract.names import TIME_PERCENTILE
from challenge_welding.ingestion.handover.buffers import STEP, BatchBuffer, BufferPool, layout
from challenge_welding.ingestion.handover.process import Child, ChildFault
from challenge_welding.ingestion.run.decode import DecodeStats, Prefetcher
from challenge_welding.ingestion.run.validate import Notes, OutputError, validate_output

# The sets whose compute_time the score uses (time_p95 comes from performance).
TIMED_SETS = ("performance",)
PING_ROUNDS = 20


@dataclass
class SetAnswers:
    """What the submission answered on one set, in the set's row order."""

    name: str
    sample_ids: list[str]
    states: list[str]
    probabilities: np.ndarray  # (n, 3): KO, OK, UNKNOWN
    ood: np.ndarray  # (n,)
    times: np.ndarray  # (n,) seconds per image, measured by the parent: the scored time
    notes: Notes = field(default_factory=Notes)
    timings: dict = field(default_factory=dict)
    maps: bytes | None = None  # PRED/<set>.explainability.parquet's bytes; None: no maps


def batch_message(op: str, index: int, items, size: int, meta, device) -> dict:
    return {"op": op, "id": index, "size": size, "images": items, "meta": meta,
            "device": device}


def synthetic_buffer(pool: BufferPool, items, nbytes: int, seed: int = 0) -> BatchBuffer:
    """Noise images laid out as ``items``: the warm-up batch, no evaluation pixel in it."""
    buffer = pool.take(nbytes)
    rng = np.random.default_rng(seed)
    for off, h, w in items:
        buffer.view(off, h, w)[:] = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    buffer.seal()
    return buffer


def handover(child: Child, msg: dict, buffer: BatchBuffer, timeout: float | None, what: str,
             limit: str = "the per-batch time limit"):
    """Child.handover of a sealed buffer (sealed here if it is not yet, before the clock);
    then the buffer is closed on our side, never written or reused: whatever the submission
    kept of it shows this batch only."""
    try:
        buffer.seal()
        return child.handover(msg, buffer, timeout, what, limit)
    finally:
        buffer.close()


def handover_overhead(child: Child, pool: BufferPool, items, timeout: float | None,
                      rounds: int = PING_ROUNDS) -> float:
    """Median seconds of a hand-over round trip of a batch laid out as ``items``, without
    predict(): message, descriptor, mapping, views, answer."""
    nbytes = layout([(h, w) for _off, h, w in items])[1]
    # one buffer for every round: it holds no pixel (never written) and is sealed before
    # the first, so handing it over again shows nothing; its pages are never touched, so
    # never made either (collapse=False: a fallback memfd's 2 MiB pages would be zeroed whole
    # for nothing, the fallback's largest loss of throughput: benchmarks/README.md)
    buffer = BatchBuffer(max(1, -(-nbytes // STEP) * STEP), pool.dirs, pool.kind,
                         collapse=False)
    seconds = []
    try:
        buffer.seal()
        for i in range(rounds):
            msg = batch_message("ping", -1 - i, items, buffer.size, [], None)
            seconds.append(child.handover(msg, buffer, timeout, "a hand-over check")[1])
    finally:
        buffer.close()
    return float(np.median(seconds))


def warm_up(child: Child, pool: BufferPool, msg: dict, what: str, timeout: float | None,
            limit: str) -> float:
    """The untimed warm-up call on noise shaped like ``msg``'s batch; returns its seconds."""
    t0 = time.perf_counter()
    buffer = synthetic_buffer(pool, msg["images"], msg["size"])
    handover(child, {**msg, "id": -1, "size": buffer.size}, buffer, timeout,
             f"the warm-up call before {what}", limit)
    return time.perf_counter() - t0


def _with_what(timeout, what: str) -> tuple:
    t, limit = timeout()
    return t, what, limit


_IMAGE = re.compile(r"explainability of image (\d+)\b")


def _validated(res: dict, b_ids: list[str], notes: Notes, what: str):
    """The batch's answer checked and normalised (validate.py); ChildFault when invalid."""
    if res.get("ignored"):
        notes.add("output keys ignored", ", ".join(res["ignored"]), len(b_ids))
    problem = res.get("error") or res.get("maps_error")
    if problem:
        image = _IMAGE.match(problem)  # name the sample the child's line counts by position
        if image and int(image.group(1)) < len(b_ids):
            problem += f" (sample {b_ids[int(image.group(1))]})"
        raise ChildFault(f"invalid output of predict() on {what}: {problem}", "", "validate")
    try:
        return validate_output(res["output"], b_ids, notes)
    except OutputError as exc:
        raise ChildFault(f"invalid output of predict() on {what}: {exc}", "", "validate") \
            from None


def first_call_timings(child: Child, pool: BufferPool, msg: dict, what: str, warmup: bool,
                       timeout: Callable[[], tuple[float | None, str]]) -> dict:
    """Before the run's first timed call: the warm-up (optional), then the hand-over
    measurement on the same layout."""
    timings = {"warmup_s": warm_up(child, pool, msg, what, *timeout())} if warmup else {}
    timings["handover_overhead_s"] = handover_overhead(child, pool, msg["images"], timeout()[0])
    timings["handover_batch"] = len(msg["images"])
    return timings


# over 60 lines: the timed loop (hand-over, answer, refill) kept in one place so that no
# decoding can slip into a timed call
def predict_set(child: Child, pool: BufferPool, name: str, sample_ids: list[str],
                paths: list[str], meta: list[dict], *, batch_size: int, workers: int,
                exclusive: bool, first: bool, warmup: bool, stock_bytes: int = 0,
                timeout: Callable[[], tuple[float | None, str]],
                progress: Callable[[int], None] = lambda n: None) -> SetAnswers:
    """Run ``child`` over one set. Raises ChildFault on the first failure.

    ``timeout()`` gives the seconds left for the next call and the name of that limit;
    ``stock_bytes``: when ``exclusive``, the memory the decoded stock may take (0: one
    batch at a time); ``time_p95`` is the TIME_PERCENTILE-th percentile, numpy's linear (the default score's);
    ``progress(k)`` is called after each batch of k images. When ``first`` (the run's
    first set), the first call is preceded by :func:`first_call_timings`.
    """
    # over 60 lines: the batch loop and the set's timings are one story, read in one place
    n = len(sample_ids)
    batches = [paths[i:i + batch_size] for i in range(0, n, batch_size)]
    states, probs, ood = [], [], []
    times, child_times = np.empty(n), np.empty(n)
    notes, stats, maps = Notes(), DecodeStats(), MapsWriter()
    timings: dict = {}
    t_start = time.perf_counter()
    # exclusive: decode only between answer and next hand-over, in bursts of up to
    # stock_bytes of batches on every core, so that the measured time never shares the CPU
    # with our decoding; the stock stays in our own unsent buffers. Otherwise keep every
    # core busy decoding ahead of the child.
    prefetch = Prefetcher(batches, pool, workers, 1 if exclusive else workers + 1, stats,
                          ahead=not exclusive, stock_bytes=stock_bytes)
    try:
        for batch in prefetch:
            lo = batch.index * batch_size
            b_ids = sample_ids[lo:lo + len(batch.items)]
            what = f"set {name}, batch {batch.index + 1}/{len(batches)} " \
                   f"(samples {b_ids[0]} .. {b_ids[-1]})"
            msg = batch_message("batch", batch.index, batch.items, batch.buffer.size,
                                meta[lo:lo + len(batch.items)], child.device)
            try:
                if first:
                    first = False
                    timings.update(first_call_timings(child, pool, msg, what, warmup, timeout))
            except BaseException:
                batch.buffer.close()  # not handed over: ours to free
                raise
            res, seconds = handover(child, msg, batch.buffer, *_with_what(timeout, what))
            v = _validated(res, b_ids, notes, what)
            if res["maps"] is not None:
                maps.add(b_ids, res["maps"])
            states += v.states
            probs.append(v.probabilities)
            ood.append(v.ood)
            times[lo:lo + len(b_ids)] = seconds / len(b_ids)
            child_times[lo:lo + len(b_ids)] = res["seconds"] / len(b_ids)
            progress(len(b_ids))
    finally:
        prefetch.close()
    wall = time.perf_counter() - t_start
    timings.update({
        "n": n, "wall_s": wall, "exclusive": exclusive,
        "predict_s": float(times.sum()),
        "child_predict_s": float(child_times.sum()),  # the child's own clock: diagnostic only
        "decode_s": stats.seconds, "decode_wait_s": prefetch.wait_s,
        "images_per_s": n / wall if wall > 0 else float("inf"),
        "time_median": float(np.median(times)) if n else 0.0,
        "time_p95": float(np.percentile(times, TIME_PERCENTILE)) if n else 0.0})
    return SetAnswers(name, list(sample_ids), states,
                      np.concatenate(probs) if probs else np.zeros((0, 3)),
                      np.concatenate(ood) if ood else np.zeros(0), times, notes, timings,
                      maps.finish())
