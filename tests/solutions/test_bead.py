"""Solution-1's bead-local features: geometry found on drawn images whose answer is known."""

import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.ndimage import median_filter

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "reference-solutions" / "Solution-1"))
from challenge_solution import bead


def drawn_weld(angle, offset=0.0, half_width=14, size=(480, 270), ripples=True, seed=0):
    """A bright ripple-textured band on a grey plate, at ``angle`` and ``offset`` px (at 180
    lines) from the centre; the angle as in the synthetic renderer: direction (cos a, sin a)
    with y pointing down, so that cv2's rotation by ``angle`` makes the band horizontal."""
    w, h = size
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    k = h / bead.WORK_H
    t = np.deg2rad(angle)
    along = (xx - w / 2) * np.cos(t) + (yy - h / 2) * np.sin(t)
    across = -(xx - w / 2) * np.sin(t) + (yy - h / 2) * np.cos(t) - offset * k
    r = across / (half_width * k)
    bead_mask = np.abs(r) < 1
    grey = 90 + rng.normal(0, 2, (h, w))
    ripple = 0.15 * np.cos(2 * np.pi * along / (7 * k)) if ripples else 0.0
    grey = np.where(bead_mask, 200 * np.sqrt(np.clip(1 - r * r, 0, 1)) * (1 + ripple) + 20, grey)
    return np.repeat(np.clip(grey, 0, 255).astype(np.uint8)[..., None], 3, axis=2), along, across


@pytest.mark.parametrize("angle", [0.0, 35.0, -22.0, 78.0, -60.0])
def test_find_bead_recovers_angle_and_offset(angle):
    img, _, _ = drawn_weld(angle, offset=-10.0)
    contrast, found, offset, _ = bead.find_bead(bead.working_grey(img))
    diff = (found - angle + 90) % 180 - 90  # a line at a and a + 180 is the same line
    assert abs(diff) <= 1.5, found
    assert contrast > 0.2
    assert offset == pytest.approx(-10.0, abs=2.5)  # 2 px bins at half the working height


def test_strip_puts_the_bead_axis_on_the_centre_row():
    img, _, _ = drawn_weld(30.0, offset=12.0, ripples=False)
    g = bead.working_grey(img)
    _, angle, offset, _ = bead.find_bead(g)
    s = bead.strip(g, angle, offset)
    assert s.shape[0] == 2 * bead.HALF + 1 and s.shape[1] >= 150
    profile = s.mean(axis=1)
    assert abs(int(np.argmax(profile)) - bead.HALF) <= 2
    # the drawn half-width is 14 px: 15 px off the axis is plate, 10 px is bead
    assert profile[bead.HALF + 10] > profile[bead.HALF + 17] + 0.3


def test_running_median_matches_scipy():
    a = np.random.default_rng(1).normal(size=(7, 40)).astype(np.float32)
    np.testing.assert_allclose(bead._running_median(a, 13), median_filter(a, size=(1, 13), mode="reflect"),
                               rtol=1e-6)


@pytest.mark.parametrize("mask, run", [([0, 1, 1, 0, 1, 1, 1, 0], 3), ([0, 0, 0], 0), ([1, 1], 2), ([1, 0, 1], 1)])
def test_longest_run(mask, run):
    assert bead._longest_run(np.array(mask, bool)) == run


def test_a_dark_pore_on_the_bead_shows_in_the_core_features():
    clean, along, across = drawn_weld(20.0)
    pored = clean.copy()
    k = clean.shape[0] / bead.WORK_H
    pore = (along - 40 * k) ** 2 + across ** 2 < (5 * k) ** 2  # radius 5 px on the axis
    pored[pore] = 25
    f0, f1 = bead.bead_features(clean), bead.bead_features(pored)
    assert f0.shape == f1.shape == (65,)
    assert np.isfinite(f0).all() and np.isfinite(f1).all()
    # layout: 4 global values, then 12 per band (core first: 6 quantiles, min at 10, max),
    # then the along-bead core mean: its minimum at 40, runs below -0.05/-0.1/-0.2 at 42-44
    core_min, along_min = 10, 40
    assert f1[core_min] < f0[core_min] - 0.3
    assert f1[along_min] < f0[along_min] - 0.1
    # the darkest run along the core spans about the pore's diameter (10 px) in half-widths
    # the half-width is read at half height between crest (220) and plate (90): where
    # 200 sqrt(1 - r^2) + 20 = 155, r = 0.74, so 0.74 x 14 = 10.3 px
    half_width = f1[1] * bead.HALF
    assert half_width == pytest.approx(10.3, abs=1.5)
    assert f1[44] * half_width == pytest.approx(10, abs=5)
    assert f0[44] == 0


def test_degenerate_images_give_finite_features():
    for img in (np.zeros((135, 240, 3), np.uint8), np.full((20, 20, 3), 255, np.uint8)):
        f = bead.bead_features(img)
        assert f.shape == (65,) and np.isfinite(f).all()

