"""Error-retention curves and R-AUC on hand-computed cases, ties included."""

import numpy as np
import pytest

from challenge_welding.scoring.retention import (
    excess_cost_errors, misclassification_errors, retention_aucs, retention_curve, uncertainty_from_probs,
)
from challenge_welding.scoring.disclosure import curve_steps

COST = {"KO": {"KO": 26.4, "OK": 3000.0, "UNKNOWN": 41.0}, "OK": {"KO": 30.0, "OK": 0.4, "UNKNOWN": 20.0}}
SEAMS = {"c102": 0.2, "c20": 0.4, "c33": 0.4}


def test_no_ties_by_hand():
    # order by uncertainty: errors 0, 1, 0 -> curve 0, 0, 1/3, 1/3
    curve = retention_curve([1, 0, 0], [0.5, 0.1, 0.9])
    assert curve == pytest.approx([0, 0, 1 / 3, 1 / 3])
    res = retention_aucs([1, 0, 0], [0.5, 0.1, 0.9])
    # trapezoids: (0 + 1/3 / 2 + 1/3) / 3 = 1/6
    assert res["r_auc"] == pytest.approx(1 / 6)
    assert res["random_r_auc"] == pytest.approx(1 / 6)
    assert res["oracle_r_auc"] == pytest.approx((1 / 3 / 2) / 3)


def test_ties_are_averaged_per_uncertainty_group():
    # sorted: u=0.0 (e 0), u=0.1 {e 1, e 0} -> 0.5 each, u=0.5 (e 1)
    errors, unc = [1, 0, 1, 0], [0.1, 0.1, 0.5, 0.0]
    assert retention_curve(errors, unc) == pytest.approx([0, 0, 0.125, 0.25, 0.5])
    res = retention_aucs(errors, unc)
    assert res["r_auc"] == pytest.approx((0 + 0.0625 + 0.1875 + 0.375) / 4)  # 0.15625
    assert res["random_r_auc"] == pytest.approx(0.25)
    assert res["oracle_r_auc"] == pytest.approx((0 + 0 + 0.125 + 0.375) / 4)
    # the order of the tied rows in the input does not matter
    assert retention_aucs([0, 1, 1, 0], [0.1, 0.1, 0.5, 0.0])["r_auc"] == pytest.approx(res["r_auc"])


def test_all_tied_equals_random_order():
    e = np.array([1, 0, 0, 1, 1, 0, 0, 0.0])
    res = retention_aucs(e, np.full(8, 0.3))
    assert res["r_auc"] == pytest.approx(res["random_r_auc"])


def test_empty_set_is_nan():
    res = retention_aucs([], [])
    assert np.isnan(res["r_auc"]) and np.isnan(res["random_r_auc"]) and res["n"] == 0
    assert curve_steps(res["curve"], 20, 25) == {"retention": [], "value": []}


def test_uncertainty_and_misclassification():
    assert uncertainty_from_probs([0.9, 0.0, 0.3], [0.1, 0.0, 0.6]) == pytest.approx([0.1, 1.0, 0.4])
    assert misclassification_errors(["KO", "OK", "OK"], ["KO", "UNKNOWN", "KO"]).tolist() == [0, 1, 1]


def test_excess_cost_mean_is_op_by_hand():
    y = ["KO", "OK", "OK"]
    x = ["OK", "OK", "UNKNOWN"]
    seams = ["c102", "c102", "c20"]
    e, normalised = excess_cost_errors(y, x, seams, COST, SEAMS, 1 / 3)
    assert normalised
    # C(yhat) = (0.2 * (3000 + 0.4)/2 + 0.4 * 20) / 0.6 = 513.4
    # C(ideal) = (0.2 * (26.4 + 0.4)/2 + 0.4 * 0.4) / 0.6 = 4.7333..
    # C(human) = (0.2 * (41 + 20)/2 + 0.4 * 20) / 0.6 = 23.5
    op = (513.4 - 2.84 / 0.6) / (23.5 - 2.84 / 0.6)
    assert e.mean() == pytest.approx(op)
    assert e[1] == 0.0
    # seam weights: c102 samples weigh 0.5, the c20 one 2
    assert e[0] / e[2] == pytest.approx((0.5 * 2973.6) / (2 * 19.6))


def test_excess_cost_unknown_seam_uses_default_weight():
    e, _ = excess_cost_errors(["KO", "KO"], ["OK", "KO"], ["c19", "c20"], COST, SEAMS, 0.4)
    # c19 gets 0.4 like c20: both weigh 1, so e[0] = 2973.6 / mean gap (14.6)
    assert e[0] == pytest.approx(2973.6 / 14.6)


def test_published_curve_has_fixed_steps_of_at_least_min_samples():
    """The published curve: 20 even steps of 50 samples over 1000 (was: a point at every error, which
    gave each sample's label back, issue 10)."""
    d = curve_steps(np.linspace(0, 1, 1001), 20, 25)
    assert d["retention"] == pytest.approx([j / 20 for j in range(21)])
    assert d["value"] == pytest.approx([j / 20 for j in range(21)])
    # all errors in the last 4 %: the rise is one step of 500 samples, not 400 single-sample steps
    steep = retention_curve(np.r_[np.zeros(9600), np.ones(400)], np.arange(10000.0))
    d = curve_steps(steep, 20, 25)
    assert len(d["retention"]) == 21 and d["value"][-2] == 0.0 and d["value"][-1] == pytest.approx(0.04)
    # 60 samples: 60 // 25 = 2 steps (30 each); 24 samples: the two end points only
    assert curve_steps(np.linspace(0, 1, 61), 20, 25)["retention"] == [0.0, 0.5, 1.0]
    assert curve_steps(np.linspace(0, 1, 25), 20, 25)["retention"] == [0.0, 1.0]
