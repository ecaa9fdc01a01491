"""A decode stock's buffers outside the ingestion: where does the memfd fallback's cost go?

The ingestion decodes, between two timed calls, a stock of batches on every core, each image
straight into its place in a fresh batch buffer (run/decode.py), then seals the buffers and
hands them over (handover/buffers.py). This script does the same with the real BatchBuffer and
cv2.imread into its views, on two threads, a stock of ``--stock`` batches of ten full-HD
JPEGs, in four ways, alternated round after round, and prints the CPU per batch:

- reused: the former way, one buffer per slot of the stock, faulted once, rewritten in place;
- memfd-collapse: the fallback a Codabench worker gets (a sealed memfd, 2 MiB pages by
  MADV_COLLAPSE of the whole buffer when it is made);
- memfd-per-image: the same memfd collapsed one image at a time, just before its decode, on
  the decoder's thread (images laid out on 2 MiB boundaries): the zeroing cache-warm;
- tmpfs: the private huge-page tmpfs (root, or a user namespace), pages zeroed in the decoder's
  own write faults.

    .venv/bin/python benchmarks/handover_stock.py [--rounds 10] [--stock 6]
"""

from __future__ import annotations

import argparse
import ctypes
import fcntl
import mmap
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cv2
import numpy as np

from challenge_welding.ingestion.handover import buffers as B

H, W = 1080, 1920
NBYTES = H * W * 3
PER_IMAGE = -(-NBYTES // B.HUGE) * B.HUGE  # one image on whole 2 MiB pages


def make_jpegs(folder: Path, n: int = 10) -> list[str]:
    """``n`` full-HD JPEGs of smooth noise (about what a weld photo costs to decode)."""
    rng = np.random.default_rng(0)
    paths = []
    for i in range(n):
        small = rng.integers(0, 255, (135, 240, 3), np.uint8)
        image = cv2.resize(small, (W, H), interpolation=cv2.INTER_CUBIC)
        image = cv2.add(image, rng.integers(0, 20, image.shape, np.uint8))
        path = folder / f"img{i}.jpg"
        cv2.imwrite(str(path), image, [cv2.IMWRITE_JPEG_QUALITY, 90])
        paths.append(str(path))
    return paths


class Ways:
    def __init__(self, paths: list[str], stock: int):
        self.paths, self.stock = paths, stock
        self.items, nbytes = B.layout([(H, W)] * len(paths))
        self.size = -(-nbytes // B.HUGE) * B.HUGE
        self.pool = ThreadPoolExecutor(2)
        self.reused: list[mmap.mmap] = []

    def _decode_all(self, views) -> None:
        futures = [self.pool.submit(lambda v=v, k=k: cv2.imread(self.paths[k], v,
                                                                cv2.IMREAD_COLOR_RGB) is None)
                   for v, k in views]
        assert not any(f.result() for f in futures)

    @staticmethod
    def _child_maps(fd: int, size: int) -> None:  # what the child does with a sealed buffer
        mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ).close()

    def reused_way(self) -> None:
        if not self.reused:
            for _ in range(self.stock):
                fd = os.memfd_create("reused")
                os.ftruncate(fd, self.size)
                m = mmap.mmap(fd, self.size)
                m[:] = bytes(self.size)
                self.reused.append(m)
        self._decode_all([(np.frombuffer(m, np.uint8, NBYTES, off).reshape(H, W, 3), k)
                          for m in self.reused for k, (off, _h, _w) in enumerate(self.items)])

    def fresh_way(self, kind: str, way: str) -> None:
        os.environ[B.HANDOVER_ENV] = way
        buffers = [B.BatchBuffer(self.size, kind=kind) for _ in range(self.stock)]
        self._decode_all([(b.view(*item), k) for b in buffers
                          for k, item in enumerate(self.items)])
        for b in buffers:
            self._child_maps(b.seal(), self.size)
            b.close()

    def per_image_way(self) -> None:
        size = PER_IMAGE * len(self.paths)
        made = [self._aligned(size) for _ in range(self.stock)]

        def one(buffer, k):
            _fd, anon, shift, mm = buffer
            off = k * PER_IMAGE
            for j in range(off, off + PER_IMAGE, B.HUGE):
                mm[j] = 0  # one small page per 2 MiB to collapse around
            anon.madvise(B.MADV_COLLAPSE, shift + off, PER_IMAGE)
            view = np.frombuffer(mm, np.uint8, NBYTES, off).reshape(H, W, 3)
            return cv2.imread(self.paths[k], view, cv2.IMREAD_COLOR_RGB) is None

        futures = [self.pool.submit(one, b, k) for b in made for k in range(len(self.paths))]
        assert not any(f.result() for f in futures)
        for fd, anon, _shift, mm in made:
            mm.release()
            anon.close()
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, B.SEALS)
            self._child_maps(fd, size)
            os.close(fd)

    @staticmethod
    def _aligned(size: int):
        fd = os.memfd_create("per-image", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        os.ftruncate(fd, size)
        anon = mmap.mmap(-1, size + B.HUGE, flags=mmap.MAP_PRIVATE)
        probe = ctypes.c_char.from_buffer(anon)
        base = ctypes.addressof(probe)
        del probe
        shift = -base % B.HUGE
        got = B._libc().mmap(base + shift, size, mmap.PROT_READ | mmap.PROT_WRITE,
                             mmap.MAP_SHARED | B.MAP_FIXED, fd, 0)
        assert got == base + shift
        return fd, anon, shift, memoryview(anon)[shift:shift + size]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--stock", type=int, default=6)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="cw-bench-stock-") as tmp:
        ways = Ways(make_jpegs(Path(tmp)), args.stock)
        os.environ[B.HANDOVER_ENV] = "auto"
        table = {"reused": ways.reused_way,
                 "memfd-collapse": lambda: ways.fresh_way("memfd", "memfd"),
                 "memfd-per-image": ways.per_image_way}
        if B.huge_folder() is not None:
            table["tmpfs"] = lambda: ways.fresh_way("tmpfs", "auto")
        cpu: dict[str, list[float]] = {k: [] for k in table}
        order = list(table)
        for r in range(args.rounds):
            for name in (order if r % 2 == 0 else order[::-1]):
                c0 = time.process_time()
                table[name]()
                cpu[name].append((time.process_time() - c0) / args.stock)
    print(f"a stock of {args.stock} batches of 10 full-HD JPEGs, 2 decoder threads, "
          f"{args.rounds} rounds alternated; CPU ms per batch (median, min-max):")
    for name, xs in cpu.items():
        print(f"  {name:16s} {np.median(xs) * 1e3:7.1f} ({min(xs) * 1e3:.1f}-{max(xs) * 1e3:.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
