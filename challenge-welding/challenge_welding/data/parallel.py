"""Run per-item work in a process pool with a progress bar, results in input order.

Each item carries its own seed, so the output never depends on which worker ran it.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor


def _init_worker():
    import cv2

    # One OpenCV thread per process: the pool already uses every core.
    cv2.setNumThreads(1)


def default_workers(workers=None) -> int:
    return max(1, int(workers or os.cpu_count() or 1))


def run_parallel(func, items, workers=None, desc="", progress=True):
    """[func(item) for item in items], computed in ``workers`` processes.

    forkserver (not fork): the parent may hold pyarrow / OpenMP threads, and forking a
    threaded process can deadlock.
    """
    from tqdm import tqdm

    items = list(items)
    workers = min(default_workers(workers), max(1, len(items)))
    # a live bar on a terminal only: redirected to a log, its redraws would fill it
    bar = tqdm(total=len(items), desc=desc, unit="img", leave=False, mininterval=0.5,
               file=sys.stderr, disable=not (progress and items and sys.stderr.isatty()))
    try:
        if workers == 1:
            out = []
            for item in items:
                out.append(func(item))
                bar.update()
            return out
        ctx = multiprocessing.get_context("forkserver")
        chunk = max(1, min(16, len(items) // (workers * 8)))
        with ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init_worker) as pool:
            out = []
            for result in pool.map(func, items, chunksize=chunk):
                out.append(result)
                bar.update()
            return out
    finally:
        bar.close()
