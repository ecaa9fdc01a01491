"""The KPI formulas and the piecewise-linear rescaling, on hand-computed values."""

import math

import numpy as np
import pytest

from challenge_welding.scoring import kpis
from challenge_welding.scoring.rescale import final_score, rescale, rescaling_mode


def test_perf_kpi():
    assert kpis.perf_kpi(0.0, 1.0, 0.0, 0.4, 0.6, 1.0, 12.0) == pytest.approx(1.0)
    # t = e - 1 -> ln(1 + t) = 1 -> denominator 13
    assert kpis.perf_kpi(0.0, 1.0, math.e - 1, 0.4, 0.6, 1.0, 12.0) == pytest.approx(1 / 13)
    assert kpis.perf_kpi(1.0, 0.5, 0.0, 0.4, 0.6, 1.0, 12.0) == pytest.approx(0.4 * math.exp(-1) + 0.3)


def test_uncertainty_kpi_clips_uop_and_calibration():
    assert kpis.uncertainty_kpi(0.5, 0.1, 0.2, 0.8, 0.2, 2.0) == pytest.approx(0.5 * (1 - 2 * (0.08 + 0.04)))
    assert kpis.uncertainty_kpi(-0.93, 0.0, 0.0, 0.8, 0.2, 2.0) == 0.0
    assert kpis.uncertainty_kpi(1.0, 0.6, 0.6, 0.8, 0.2, 2.0) == 0.0


def test_robustness_kpi_renormalises_missing_types():
    w = {"blur": 0.3, "luminance": 0.3, "rotation": 0.2, "translation": 0.2}
    r = {"blur": 1.0, "luminance": 0.5, "rotation": 0.0, "translation": 1.0}
    assert kpis.robustness_kpi(r, w) == pytest.approx(0.3 + 0.15 + 0.2)
    assert kpis.robustness_kpi({"blur": 1.0, "rotation": 0.0}, w) == pytest.approx(0.3 / 0.5)
    assert kpis.robustness_kpi({}, w) == 0.0


def test_ood_generalization_drift_kpis():
    assert kpis.ood_kpi(0.6, 1.0, 0.3, 0.7) == pytest.approx(0.88)
    assert kpis.generalization_kpi(2.0, 0.5, 0.4, 0.6, 0.05) == pytest.approx(0.4 * math.exp(-0.1) + 0.3)
    assert kpis.drift_kpi(0.0, 0.5, 0.5, 0.5, 0.05) == pytest.approx(0.75)


def test_three_piece_rescaling():
    a1, a2 = 0.2, 0.6
    assert rescale(a1, a1, a2) == pytest.approx(0.1)
    assert rescale(a2, a1, a2) == pytest.approx(0.9)
    assert rescale(1.0, a1, a2) == pytest.approx(1.0)
    assert rescale(0.0, a1, a2) == 0.0
    assert rescale(0.1, a1, a2) == pytest.approx(0.05)                      # 0.1/0.2 * 0.1
    assert rescale(0.4, a1, a2) == pytest.approx(0.1 + 0.8 * 0.2 / 0.4)     # middle piece
    assert rescale(0.8, a1, a2) == pytest.approx(0.9 + 0.1 * 0.2 / 0.4)     # last piece
    np.testing.assert_allclose(rescale(np.array([-0.5, 1.5]), a1, a2), [0.0, 1.0])  # clipped
    assert rescaling_mode(a1, a2) == "three-piece"


def test_two_piece_and_unscaled():
    assert rescaling_mode(0.0, 0.6) == "two-piece"
    assert rescale(0.3, 0.0, 0.6) == pytest.approx(0.45)
    assert rescale(0.8, -0.1, 0.6) == pytest.approx(0.9 + 0.1 * 0.5)
    for a1, a2 in ((0.6, 0.6), (0.7, 0.5), (None, None), (0.2, 1.0)):
        assert rescaling_mode(a1, a2) == "unscaled"
        assert rescale(0.37, a1, a2) == pytest.approx(0.37)


def test_final_score():
    w = {"perf": 0.3, "uncertainty": 0.15, "robustness": 0.25, "ood": 0.2, "generalization": 0.05, "drift": 0.05}
    assert final_score({k: 1.0 for k in w}, w) == pytest.approx(100.0)
    assert final_score({**{k: 0.0 for k in w}, "perf": 0.5}, w) == pytest.approx(15.0)
