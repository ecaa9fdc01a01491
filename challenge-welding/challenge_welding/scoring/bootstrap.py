"""95 % bootstrap intervals of every criterion, KPI and the score, vectorised, paired across submissions.

Resampling is within each set and stratified (class, crossed with the set's
design cells: OOD label, perturbation type and level), so a resample keeps the
set's composition. No Python loop runs over resamples: a chunk of B resamples
is a (B, m) matrix of draw counts that ``criteria.set_criteria`` evaluates at
once with the same code as the point estimate (counts are frequency weights).

Paired by construction: which samples the b-th resample holds depends only on
the reference data (the strata, in reference row order) and the seed, never on
the predictions. Each stratum has its own generator (seed, set, stratum) and
draws, resample after resample, sample positions in reference order; chunk
sizes depend on the set's size only. So every submission scored on the same
reference data with the same seed and B is scored on the same B resamples, and
its per-resample values (``values`` in the result) can be compared pairwise
(see challenge_welding.scoring.significance).

Per-cell counts: each set is first collapsed to its distinct rows over the
fields its criteria read (e.g. robustness reads only class, answer,
perturbation and level: ~100 distinct rows for 400,000 samples). The drawn
positions are then mapped to the distinct row of their sample and counted, so
the criteria run on (B, m) weights while the draws stay per sample.
"""

from __future__ import annotations

import zlib

import numpy as np
import pandas as pd

from challenge_welding.contract.names import SET_NAMES
from challenge_welding.scoring.criteria import SetArrays, combine, set_criteria, take_rows

CHUNK_CELLS = 16_000_000   # b * n per chunk: 128 MB of float64 weights or int64 draws
TINY_ROWS = 8              # rows in a stratum up to which each row's draws are counted by comparison
FEW_ROWS = 4096            # rows in a stratum up to which a chunk's draws are counted in one bincount

# fields each set's criteria read (the strata fields are always kept)
RELEVANT = {
    "performance": ("pred", "proba", "seams", "time"),
    "robustness": ("pred", "perturbation", "level"),
    "ood_real": ("ood_score",),
    "ood_synthetic": ("ood_score",),
    "generalization": ("pred", "seams"),
    "drift": ("pred", "seams", "ood_score"),
}


def collapse(a: SetArrays, fields):
    """(distinct rows as SetArrays, multiplicity, stratum code) over ``fields`` and the strata.

    Distinct rows come sorted by stratum, so each stratum is a contiguous slice.
    """
    rows, mult, strata, _ = collapse_index(a, fields)
    return rows, mult, strata


def collapse_index(a: SetArrays, fields):
    """As :func:`collapse`, plus the distinct row of every sample."""
    strata = a.strata()
    columns = {"_stratum": strata}
    for f in fields:
        v = getattr(a, f)
        if v.ndim == 2:
            columns.update({f"{f}{j}": v[:, j] for j in range(v.shape[1])})
        else:
            columns[f] = pd.Categorical(v).codes if v.dtype.kind in "OUS" else v
    gid = pd.DataFrame(columns).groupby(list(columns), sort=True).ngroup().to_numpy()
    mult = np.bincount(gid)
    first = np.full(len(mult), len(gid))
    np.minimum.at(first, gid, np.arange(len(gid)))
    return take_rows(a, first), mult.astype(float), strata[first], gid


