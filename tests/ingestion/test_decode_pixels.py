"""The hand-over buffer holds exactly the pixels of a plain decode: cv2.imread by path, BGR reversed.

Guards every change of the decode path (decoding in RGB directly, into the buffer, buffer
reuse): full-HD and half-HD JPEGs with noise and chroma subsampling (lossy: the decoder's
own rounding shows), a PNG, odd sizes, in both modes of the Prefetcher (decoding ahead,
and the all-core bursts of the timed sets) and through a reused buffer.
"""

import mmap

import cv2
import numpy as np
import pytest

from challenge_welding.ingestion.decode import Prefetcher
from challenge_welding.ingestion.protocol import BufferPool


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pixels")
    rng = np.random.default_rng(0)
    paths = []
    for i, (h, w) in enumerate([(1080, 1920), (540, 960), (1080, 1920), (271, 481), (540, 960),
                                (90, 161), (1080, 1920)]):
        img = cv2.GaussianBlur(rng.integers(0, 256, (h, w, 3), dtype=np.uint8), (5, 5), 0)
        img[:, : w // 3, 0] = 200  # strong colour edges: chroma upsampling matters
        ext = ".png" if i == 3 else ".jpeg"
        path = folder / f"{i}{ext}"
        cv2.imwrite(str(path), img, [cv2.IMWRITE_JPEG_QUALITY, 85] if ext == ".jpeg" else [])
        paths.append(str(path))
    return paths


def plain(path):
    return cv2.imread(path, cv2.IMREAD_COLOR)[:, :, ::-1]


@pytest.mark.parametrize("ahead", [True, False])
def test_buffer_pixels_equal_a_plain_decode(images, ahead):
    batches = [images[0:3], images[3:5], images[5:7], images[0:2]]  # the last batch reuses a buffer
    pool = BufferPool(held=lambda idents: set())  # nobody holds a returned buffer: reused
    pre = Prefetcher(batches, pool, workers=2, lookahead=2, ahead=ahead, stock_bytes=64 << 20)
    try:
        for batch in pre:
            mm = mmap.mmap(batch.buffer.fd, batch.buffer.size)  # as the child maps it
            for (off, h, w), path in zip(batch.items, batches[batch.index]):
                got = np.ndarray((h, w, 3), np.uint8, buffer=mm, offset=off)
                expected = plain(path)
                assert got.shape == expected.shape
                assert np.array_equal(got, expected), path
                del got
            mm.close()
            pool.hand_back(batch.buffer)
    finally:
        pre.close()
        pool.close()
    assert pool.reused >= 1
