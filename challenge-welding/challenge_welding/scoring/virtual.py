"""Virtual reference solutions: prediction files built from the labels, as the protocol did.

The protocol validated its ranking with "manually constructed inference files";
these are ours, reproducible from a seed. What each kind means (docs/scoring.md,
"Validation targets" and "Note on UOP"):

* ``perfect``: the truth, one-hot; UNKNOWN with OOD score 2 on samples labelled
  OOD, OOD score 0 elsewhere.
* ``very_good``: 0.75 % classification error, 1 % OOD error; ``good``: 3 % and
  5 %. Both are cost-aware: sharp probabilities when right, hedged towards KO
  or UNKNOWN (never towards OK for a true KO) when wrong; OOD scores below 1
  for inliers and above 1 for OOD samples except the OOD errors; UNKNOWN when
  the OOD score is >= 1.
* ``no_trust``: a realistic base (4 % error, 8 % on unseen seams), one-hot
  probabilities, OOD score 0, never UNKNOWN, errors growing with the
  perturbation level (up to +30 % at the axis bound) and along the drift.
* ``with_trust``: the same hard answers as ``no_trust`` on performance and
  generalization (same seed, same error draws); cost-aware probabilities,
  informative OOD scores (8 % OOD error), UNKNOWN on detected OOD inputs, and
  errors growing three times slower under perturbation and drift.
* ``full_unknown``, ``full_ok``, ``full_ko``: one answer everywhere, one-hot,
  OOD score 0. ``random``: uniform answers, Dirichlet(1, 1, 1) probabilities,
  uniform OOD scores on [0, 2].

Errors are drawn per set and class stratum from a rank-uniform variable u
(a random permutation, so the error count is exact); a sample is wrong when
u < its error rate. The draws depend on the seed and the set only, so kinds
with nested rates have nested errors. compute_time is 0 for every kind (so that
``perfect`` reaches 100).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from challenge_welding.contract.names import PRED_COLUMNS, SET_NAMES, STATES, VIRTUAL_KINDS
from challenge_welding.contract.checked import json_text
from challenge_welding.contract.errors import ChallengeError
from challenge_welding.contract.files import atomic_path, write_atomic
from challenge_welding.scoring.inputs import read_reference
from challenge_welding.scoring.provenance import REPORT_FILE, manifest_of

KO, OK, UNKNOWN = 0, 1, 2


@dataclass(frozen=True)
class Profile:
    err: float                 # classification error rate (performance, robustness level 0, drift start)
    err_gen: float             # on unseen seams
    ood_err: float             # share of OOD scores on the wrong side of 1 (per OOD stratum)
    growth_rob: float = 0.0    # extra error at the bound of each perturbation axis
    growth_drift: float = 0.0  # extra error at the end of the drift's inliers
    trust: bool = True         # cost-aware probabilities, OOD scores, UNKNOWN on detected OOD
    eps: float = 0.0           # probability left off the answer when right
    hedge_ko: tuple = (0.35, 0.30, 0.35)  # probabilities of a true KO answered OK (wrongly)
    hedge_ok: tuple = (0.45, 0.40, 0.15)  # probabilities of a true OK answered KO (wrongly)


PROFILES = {
    "perfect": Profile(err=0.0, err_gen=0.0, ood_err=0.0),
    "very_good": Profile(err=0.0075, err_gen=0.0075, ood_err=0.01, eps=0.0005,
                         hedge_ko=(0.49, 0.02, 0.49), hedge_ok=(0.40, 0.45, 0.15)),
    "good": Profile(err=0.03, err_gen=0.03, ood_err=0.05, eps=0.002),
    "no_trust": Profile(err=0.04, err_gen=0.08, ood_err=0.5, growth_rob=0.30, growth_drift=0.30, trust=False),
    "with_trust": Profile(err=0.04, err_gen=0.08, ood_err=0.08, growth_rob=0.10, growth_drift=0.10, eps=0.002),
}


def _rank_uniform(rng, strata):
    """u in (0, 1) per sample, evenly spread within each stratum in a random order."""
    u = np.empty(len(strata))
    for s in np.unique(strata):
        idx = np.flatnonzero(strata == s)
        u[idx] = (rng.permutation(len(idx)) + 0.5) / len(idx)
    return u


def _error_rate(name, ref, p: Profile):
    n = len(ref)
    if name == "generalization":
        return np.full(n, p.err_gen)
    rate = np.full(n, p.err)
    if name == "robustness" and p.growth_rob:
        level = ref["level"].to_numpy(dtype=float)
        pert = ref["perturbation"].to_numpy().astype(str)
        frac = np.zeros(n)
        for x in np.unique(pert):
            rows = pert == x
            bound = np.abs(level[rows]).max()
            if x != "none" and bound > 0:
                frac[rows] = np.abs(level[rows]) / bound
        rate = rate + p.growth_rob * frac
    if name == "drift" and p.growth_drift:
        pos = ref["position"].to_numpy(dtype=float)
        inlier = ref["ood"].to_numpy() == 0
        end = pos[inlier].max() if inlier.any() else 1.0
        rate = rate + p.growth_drift * np.clip(pos / max(end, 1.0), 0, 1)
    return rate


def _trust_probabilities(y, pred, p: Profile):
    proba = np.zeros((len(y), 3))
    right = pred == y
    proba[right & (pred == KO)] = (1 - p.eps, 0.0, p.eps)
    proba[right & (pred == OK)] = (p.eps / 2, 1 - p.eps, p.eps / 2)
    proba[(y == KO) & (pred == OK)] = p.hedge_ko
    proba[(y == OK) & (pred == KO)] = p.hedge_ok
    proba[pred == UNKNOWN] = (0.4, 0.1, 0.5)
    return proba


def _profile_predictions(name, ref, p: Profile, rng):
    y = (ref["class"].to_numpy() == "OK").astype(int)
    n = len(y)
    ood = ref["ood"].to_numpy().astype(bool) if "ood" in ref.columns else np.zeros(n, dtype=bool)
    wrong = _rank_uniform(rng, y) < _error_rate(name, ref, p)
    pred = np.where(wrong, 1 - y, y)
    # OOD score: inliers below 1, OOD samples above, an ood_err share of each on the wrong side
    u_ood = _rank_uniform(rng, ood.astype(int))
    swapped = (u_ood < p.ood_err) & ("ood" in ref.columns)
    flagged = ood ^ swapped
    low, high = rng.uniform(0.0, 0.9, n), rng.uniform(1.1, 3.0, n)
    if not p.trust:
        return pred, np.eye(3)[pred], np.zeros(n)
    score = np.where(flagged, high, low)
    if p.err == 0 and p.ood_err == 0:  # perfect: exact values
        score = np.where(flagged, 2.0, 0.0)
    pred = np.where(flagged, UNKNOWN, pred)
    if p.eps == 0 and p.err == 0:
        proba = np.eye(3)[pred]
    else:
        proba = _trust_probabilities(y, pred, p)
    return pred, proba, score


def virtual_predictions(references: dict, kind: str, seed: int = 0) -> dict:
    """{set: predictions DataFrame (PRED_COLUMNS)} of a virtual solution on reference frames."""
    if kind not in VIRTUAL_KINDS:
        raise ChallengeError(f"unknown virtual solution kind {kind!r} (choose among {', '.join(VIRTUAL_KINDS)})")
    out = {}
    for name in SET_NAMES:
        ref = references[name]
        n = len(ref)
        # one stream per (seed, set), the same for every kind: nested kinds share their error draws
        rng = np.random.default_rng([int(seed), zlib.crc32(name.encode())])
        if kind in PROFILES:
            pred, proba, score = _profile_predictions(name, ref, PROFILES[kind], rng)
        elif kind == "random":
            pred = rng.integers(0, 3, n)
            proba = rng.dirichlet(np.ones(3), n)
            score = rng.uniform(0.0, 2.0, n)
        else:
            pred = np.full(n, {"full_unknown": UNKNOWN, "full_ok": OK, "full_ko": KO}[kind])
            proba, score = np.eye(3)[pred], np.zeros(n)
        out[name] = pd.DataFrame({
            "sample_id": ref["sample_id"].astype(str).to_numpy(),
            "predicted_state": np.asarray(STATES, dtype=object)[pred],
            "scores KO": proba[:, 0], "scores OK": proba[:, 1], "scores UNKNOWN": proba[:, 2],
            "scores OOD": score.astype(float), "compute_time": np.zeros(n),
        })[list(PRED_COLUMNS)]
    return out


def make_virtual(reference_dir, kind, output_dir, seed=0) -> Path:
    """Write PRED/<set>.parquet for the six sets and PRED/ingestion.json (status ok, origin
    "virtual", the manifest of the six files); return PRED."""
    if kind not in VIRTUAL_KINDS:
        raise ChallengeError(f"unknown virtual solution kind {kind!r} (choose among {', '.join(VIRTUAL_KINDS)})")
    references = {name: read_reference(reference_dir, name) for name in SET_NAMES}
    predictions = virtual_predictions(references, kind, seed)
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, frame in predictions.items():
        with atomic_path(out / f"{name}.parquet") as tmp:
            frame.to_parquet(tmp, index=False)
    # the same report as the ingestion's, manifest included: virtual predictions stay scorable
    info = {"status": "ok", "origin": "virtual", "virtual": kind, "seed": int(seed),
            "manifest": manifest_of(out, [f"{name}.parquet" for name in predictions]),
            "counts": {name: len(f) for name, f in predictions.items()},
            "timings": {}, "warnings": [], "errors": [],
            "note": "virtual reference solution built from the labels; compute_time set to 0"}
    write_atomic(out / REPORT_FILE, json_text(info, sort_keys=True))  # the one writer: complete or absent
    return out
