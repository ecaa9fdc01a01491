"""95 % bootstrap intervals of every criterion, KPI and the score, vectorised.

Resampling is within each set and stratified (class, crossed with the set's
design cells: OOD label, perturbation type and level), so a resample keeps the
set's composition. A chunk of resamples is a (b, n) matrix of draw counts per
set; ``criteria.compute`` evaluates the whole chunk at once with the same code
as the point estimate, so there is no Python loop over resamples (only over
chunks, sized to bound memory).
"""

from __future__ import annotations

import zlib

import numpy as np

from challenge_welding.scoring.criteria import compute

CHUNK_CELLS = 4_000_000  # b * n of the largest set per chunk (~32 MB of float64 weights)


def draw_counts(strata, b, rng):
    """(b, n) draw counts: each stratum resampled with replacement to its own size."""
    n = len(strata)
    counts = np.zeros((b, n))
    for s in np.unique(strata):
        idx = np.flatnonzero(strata == s)
        k = len(idx)
        draws = rng.integers(0, k, size=(b, k)) + (np.arange(b) * k)[:, None]
        counts[:, idx] = np.bincount(draws.ravel(), minlength=b * k).reshape(b, k)
    return counts


def bootstrap(prep, config, n_boot=1000, seed=0, level=0.95):
    """Intervals {"score": [lo, hi], "criteria": {...}, "raw": {...}, "rescaled": {...}}."""
    if n_boot <= 0:
        return None
    largest = max(a.n for a in prep.values())
    chunk = int(max(1, min(n_boot, CHUNK_CELLS // max(largest, 1))))
    rngs = {name: np.random.default_rng([int(seed), zlib.crc32(name.encode())]) for name in prep}
    strata = {name: a.strata() for name, a in prep.items()}
    parts = {"score": [], "criteria": {}, "raw": {}, "rescaled": {}}
    done = 0
    while done < n_boot:
        b = min(chunk, n_boot - done)
        weights = {name: draw_counts(strata[name], b, rngs[name]) for name in prep}
        res = compute(prep, config, weights)
        parts["score"].append(np.broadcast_to(res["score"], (b,)))
        for group in ("criteria", "raw", "rescaled"):
            for key, value in res[group].items():
                parts[group].setdefault(key, []).append(np.broadcast_to(value, (b,)))
        done += b
    q = [100 * (1 - level) / 2, 100 * (1 + level) / 2]

    def interval(chunks):
        lo, hi = np.percentile(np.concatenate(chunks), q)
        return [float(lo), float(hi)]

    return {"score": interval(parts["score"]),
            **{group: {k: interval(v) for k, v in parts[group].items()} for group in ("criteria", "raw", "rescaled")}}
