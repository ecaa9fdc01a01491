"""Background decoding into hand-over buffers: order, content, and the exclusive mode."""

import mmap
import os
import time

import cv2
import numpy as np

from challenge_welding.ingestion.run.decode import DecodeStats, Prefetcher, read_rgb
from challenge_welding.ingestion.handover.buffers import STEP, BufferPool


def make_jpegs(folder, n):
    paths = []
    for i in range(n):
        img = np.zeros((40 + 8 * (i % 3), 64, 3), np.uint8)
        img[:, :, 2] = 10 * i  # red channel in BGR order
        p = folder / f"{i}.png"  # lossless: exact values
        cv2.imwrite(str(p), img)
        paths.append(str(p))
    return paths


def test_batches_come_in_order_as_rgb_in_their_own_buffers(tmp_path):
    paths = make_jpegs(tmp_path, 10)
    batches = [paths[i:i + 3] for i in range(0, 10, 3)]
    pre = Prefetcher(batches, BufferPool(), workers=2, lookahead=3)
    seen, buffers = [], []
    for batch in pre:
        # what the child maps: the buffer's descriptor, read independently of our mapping
        mm = mmap.mmap(batch.buffer.fd, batch.buffer.size, access=mmap.ACCESS_COPY)
        for k, (off, h, w) in enumerate(batch.items):
            i = batch.index * 3 + k
            img = np.ndarray((h, w, 3), np.uint8, buffer=mm, offset=off)
            assert img.shape == (40 + 8 * (i % 3), 64, 3)
            assert img[0, 0].tolist() == [10 * i, 0, 0]  # RGB: red first
            np.testing.assert_array_equal(img, read_rgb(paths[i]))
            del img
        mm.close()
        seen.append(batch.index)
        buffers.append(batch.buffer)
    pre.close()
    assert seen == [0, 1, 2, 3]
    # a buffer per batch (none was given back, so none was reused: four distinct files)
    assert len({os.fstat(b.fd).st_ino for b in buffers}) == 4
    for b in buffers:
        b.close()


def test_exclusive_mode_never_decodes_during_predict(tmp_path):
    paths = make_jpegs(tmp_path, 12)
    batches = [paths[i:i + 2] for i in range(0, 12, 2)]
    stats = DecodeStats()
    predicts = []
    pre = Prefetcher(batches, BufferPool(), workers=2, lookahead=1, stats=stats, ahead=False)
    for batch in pre:
        # while batch k is "predicted", exactly its images and those before were decoded
        assert stats.images == 2 * (batch.index + 1)
        t0 = time.perf_counter()
        time.sleep(0.02)  # the "predict" call
        predicts.append((t0, time.perf_counter()))
        batch.buffer.close()
    pre.close()
    assert len(stats.intervals) == 12 and len(predicts) == 6
    overlaps = [(d, p) for d in stats.intervals for p in predicts if d[0] < p[1] and p[0] < d[1]]
    assert overlaps == []


def test_exclusive_mode_decodes_in_bursts_of_the_stock_between_predicts(tmp_path):
    paths = make_jpegs(tmp_path, 14)  # 7 batches of 2
    batches = [paths[i:i + 2] for i in range(0, 14, 2)]
    stats = DecodeStats()
    pool = BufferPool(keep=10)
    # a batch of these small images takes one buffer step (STEP): a stock of 3 batches
    # (sizes read from the headers before decoding), bursts of 3, 3, then 1
    pre = Prefetcher(batches, pool, workers=2, lookahead=1, stats=stats, ahead=False,
                     stock_bytes=3 * STEP)
    decoded_when_held, predicts = [], []
    for batch in pre:
        decoded_when_held.append(stats.images)
        t0 = time.perf_counter()
        time.sleep(0.02)  # the "predict" call
        predicts.append((t0, time.perf_counter()))
        assert batch.buffer.sealed  # written and sealed before it is handed out
        pool.give_back(batch.buffer)  # sealed: may have crossed, so closed, never reused
        assert batch.buffer.fd == -1
    pre.close()
    # batches 0 1 2 | 3 4 5 | 6: each burst wholly decoded before its first batch is held
    assert decoded_when_held == [6, 6, 6, 12, 12, 12, 14]
    overlaps = [(d, p) for d in stats.intervals for p in predicts if d[0] < p[1] and p[0] < d[1]]
    assert overlaps == []
    assert (pool.made, pool.reused, pool.free) == (7, 0, [])  # a fresh buffer per batch
    pool.close()


