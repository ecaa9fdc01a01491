"""Subjective-logic trust opinions on a classifier's probabilities (Ouattara 2024, docs/scoring.md "Reported beyond the score").

Written by hand on numpy: no PyPI package for subjective logic is well kept, and the
operators needed here are a few lines each.

For a class c, samples are put in M equal-width bins of the binary probability of c,
``q_c = p_c / (p_KO + p_OK)`` (0.5 when both are 0, the ECE convention of docs/scoring.md), bin
m = [m/M, (m+1)/M), the last bin closed. With RP_i the bin centre, n_i the samples in
bin i and t_i those of them whose true class is c:

    r_i = t_i                     (positive evidence)
    s_i = |t_i - n_i RP_i|        (negative evidence: calibration gap, in samples)

An opinion from evidence (r, s) with prior weight W (2: uniform Beta) and base rate a:

    b = r / (W + r + s),  d = s / (W + r + s),  u = W / (W + r + s),  P = b + a u

Cumulative fusion of evidence-based opinions sums the evidence; `cumulative_fusion`
is Josang's pairwise operator on (b, d, u, a), which gives the same opinion (tested).
The class opinion fuses its bins (base rate = class prior); the model opinion fuses
the two class opinions, its base rate is then the evidence-weighted mean of the priors
(what Josang's base-rate formula reduces to for evidence-based opinions).
"""

from __future__ import annotations

import numpy as np

from challenge_welding.scoring.metrics import bin_index


def opinion_from_evidence(r: float, s: float, base_rate: float, prior_weight: float = 2.0) -> dict:
    """Binomial opinion {b, d, u, a, P, r, s} from positive/negative evidence (Josang eq. 1)."""
    total = prior_weight + r + s
    b, d, u = r / total, s / total, prior_weight / total
    return {"b": b, "d": d, "u": u, "a": base_rate, "P": b + base_rate * u, "r": r, "s": s}


def cumulative_fusion(x: dict, y: dict) -> dict:
    """Josang's aleatory cumulative fusion of two binomial opinions (paper eq. 2-3).

    Case u_x = u_y = 0 (dogmatic opinions, infinite evidence) uses gamma = 1/2 each,
    the limit for equal evidence rates. Only b, d, u, a, P are returned.
    """
    ux, uy = x["u"], y["u"]
    if ux == 0.0 and uy == 0.0:
        b, d, u = (x["b"] + y["b"]) / 2, (x["d"] + y["d"]) / 2, 0.0
        a = (x["a"] + y["a"]) / 2
    else:
        k = ux + uy - ux * uy
        b = (x["b"] * uy + y["b"] * ux) / k
        d = (x["d"] * uy + y["d"] * ux) / k
        u = ux * uy / k
        if ux == 1.0 and uy == 1.0:
            a = (x["a"] + y["a"]) / 2
        else:
            a = (x["a"] * uy + y["a"] * ux - (x["a"] + y["a"]) * ux * uy) / (ux + uy - 2 * ux * uy)
    return {"b": b, "d": d, "u": u, "a": a, "P": b + a * u}


def binary_probability(p_ko: np.ndarray, p_ok: np.ndarray, cls: str) -> np.ndarray:
    """p_c / (p_KO + p_OK), 0.5 where both are 0 (all mass on UNKNOWN: no preference)."""
    p_ko, p_ok = np.asarray(p_ko, float), np.asarray(p_ok, float)
    den = p_ko + p_ok
    num = p_ko if cls == "KO" else p_ok
    with np.errstate(invalid="ignore", divide="ignore"):
        q = np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.5)
    return np.clip(q, 0.0, 1.0)


def class_opinion(y_true: np.ndarray, p_ko: np.ndarray, p_ok: np.ndarray, cls: str,
                  bins: int = 10, prior_weight: float = 2.0) -> dict:
    """Trust opinion on the probabilities of class `cls`: per-bin opinions and their fusion.

    Base rate = class prior n_c / N (0.5 for an empty set). An empty bin has no evidence
    (a vacuous opinion, u = 1) and does not change the fusion.
    """
    y_true = np.asarray(y_true)
    n_total = len(y_true)
    is_c = y_true == cls
    prior = float(is_c.mean()) if n_total else 0.5
    idx = bin_index(binary_probability(p_ko, p_ok, cls), bins)
    n = np.bincount(idx, minlength=bins).astype(float)
    t = np.bincount(idx, weights=is_c.astype(float), minlength=bins)
    centres = (np.arange(bins) + 0.5) / bins
    s = np.abs(t - n * centres)
    per_bin = [dict(opinion_from_evidence(float(t[i]), float(s[i]), prior, prior_weight),
                    lo=i / bins, hi=(i + 1) / bins, rp=float(centres[i]), n=int(n[i]), t=int(t[i]))
               for i in range(bins)]
    fused = opinion_from_evidence(float(t.sum()), float(s.sum()), prior, prior_weight)
    return {"class": cls, "prior": prior, "bins": per_bin, "opinion": fused}


def model_opinion(y_true: np.ndarray, p_ko: np.ndarray, p_ok: np.ndarray,
                  bins: int = 10, prior_weight: float = 2.0) -> dict:
    """Per-class opinions (KO, OK) and the model opinion fusing them (evidence summed)."""
    per_class = {c: class_opinion(y_true, p_ko, p_ok, c, bins, prior_weight) for c in ("KO", "OK")}
    ko, ok = per_class["KO"]["opinion"], per_class["OK"]["opinion"]
    r, s = ko["r"] + ok["r"], ko["s"] + ok["s"]
    e_ko, e_ok = ko["r"] + ko["s"], ok["r"] + ok["s"]
    # Josang's fused base rate for evidence-based opinions = evidence-weighted mean.
    a = (ko["a"] * e_ko + ok["a"] * e_ok) / (e_ko + e_ok) if e_ko + e_ok > 0 else (ko["a"] + ok["a"]) / 2
    return {"classes": per_class, "model": opinion_from_evidence(r, s, a, prior_weight),
            "bins": bins, "prior_weight": prior_weight}
