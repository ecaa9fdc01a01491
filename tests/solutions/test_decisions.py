"""Solution-1's decision layer: break-even points and soft outputs worked out by hand."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "reference-solutions" / "Solution-1"))


def test_soft_thresholds_are_the_cost_matrix_break_even_points():
    from challenge_solution.model import soft_thresholds

    cost = [[26.4, 3000, 41], [30, 0.4, 20]]
    t = soft_thresholds(cost, n_ko=100, n_ok=1200)
    # OK vs UNKNOWN: 3000 q + 0.4 (1 - q) = 41 q + 20 (1 - q)  ->  q = 19.6 / 2978.6
    assert t["q_ok"] == pytest.approx(19.6 / 2978.6)
    # UNKNOWN vs KO: 41 q + 20 (1 - q) = 26.4 q + 30 (1 - q)  ->  q = 10 / 24.6
    assert t["q_ko"] == pytest.approx(10 / 24.6)
    # ECE: 0.8 / 100 q = 0.2 / 1200 (1 - q)  ->  odds 1 / 48
    assert t["t_r"] == pytest.approx(1 / 49)


def test_decisions_and_soft_outputs_by_hand():
    from challenge_solution.model import Model, PARAMS

    params = {k: 0.0 for k in PARAMS}
    params.update(t_ko=0.25, t_ok=0.02, t_r=0.02, q_ok=0.0066, q_ko=0.4065, eps=1e-3)
    model = Model(params)
    q = np.array([0.001, 0.01, 0.03, 0.3, 0.5, 0.9])
    ood = np.array([0, 0, 0, 0, 0, 2.0])
    states, probs, _ = model.decide_scores(q, ood)
    assert list(states) == ["OK", "OK", "UNKNOWN", "KO", "KO", "UNKNOWN"]
    expected = [
        [0, 1, 0],            # OK, and OK is the cheapest answer: sharp
        [0, 1e-3, 0.999],     # OK above the break-even: mass on UNKNOWN, ratio OK (q < t_r)
        [1e-3, 0, 0.999],     # UNKNOWN, ratio KO
        [1e-3, 0, 0.999],     # KO below q_ko: UNKNOWN is cheaper on average
        [1, 0, 0],            # KO above q_ko: sharp
        [1e-3, 0, 0.999],     # OOD: UNKNOWN
    ]
    np.testing.assert_allclose(probs, expected, atol=1e-12)