def test_prefilled_buffers_serve_the_first_stock_without_making_any(tmp_path):
    paths = make_jpegs(tmp_path, 12)
    batches = [paths[i:i + 2] for i in range(0, 12, 2)]
    pool = BufferPool(keep=10)
    pool.prefill(100, 4)  # as the ingestion does while the child starts: 4 buffers of one STEP
    assert (pool.made, pool.reused, len(pool.free)) == (4, 0, 4)
    pre = Prefetcher(batches, pool, workers=2, lookahead=1, ahead=False, stock_bytes=3 * STEP)
    for batch in pre:
        batch.buffer.close()  # handed over: never comes back
    pre.close()
    # the first burst of 3 in prefilled buffers, 1 spare left for the second, 2 made
    assert (pool.made, pool.reused) == (6, 4)
    pool.close()


def test_ingest_makes_the_first_stock_while_the_child_starts_even_with_mixed_resolutions(tmp_path):
    """The buffers made beside the child's start are sized for a batch of the largest image
    of the first batch: later, larger batches still fit them, so the first stock makes none."""
    import pandas as pd

    from challenge_welding.ingestion.run.ingest import ingest

    folder = tmp_path / "input_data" / "performance"
    (folder / "images").mkdir(parents=True)
    rows = []
    for i in range(30):  # batch 1: half and full HD; batches 2-3: full HD only
        w, h = (960, 540) if i < 5 else (1920, 1080)
        cv2.imwrite(str(folder / "images" / f"{i}.jpeg"), np.full((h, w, 3), 90, np.uint8))
        rows.append({"sample_id": f"s{i}", "path": f"images/{i}.jpeg", "welding-seams": "c1",
                     "resolution": [w, h]})
    pd.DataFrame(rows).to_parquet(folder / "metadata.parquet", index=False)
    sub = tmp_path / "sub" / "challenge_solution"
    sub.mkdir(parents=True)
    (sub / "__init__.py").write_text("")
    (sub / "AIComponent.py").write_text(
        "class MyAIComponent:\n"
        "    def load_model(self, config_file=None):\n        pass\n"
        "    def predict(self, input_images, images_meta_informations, device='cpu'):\n"
        "        n = len(input_images)\n"
        "        return {'predictions': ['OK'] * n, 'probabilities': [[0.0, 1.0, 0.0]] * n,\n"
        "                'OOD_scores': [0.0] * n}\n")
    (tmp_path / "sub" / "setup.py").write_text("from setuptools import setup\nsetup(name='s')\n")
    report = ingest(tmp_path / "sub", tmp_path / "input_data", tmp_path / "pred", isolation=False,
                    workers=2, sets=["performance"], progress=False, verbose=False)
    assert report["status"] == "ok", report["errors"]
    # 384 MiB of stock in 64 MiB buffers (a batch of ten full-HD images) = 6, + 1 handed
    # over: 7 spares made beside the child's start; the warm-up takes one, the three batches
    # (one stock) three; nothing is reused once handed over, so 7 made and 4 spares used
    buffers = report["integrity"]["buffers"]
    assert (buffers["made"], buffers["spares_used"]) == (7, 4), buffers
    assert buffers["kind"] in ("tmpfs", "memfd"), buffers  # Linux: never the file fallback