class Resampler:
    """Stratified resamples of one set, drawn from the strata and the seed only.

    ``strata``: stratum code per sample (from the reference data), in reference
    row order. Each stratum of k samples has its own generator, seeded by
    (seed, set name, stratum index); resample after resample it draws k
    positions uniformly among the stratum's samples (in reference order). The
    b-th resample is therefore the same multiset of samples whatever the
    predictions, provided the calls ask for the same chunk sizes in the same
    order (:func:`chunk_size` depends on the set's size only).
    """

    def __init__(self, strata, seed, name):
        strata = np.asarray(strata)
        self.order = np.argsort(strata, kind="stable")
        s = strata[self.order]
        self.bounds = np.flatnonzero(np.r_[True, np.diff(s) != 0, True]) if len(s) else np.array([0])
        key = zlib.crc32(name.encode())
        self.rngs = [np.random.default_rng([int(seed), key, i]) for i in range(len(self.bounds) - 1)]

    def counts(self, row_of, n_rows, b):
        """(b, n_rows) counts of each distinct row in the next b resamples.

        ``row_of``: distinct row of every sample; the rows of a stratum must be
        a contiguous range (collapse sorts rows by stratum). A stratum whose
        samples are all one row needs no draw: its row gets k in every resample
        (its own generator is left untouched, so the other strata are unchanged).
        """
        counts = np.zeros((b, n_rows))
        for rng, lo, hi in zip(self.rngs, self.bounds[:-1], self.bounds[1:]):
            k = int(hi - lo)
            rows = row_of[self.order[lo:hi]]
            first, last = int(rows.min()), int(rows.max())
            r = last - first + 1
            if r == 1:
                counts[:, first] = k
                continue
            draws = rng.integers(0, k, size=(b, k))
            local = rows - first
            if r <= TINY_ROWS:  # e.g. robustness: a few answers per cell; count bytes, no scatter
                mapped = np.take(local.astype(np.uint8), draws)
                for j in range(r - 1):
                    counts[:, first + j] = np.count_nonzero(mapped == j, axis=1)
                counts[:, last] = k - counts[:, first:last].sum(axis=1)
                continue
            if r <= FEW_ROWS:  # small output: one bincount for the whole chunk
                draws = np.take(local, draws)
                draws += (np.arange(b) * r)[:, None]
                counts[:, first:last + 1] = np.bincount(draws.ravel(), minlength=b * r).reshape(b, r)
                continue
            for j in range(b):  # one resample at a time keeps the scattered counts in cache
                per_sample = np.bincount(draws[j], minlength=k)
                if r == k:  # one row per sample: local is a permutation
                    counts[j, first + local] = per_sample
                else:
                    counts[j, first:last + 1] = np.bincount(local, weights=per_sample, minlength=r)
        return counts


def chunk_size(n, n_boot):
    """Resamples per chunk: from the set's size and B only (never from the predictions)."""
    return int(max(1, min(n_boot, CHUNK_CELLS // max(n, 1))))


def bootstrap(prep, config, n_boot=1000, seed=0, level=0.95, notes=None):
    """Intervals {"score": [lo, hi], "criteria": {...}, "raw": {...}, "rescaled": {...}}, and "values".

    "values": the per-resample values {"score": (B,), kpi: (B,) rescaled} that
    the paired comparisons of submissions use (see the module docstring).
    ``notes`` (a criteria.UndefinedCases) collects the undefined cases met in resamples, with their counts.
    """
    if n_boot <= 0:
        return None
    criteria, present = {}, []
    for name in SET_NAMES:
        rows, _, _, row_of = collapse_index(prep[name], RELEVANT[name])
        resampler = Resampler(prep[name].strata(), seed, name)
        chunk = chunk_size(prep[name].n, n_boot)
        parts, done = {}, 0
        while done < n_boot:
            b = min(chunk, n_boot - done)
            c, extra = set_criteria(name, rows, config, resampler.counts(row_of, rows.n, b), notes)
            for key, value in c.items():
                parts.setdefault(key, []).append(np.broadcast_to(value, (b,)))
            present = extra.get("present", present)
            done += b
        criteria.update({key: np.concatenate(v) for key, v in parts.items()})
    res = combine(criteria, present, config)
    q = [100 * (1 - level) / 2, 100 * (1 + level) / 2]

    def interval(values):
        lo, hi = np.percentile(values, q)
        return [float(lo), float(hi)]

    return {"score": interval(res["score"]),
            "criteria": {k: interval(v) for k, v in criteria.items()},
            "raw": {k: interval(v) for k, v in res["raw"].items()},
            "rescaled": {k: interval(v) for k, v in res["rescaled"].items()},
            "values": {k: np.broadcast_to(np.asarray(v, dtype=float), (n_boot,)).copy()
                       for k, v in {"score": res["score"], **res["rescaled"],
                                    # raw KPIs: the leaderboard's weight sensitivity re-rescales them
                                    **{f"raw_{k}": v for k, v in res["raw"].items()}}.items()}}
