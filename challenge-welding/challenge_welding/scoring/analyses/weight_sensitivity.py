"""A winner that holds: rank stability under perturbed KPI weights and rescaling breakpoints.

On resample b of the shared bootstrap (scoring.bootstrap: the b-th resample holds the
same samples for every submission), submission s has raw KPIs ``x_{s,k,b}``. One
perturbation per resample:

* weights ``w_b ~ Dirichlet(c w0)``, centred on the protocol's weights w0 (mean w0,
  variance ``w0_k (1 - w0_k) / (c + 1)``; concentration c in the config); a KPI of
  weight 0 keeps weight 0;
* breakpoints ``alpha_{k,b} = alpha_k + U(-j, j)`` (jitter j in the config), for both
  alpha1 and alpha2 of every calibrated KPI; the rescaling map's own rules then apply
  (two pieces when alpha1 <= 0, unscaled when alpha2 <= alpha1 or alpha2 >= 1).

``score_{s,b} = 100 sum_k w_{b,k} f(x_{s,k,b}; alpha_{k,b})`` with f the rescaling of
scoring.rescale. Per submission: P(first) = share of resamples where it ranks first
(a tie for first shares the credit: 1/t each, so the probabilities sum to 1), and its
rank interval (challenge_welding.scoring.significance.rank_intervals on these scores).
No second pass over predictions: only the (S, B, 6) raw KPI draws.
"""

from __future__ import annotations

import numpy as np

from challenge_welding.scoring.significance import rank_intervals, ranks


def draw_perturbations(w0, alpha1, alpha2, concentration, jitter, n, seed=0):
    """(weights (n, K), alpha1 (n, K), alpha2 (n, K)): n perturbed protocols.

    ``alpha1``, ``alpha2``: (K,) breakpoints, NaN for an uncalibrated KPI (left NaN).

    Examples
    --------
    >>> w, a1, a2 = draw_perturbations(np.array([0.5, 0.5, 0.0]), np.zeros(3), np.ones(3) / 2, 1e9, 0.0, 2)
    >>> np.round(w, 3).tolist(), a2[0].tolist()
    ([[0.5, 0.5, 0.0], [0.5, 0.5, 0.0]], [0.5, 0.5, 0.5])
    """
    rng = np.random.default_rng([int(seed), 21])
    w0 = np.asarray(w0, dtype=float)
    on = w0 > 0
    weights = np.zeros((n, len(w0)))
    weights[:, on] = rng.dirichlet(concentration * w0[on], size=n)
    shift1 = rng.uniform(-jitter, jitter, size=(n, len(w0)))
    shift2 = rng.uniform(-jitter, jitter, size=(n, len(w0)))
    return weights, np.asarray(alpha1, float) + shift1, np.asarray(alpha2, float) + shift2


def rescale_batch(x, alpha1, alpha2, beta1, beta2):
    """scoring.rescale.rescale with per-element breakpoints (broadcast), NaN breakpoints = unscaled.

    Examples
    --------
    >>> rescale_batch(np.array([0.1, 0.5, 0.1]), np.array([0.2, 0.2, -0.1]), np.array([0.6, 0.6, 0.5]), 0.1, 0.9)
    array([0.05, 0.7 , 0.18])
    """
    x = np.clip(np.asarray(x, dtype=float), 0.0, 1.0)
    a1, a2 = np.broadcast_arrays(np.asarray(alpha1, dtype=float), np.asarray(alpha2, dtype=float))
    with np.errstate(divide="ignore", invalid="ignore"):
        low = np.where(a1 > 0, beta1 / a1 * x, 0.0)
        mid = beta1 + (beta2 - beta1) / (a2 - a1) * (x - a1)
        mid2 = beta2 / a2 * x                      # two-piece, first piece
        high = beta2 + (1 - beta2) / (1 - a2) * (x - a2)
    three = np.where(x < a1, low, np.where(x <= a2, mid, high))
    two = np.where(x <= a2, mid2, high)
    unscaled = np.isnan(a1) | np.isnan(a2) | (a2 <= a1) | (a2 >= 1)
    out = np.where(unscaled, x, np.where(a1 <= 0, two, three))
    return np.clip(out, 0.0, 1.0)


def winner_stability(raw, weights, alpha1, alpha2, beta1, beta2, level=0.95):
    """P(first) and rank interval of S submissions under B perturbed protocols.

    Parameters
    ----------
    raw : (S, B, K) raw KPI values per submission and resample.
    weights, alpha1, alpha2 : (B, K) one perturbed protocol per resample.

    Returns {"p_first": (S,), "rank_interval": (S, 2), "scores": (S, B)}.

    Examples
    --------
    >>> raw = np.array([[[0.9, 0.1]], [[0.1, 0.8]]])          # 2 submissions, 1 resample, 2 KPIs
    >>> r = winner_stability(raw, np.array([[0.5, 0.5]]), np.full((1, 2), np.nan), np.full((1, 2), np.nan), .1, .9)
    >>> r["p_first"].tolist(), r["rank_interval"].tolist()
    ([1.0, 0.0], [[1, 1], [2, 2]])
    """
    rescaled = rescale_batch(raw, alpha1[None], alpha2[None], beta1, beta2)
    scores = 100.0 * np.einsum("sbk,bk->sb", rescaled, weights)
    top = scores == scores.max(axis=0, keepdims=True)
    p_first = (top / top.sum(axis=0, keepdims=True)).mean(axis=1)
    return {"p_first": p_first, "rank_interval": rank_intervals(scores, level), "scores": scores,
            "ranks": ranks(scores)}
