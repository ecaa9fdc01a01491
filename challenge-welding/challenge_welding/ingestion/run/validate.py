"""Validation of what ``predict`` returned for one batch.

Pure functions over plain Python values and numpy arrays (the child has
already turned numbers into float64 arrays and other values into plain lists, see
``child.to_plain``; numpy input is accepted here too). The rules of a row are
``challenge_welding.contract.prediction_rules``, shared with the scoring; here: the
structure of predict()'s output (a dict; lists, one entry per image; three
numbers per probability row), and a length that differs from the batch size
is an error.

Errors raise :class:`OutputError` naming the sample and the field; warnings are
counted per kind in a :class:`Notes` so that a set yields one line per kind.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from challenge_welding.contract.names import STATES
from challenge_welding.contract.errors import ChallengeError
from challenge_welding.contract.prediction_rules import PROBA_SUM_TOL_TEXT, check_ood_scores, check_probabilities, label_codes


class OutputError(ChallengeError):
    """predict() returned something the evaluation cannot use."""


@dataclass
class Notes:
    """Warnings counted by kind, with the first example of each."""

    counts: dict[str, int] = field(default_factory=dict)
    examples: dict[str, str] = field(default_factory=dict)

    def add(self, kind: str, example: str, count: int = 1) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + count
        self.examples.setdefault(kind, example)

    def lines(self, prefix: str = "") -> list[str]:
        return [f"{prefix}{kind}: {n} sample(s), e.g. {self.examples[kind]}"
                for kind, n in self.counts.items()]


@dataclass
class Validated:
    states: list[str]
    probabilities: np.ndarray  # (n, 3) float64
    ood: np.ndarray  # (n,) float64


def _describe(value) -> str:
    if isinstance(value, dict) and "__unsupported__" in value:
        return f"an unsupported object ({value['__unsupported__']})"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _as_list(output: dict, key: str, n: int, sample_ids: list[str]):
    value = output.get(key)
    if value is None:
        return None
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, tuple):
        value = list(value)
    if not isinstance(value, list):
        raise OutputError(f"'{key}' must be a list (or array) with one entry per image, "
                          f"got {_describe(value)}")
    if len(value) != n:
        # the caller's message names the set and the batch's samples
        raise OutputError(f"'{key}' has {len(value)} entries for a batch of {n} images")
    return value


def _number(value) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float, np.integer, np.floating)):
        return float(value)
    return None


# over 60 lines: one pass over the output's keys, each rule beside its message
def validate_output(output, sample_ids: list[str], notes: Notes | None = None) -> Validated:
    """Check and normalise one batch's output; ``sample_ids`` gives n and names the culprits."""
    notes = notes if notes is not None else Notes()
    n = len(sample_ids)
    if not isinstance(output, dict):
        raise OutputError("predict() must return a dict with 'predictions' (and optionally "
                          f"'probabilities', 'OOD_scores'), got {_describe(output)}")
    labels = _as_list(output, "predictions", n, sample_ids)
    if labels is None:
        raise OutputError(f"predict() returned no 'predictions' (keys: {sorted(output)})")
    codes, renamed = label_codes(labels, STATES)
    if (codes < 0).any():
        i = int(np.flatnonzero(codes < 0)[0])
        raise OutputError(f"sample {sample_ids[i]}: prediction {_describe(labels[i])} is not one of "
                          f"{', '.join(STATES)}")
    states = [STATES[c] for c in codes]
    if renamed.any():
        i = int(np.flatnonzero(renamed)[0])
        notes.add("labels normalised (case/whitespace)", f"{labels[i]!r} -> {states[i]!r}", int(renamed.sum()))

    rows = _as_list(output, "probabilities", n, sample_ids)
    if rows is None:
        probs = np.eye(3)[np.asarray(codes, dtype=np.int64)].reshape(n, 3)
        notes.add("probabilities missing, one-hot of the prediction used", sample_ids[0], n)
    else:
        probs = np.empty((n, 3))
        for i, (sid, row) in enumerate(zip(sample_ids, rows)):
            if isinstance(row, np.ndarray):
                row = row.tolist()
            values = [_number(v) for v in row] if isinstance(row, (list, tuple)) else None
            if values is None or len(values) != 3 or any(v is None for v in values):
                raise OutputError(f"sample {sid}: probabilities must be 3 numbers "
                                  f"[p_KO, p_OK, p_UNKNOWN], got {_describe(row)}")
            probs[i] = values
        check = check_probabilities(probs)
        if check.bad.any():
            i = int(np.flatnonzero(check.bad)[0])
            sid, values = sample_ids[i], probs[i].tolist()
            if (check.nan[i] | check.inf[i]).any():
                raise OutputError(f"sample {sid}: probabilities contain NaN or infinity: {values}")
            if check.negative[i].any():
                raise OutputError(f"sample {sid}: negative probability in {values}")
            if check.infinite_sum[i]:
                raise OutputError(f"sample {sid}: probabilities sum to infinity: {values} (each row must sum to 1)")
            raise OutputError(f"sample {sid}: probabilities are all zero")
        if check.renormalised.any():
            i = int(np.flatnonzero(check.renormalised)[0])
            notes.add(f"probabilities renormalised (row sum off 1 by more than {PROBA_SUM_TOL_TEXT})",
                      f"{sample_ids[i]} sum {probs[i].sum():.4g}", int(check.renormalised.sum()))
        probs = check.values

    scores = _as_list(output, "OOD_scores", n, sample_ids)
    if scores is None:
        ood = np.zeros(n)
        notes.add("OOD_scores missing, 0 used", sample_ids[0], n)
    else:
        raw_ood = np.empty(n)
        for i, (sid, raw) in enumerate(zip(sample_ids, scores)):
            if isinstance(raw, list) and len(raw) == 1:  # a column vector, e.g. shape (n, 1)
                raw = raw[0]
            value = _number(raw)
            if value is None:
                raise OutputError(f"sample {sid}: OOD score must be a number, got {_describe(raw)}")
            raw_ood[i] = value
        non_finite, negative, ood = check_ood_scores(raw_ood)
        if non_finite.any():
            i = int(np.flatnonzero(non_finite)[0])
            raise OutputError(f"sample {sample_ids[i]}: OOD score is {raw_ood[i]} (must be a finite real >= 0)")
        if negative.any():
            i = int(np.flatnonzero(negative)[0])
            notes.add("negative OOD scores clipped to 0", f"{sample_ids[i]} {raw_ood[i]:.4g}", int(negative.sum()))
    return Validated(states, probs, ood)
