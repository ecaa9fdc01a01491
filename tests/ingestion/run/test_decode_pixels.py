"""The hand-over buffer holds exactly the pixels of a plain decode: cv2.imread by path, BGR reversed.

Guards every change of the decode path (decoding in RGB directly, into the buffer, buffer
buffers): full-HD and half-HD JPEGs with noise and chroma subsampling (lossy: the decoder's
own rounding shows), a PNG, odd sizes, in both modes of the Prefetcher (decoding ahead,
and the all-core bursts of the timed sets), read as the child maps them (copy-on-write).
"""

import mmap

import cv2
import numpy as np
import pytest

from challenge_welding.ingestion.run.decode import Prefetcher
from challenge_welding.ingestion.handover.buffers import BufferPool


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


def check_pixels(batches, ahead) -> BufferPool:
    """Every batch's buffer, mapped as the child maps it, holds the plain decode's pixels."""
    pool = BufferPool()
    # stock of 32 MiB: e.g. bursts of batches 0-1, then 2-3 in the first burst's buffers
    pre = Prefetcher(batches, pool, workers=2, lookahead=2, ahead=ahead, stock_bytes=32 << 20)
    try:
        for batch in pre:
            mm = mmap.mmap(batch.buffer.fd, batch.buffer.size, access=mmap.ACCESS_COPY)  # as the child
            for (off, h, w), path in zip(batch.items, batches[batch.index]):
                got = np.ndarray((h, w, 3), np.uint8, buffer=mm, offset=off)
                expected = plain(path)
                assert got.shape == expected.shape
                assert np.array_equal(got, expected), path
                del got
            mm.close()
            batch.buffer.close()  # handed over: never comes back
    finally:
        pre.close()
        pool.close()
    return pool


@pytest.mark.parametrize("ahead", [True, False])
def test_buffer_pixels_equal_a_plain_decode(images, ahead):
    batches = [images[0:3], images[3:5], images[5:7], images[0:2]]
    assert check_pixels(batches, ahead).made == 4  # a fresh buffer per batch


@pytest.fixture(scope="module")
def odd_files(tmp_path_factory, images):
    """Files whose header alone does not give the decoded size: an EXIF-rotated JPEG (the
    decoder turns it), and a JPEG and a PNG whose header size is unknown to the probe."""
    from PIL import Image

    folder = tmp_path_factory.mktemp("odd")
    rng = np.random.default_rng(1)
    img = cv2.GaussianBlur(rng.integers(0, 256, (300, 500, 3), dtype=np.uint8), (5, 5), 0)
    pil = Image.fromarray(img[:, :, ::-1])
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise to display
    rotated = str(folder / "rotated.jpeg")
    pil.save(rotated, quality=90, exif=exif)
    assert cv2.imread(rotated, cv2.IMREAD_COLOR).shape == (500, 300, 3)  # the decoder turns it
    from challenge_welding.ingestion.run.decode import probe

    assert probe(rotated) == (500, 300)  # the header read knows it: decoded in place
    return [rotated, images[1], images[3]]


@pytest.mark.parametrize("ahead", [True, False])
def test_sizes_the_header_does_not_give_are_laid_out_again(odd_files, ahead, monkeypatch):
    from challenge_welding.ingestion.run import decode

    real = decode.probe
    lied = {odd_files[1]: (100, 100), odd_files[2]: None}  # a wrong size, an unread header
    monkeypatch.setattr(decode, "probe", lambda p: lied[p] if p in lied else real(p))
    check_pixels([odd_files[:1], odd_files, odd_files[1:]], ahead)
