"""A winner that holds: the vectorised weight sensitivity against a brute-force enumeration."""

from __future__ import annotations

import numpy as np
import pytest

from challenge_welding.scoring.analyses.weight_sensitivity import (draw_perturbations, rescale_batch,
                                                                   winner_stability)
from challenge_welding.scoring.rescale import final_score, rescale


def test_rescale_batch_is_the_scalar_rescaling():
    rng = np.random.default_rng(0)
    for _ in range(300):
        a1, a2 = rng.uniform(-0.3, 1.1, 2)
        x = rng.uniform(-0.1, 1.1)
        want = rescale(x, a1, a2, 0.1, 0.9)
        assert rescale_batch(np.array([x]), np.array([a1]), np.array([a2]), 0.1, 0.9)[0] == pytest.approx(want)
    assert rescale_batch(np.array([0.3]), np.array([np.nan]), np.array([np.nan]), 0.1, 0.9)[0] == 0.3


def test_brute_force_enumeration_on_a_tiny_case():
    """3 submissions, 5 weight vectors and breakpoints, scored one by one with scoring.rescale and final_score."""
    rng = np.random.default_rng(4)
    keys = ("perf", "uncertainty", "robustness", "ood", "generalization", "drift")
    w0 = np.array([0.30, 0.15, 0.25, 0.20, 0.05, 0.05])
    alpha1 = np.array([0.1, -0.2, 0.2, 0.5, 0.1, 0.3])
    alpha2 = np.array([0.8, 0.6, 0.7, 0.9, 0.85, 0.8])
    weights, a1, a2 = draw_perturbations(w0, alpha1, alpha2, 50.0, 0.05, 5, seed=1)
    raw = rng.uniform(0.2, 0.95, size=(3, 5, 6))
    raw[1] = raw[0]  # a tie: the first place is shared
    res = winner_stability(raw, weights, a1, a2, 0.1, 0.9)
    firsts = np.zeros(3)
    ranks = np.zeros((3, 5), dtype=int)
    for b in range(5):
        scores = []
        for s in range(3):
            rescaled = {k: rescale(raw[s, b, j], a1[b, j], a2[b, j], 0.1, 0.9) for j, k in enumerate(keys)}
            scores.append(float(final_score(rescaled, dict(zip(keys, weights[b])))))
        best = max(scores)
        winners = [s for s in range(3) if scores[s] >= best - 1e-9]
        for s in winners:
            firsts[s] += 1 / len(winners)
        for s in range(3):
            ranks[s, b] = 1 + sum(scores[o] > scores[s] + 1e-9 for o in range(3))
    np.testing.assert_allclose(res["p_first"], firsts / 5)
    np.testing.assert_array_equal(res["ranks"], ranks)
    lo = np.quantile(ranks, 0.025, axis=1, method="lower")
    hi = np.quantile(ranks, 0.975, axis=1, method="higher")
    np.testing.assert_array_equal(res["rank_interval"], np.stack([lo, hi], axis=1))
    assert res["p_first"][0] == res["p_first"][1]


def test_dirichlet_centred_on_the_protocol_weights():
    w0 = np.array([0.30, 0.15, 0.25, 0.20, 0.05, 0.05])
    w, a1, a2 = draw_perturbations(w0, np.zeros(6), np.full(6, 0.5), 200.0, 0.02, 20000, seed=0)
    np.testing.assert_allclose(w.sum(axis=1), 1.0)
    np.testing.assert_allclose(w.mean(axis=0), w0, atol=0.002)
    np.testing.assert_allclose(w.var(axis=0), w0 * (1 - w0) / 201, rtol=0.05)
    assert np.abs(a1).max() <= 0.02 and np.abs(a2 - 0.5).max() <= 0.02
    # a weight of 0 stays 0
    w, _, _ = draw_perturbations(np.array([0.5, 0.5, 0.0]), np.zeros(3), np.ones(3), 10.0, 0.0, 100)
    assert (w[:, 2] == 0).all()


def test_a_clear_winner_holds_and_a_close_one_does_not():
    b = 1000
    w, a1, a2 = draw_perturbations(np.full(6, 1 / 6), np.full(6, np.nan), np.full(6, np.nan), 200.0, 0.0, b)
    raw = np.zeros((3, b, 6))
    raw[0] = 0.9
    raw[1] = 0.5
    raw[2, :, :3], raw[2, :, 3:] = 0.52, 0.48  # the same mean as row 1, another profile
    res = winner_stability(raw, w, a1, a2, 0.1, 0.9)
    assert res["p_first"][0] == 1.0 and res["rank_interval"][0].tolist() == [1, 1]
    assert res["rank_interval"][1].tolist() == [2, 3] and res["rank_interval"][2].tolist() == [2, 3]
