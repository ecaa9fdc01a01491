"""Background decoding into shared memory: order, content, and the exclusive mode."""

import time

import cv2
import numpy as np

from challenge_welding.ingestion.decode import DecodeStats, Prefetcher, read_rgb
from challenge_welding.ingestion.protocol import SlotPool


def make_jpegs(folder, n):
    paths = []
    for i in range(n):
        img = np.zeros((40 + 8 * (i % 3), 64, 3), np.uint8)
        img[:, :, 2] = 10 * i  # red channel in BGR order
        p = folder / f"{i}.png"  # lossless: exact values
        cv2.imwrite(str(p), img)
        paths.append(str(p))
    return paths


def test_batches_come_in_order_as_rgb_in_shared_memory(tmp_path):
    paths = make_jpegs(tmp_path, 10)
    batches = [paths[i:i + 3] for i in range(0, 10, 3)]
    with SlotPool(4) as pool:
        pre = Prefetcher(batches, pool, workers=2, lookahead=3)
        seen = []
        for batch in pre:
            for k, (off, h, w) in enumerate(batch.items):
                i = batch.index * 3 + k
                img = batch.slot.view(off, h, w)
                assert img.shape == (40 + 8 * (i % 3), 64, 3)
                assert img[0, 0].tolist() == [10 * i, 0, 0]  # RGB: red first
                np.testing.assert_array_equal(img, read_rgb(paths[i]))
            seen.append(batch.index)
            pool.release(batch.slot)
        pre.close()
    assert seen == [0, 1, 2, 3]


def test_exclusive_mode_never_decodes_during_predict(tmp_path):
    paths = make_jpegs(tmp_path, 12)
    batches = [paths[i:i + 2] for i in range(0, 12, 2)]
    stats = DecodeStats()
    predicts = []
    with SlotPool(2) as pool:
        pre = Prefetcher(batches, pool, workers=2, lookahead=1, stats=stats)
        for batch in pre:
            pre.settle()
            t0 = time.perf_counter()
            time.sleep(0.02)  # the "predict" call
            predicts.append((t0, time.perf_counter()))
            pool.release(batch.slot)
        pre.close()
    assert len(stats.intervals) == 12 and len(predicts) == 6
    overlaps = [(d, p) for d in stats.intervals for p in predicts if d[0] < p[1] and p[0] < d[1]]
    assert overlaps == []
