"""The rules of one prediction row, shared by the ingestion (ingestion.run.validate, per batch) and the
scoring (scoring.inputs, per set), so that both treat a value the same way.

Pure functions over numpy arrays; each returns masks (which rows break which
rule) and the cleaned values, and the caller words the message (sample, set,
column). The rules (what the challenge announced to participants, docs/scoring.md "Inputs"):

- ``predicted_state`` in KO, OK, UNKNOWN; case and surrounding whitespace are
  normalised (a warning); anything else is an error.
- probabilities ``[p_KO, p_OK, p_UNKNOWN]``: missing -> one-hot of the state; NaN,
  infinite or negative -> error; a row summing to 0 or to infinity (finite values
  such as [1e308, 1e308, 1e308]) -> error; every other row is divided by its sum, so
  that each accepted row is scored as one normalised row: silently within
  ``PROBA_SUM_TOL`` of 1, with a warning ("renormalised") beyond it.
- OOD score ``s >= 0``: missing -> 0; NaN or infinite -> error; negative ->
  clipped to 0 (a warning): one rule for both, chosen so that an answer the
  ingestion accepted is scored as it was accepted.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from challenge_welding.contract.names import STATES

PROBA_SUM_TOL = 1e-3  # a probability row off 1 by more than this is renormalised (with a warning)
PROBA_SUM_TOL_TEXT = np.format_float_scientific(PROBA_SUM_TOL, trim="-", exp_digits=1)  # "1e-3" in messages


def label_codes(values, names=STATES):
    """(codes into ``names``, -1 for an invalid label; mask of labels normalised by case/whitespace).

    Hash lookups (pandas Index): fast on 10^6 rows. A label that is not a string is invalid.
    """
    values = pd.Series(values, dtype=object).reset_index(drop=True)
    index = pd.Index(list(names))
    try:
        codes = index.get_indexer(values).astype(np.int16)
    except TypeError:  # unhashable labels (a list, a dict): only strings can be labels
        codes = index.get_indexer(values.map(lambda v: v if isinstance(v, str) else None)).astype(np.int16)
    renamed = np.zeros(len(values), dtype=bool)
    miss = np.flatnonzero(codes < 0)
    if miss.size:
        text = values.iloc[miss]
        is_str = text.map(lambda v: isinstance(v, str)).to_numpy(dtype=bool)
        again = np.asarray(index.get_indexer(text.map(lambda v: v.strip().upper() if isinstance(v, str) else None)))
        ok = (again >= 0) & is_str
        codes[miss[ok]] = again[ok]
        renamed[miss[ok]] = True
    return codes, renamed


@dataclass
class ProbabilityCheck:
    """Per cell: NaN, infinite, negative; per row: sum 0, sum infinite, renormalised; and the cleaned rows."""

    nan: np.ndarray           # (n, 3)
    inf: np.ndarray           # (n, 3)
    negative: np.ndarray      # (n, 3)
    zero_sum: np.ndarray      # (n,)
    renormalised: np.ndarray  # (n,) valid rows off 1 by more than PROBA_SUM_TOL (the warning)
    values: np.ndarray        # (n, 3) the rows divided by their sums (bad rows as they came)
    infinite_sum: np.ndarray  # (n,) finite cells whose sum overflows to infinity

    @property
    def bad(self):
        """Rows that are an error."""
        return (self.nan | self.inf | self.negative).any(axis=1) | self.zero_sum | self.infinite_sum


def check_probabilities(values) -> ProbabilityCheck:
    """Check (n, 3) probability rows; every good row divided by its sum (a warning when off 1 by > PROBA_SUM_TOL).

    >>> c = check_probabilities([[0.5, 0.3, 0.1999], [1e308, 1e308, 1e308], [2.0, 2.0, 0.0]])
    >>> c.bad.tolist(), c.renormalised.tolist(), c.values[2].tolist()
    ([False, True, False], [False, False, True], [0.5, 0.5, 0.0])
    >>> float(c.values[0].sum())
    1.0
    """
    values = np.asarray(values, dtype=float).reshape(-1, 3)
    nan, inf, negative = np.isnan(values), np.isinf(values), values < 0
    with np.errstate(over="ignore"):
        total = values.sum(axis=1)
    cells_finite = ~(nan | inf).any(axis=1)
    infinite_sum = cells_finite & np.isinf(total)
    finite = np.isfinite(total)
    zero_sum = finite & (total == 0)
    good = finite & ~zero_sum & ~negative.any(axis=1)
    off = good & (np.abs(total - 1) > PROBA_SUM_TOL)
    cleaned = np.where(good[:, None], values / np.where(good, total, 1.0)[:, None], values)
    return ProbabilityCheck(nan, inf, negative, zero_sum, off, cleaned, infinite_sum)


def check_ood_scores(values):
    """(non-finite mask, negative mask, scores with negatives clipped to 0)."""
    values = np.asarray(values, dtype=float)
    non_finite = ~np.isfinite(values)
    negative = ~non_finite & (values < 0)
    return non_finite, negative, np.where(negative, 0.0, values)
