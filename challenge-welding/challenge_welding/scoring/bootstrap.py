"""95 % bootstrap intervals of every criterion, KPI and the score, vectorised.

Resampling is within each set and stratified (class, crossed with the set's
design cells: OOD label, perturbation type and level), so a resample keeps the
set's composition. No Python loop runs over resamples: a chunk of B resamples
is a (B, m) matrix of draw counts that ``criteria.set_criteria`` evaluates at
once with the same code as the point estimate (counts are frequency weights).

Per-cell counts: each set is first collapsed to its distinct rows over the
fields its criteria read (e.g. robustness reads only class, answer,
perturbation and level: ~100 distinct rows for 400,000 samples). A resample of
a stratum is then a multinomial draw over its distinct rows, with their
multiplicities as probabilities; when a stratum has many distinct rows
(continuous probabilities, times or OOD scores), its samples are drawn one by
one (integers + bincount).
"""

from __future__ import annotations

import zlib

import numpy as np
import pandas as pd

from challenge_welding.constants import SET_NAMES
from challenge_welding.scoring.criteria import SetArrays, combine, set_criteria, take_rows

CHUNK_CELLS = 16_000_000   # b * m per chunk: 128 MB of float64 weights
MULTINOMIAL_MAX = 512      # distinct rows in a stratum up to which counts are drawn as one multinomial

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
    return take_rows(a, first), mult.astype(float), strata[first]


def draw_counts(strata, mult, b, rng):
    """(b, m) counts of each distinct row in b stratified resamples.

    Rows must be sorted by stratum. Within a stratum of k samples over r
    distinct rows with multiplicities m_i: Multinomial(k, m_i / k) when r is
    small, else k draws of a sample position mapped to its row.
    """
    bounds = np.flatnonzero(np.r_[True, np.diff(strata) != 0, True])
    counts = np.empty((b, len(mult)))
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        m = mult[lo:hi]
        k = int(m.sum())
        r = hi - lo
        if r <= MULTINOMIAL_MAX:
            counts[:, lo:hi] = rng.multinomial(k, m / k, size=b)
            continue
        draws = rng.integers(0, k, size=(b, k))
        if r != k:  # positions -> distinct rows
            draws = np.repeat(np.arange(r), m.astype(np.int64))[draws]
        draws += (np.arange(b) * r)[:, None]
        counts[:, lo:hi] = np.bincount(draws.ravel(), minlength=b * r).reshape(b, r)
    return counts


def bootstrap(prep, config, n_boot=1000, seed=0, level=0.95, notes=None):
    """Intervals {"score": [lo, hi], "criteria": {...}, "raw": {...}, "rescaled": {...}}.

    ``notes`` (a criteria.UndefinedCases) collects the undefined cases met in resamples, with their counts.
    """
    if n_boot <= 0:
        return None
    criteria, present = {}, []
    for name in SET_NAMES:
        rows, mult, strata = collapse(prep[name], RELEVANT[name])
        rng = np.random.default_rng([int(seed), zlib.crc32(name.encode())])
        chunk = int(max(1, min(n_boot, CHUNK_CELLS // max(rows.n, 1))))
        parts, done = {}, 0
        while done < n_boot:
            b = min(chunk, n_boot - done)
            c, extra = set_criteria(name, rows, config, draw_counts(strata, mult, b, rng), notes)
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
            "rescaled": {k: interval(v) for k, v in res["rescaled"].items()}}
