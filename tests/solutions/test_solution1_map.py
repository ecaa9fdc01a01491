"""Solution-1's explanation map: valid (the image's size, values in [0, 1]) and peaking at the pore."""

import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "reference-solutions" / "Solution-1"))
from challenge_solution import bead
from challenge_solution.explain import dark_blob_map


def drawn_weld_with_pore(size, pore, angle=20.0, seed=0):
    """A bright ripple-textured bead on a grey plate (as tests/solutions/test_bead.py draws it) with a dark pore
    of radius 1/60 of the height at ``pore`` = (x, y) on the bead."""
    w, h = size
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    k = h / bead.WORK_H
    t = np.deg2rad(angle)
    along = (xx - w / 2) * np.cos(t) + (yy - h / 2) * np.sin(t)
    across = -(xx - w / 2) * np.sin(t) + (yy - h / 2) * np.cos(t)
    r = across / (14 * k)
    grey = 90 + rng.normal(0, 2, (h, w))
    grey = np.where(np.abs(r) < 1, 200 * np.sqrt(np.clip(1 - r * r, 0, 1)) *
                    (1 + 0.15 * np.cos(2 * np.pi * along / (7 * k))) + 20, grey)
    img = np.repeat(np.clip(grey, 0, 255).astype(np.uint8)[..., None], 3, axis=2)
    cv2.circle(img, pore, max(2, h // 60), (25, 25, 25), -1)
    return img


@pytest.mark.parametrize("size", [(480, 270), (1920, 1080), (960, 541)])
def test_map_is_valid_and_peaks_at_the_pore(size):
    w, h = size
    t = np.deg2rad(20.0)
    pore = (int(w / 2 + 0.2 * w * np.cos(t)), int(h / 2 + 0.2 * w * np.sin(t)))  # on the bead's axis
    img = drawn_weld_with_pore(size, pore)
    m = dark_blob_map(img)
    assert m.shape == (h, w) and np.isfinite(m).all() and m.min() >= 0.0 and m.max() <= 1.0
    assert m.max() > 0.9  # the peak, blurred a little by the linear upscaling
    y, x = np.unravel_index(np.argmax(m), m.shape)
    assert np.hypot(x - pore[0], y - pore[1]) <= 0.03 * np.hypot(w, h), (x, y, pore)
    # a pore moved elsewhere on the bead moves the peak with it
    other = (int(w / 2 - 0.25 * w * np.cos(t)), int(h / 2 - 0.25 * w * np.sin(t)))
    y2, x2 = np.unravel_index(np.argmax(dark_blob_map(drawn_weld_with_pore(size, other))), m.shape)
    assert np.hypot(x2 - other[0], y2 - other[1]) <= 0.03 * np.hypot(w, h)


def test_flat_image_gives_a_zero_map():
    m = dark_blob_map(np.full((90, 160, 3), 128, np.uint8))
    assert m.shape == (90, 160) and not m.any()

