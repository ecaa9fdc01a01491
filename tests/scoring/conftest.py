"""Fixtures of the scoring tests: a label-only reference-data folder in the build-sets format.

``make_reference`` writes the six DATA/reference_data/<set>.parquet files with
realistic sizes and class mix (docs/contracts.md, "Evaluation data"): about 5 % KO,
seams c102/c20/c33 (39/22/39 %) everywhere except generalization (c19, c34,
c101), robustness as perturbation/level ladders around a clean copy, balanced
OOD sets, and an ordered drift whose last fifth is labelled OOD.
The benchmark (benchmarks/scoring.py) imports it for its large reference.

The significance tests' fixtures (``scored_runs``, ``small_reference``): real scoring of
virtual predictions on a small reference.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

LADDERS = {
    "rotation": [-30.0, -20.0, -10.0, 10.0, 20.0, 30.0],
    "translation": [5.0, 10.0, 15.0, 20.0],
    "blur": [2.0, 4.0, 6.0, 8.0],
    "luminance": [-0.6, -0.4, -0.2, 0.2, 0.4, 0.6],
}
IN_SEAMS, IN_SHARES = ("c102", "c20", "c33"), (0.39, 0.22, 0.39)
UNSEEN = ("c19", "c34", "c101")


def _labels(rng, n, ko_share, seams, shares):
    n_ko = max(1, int(round(n * ko_share)))
    cls = np.array(["KO"] * n_ko + ["OK"] * (n - n_ko), dtype=object)
    rng.shuffle(cls)
    seam = rng.choice(np.array(seams, dtype=object), size=n, p=np.asarray(shares) / np.sum(shares))
    return cls, seam


def _ids(rng, n, used):
    out = []
    while len(out) < n:
        for v in rng.integers(0, 2**40, size=n - len(out)):
            sid = f"{int(v):010x}"
            if sid not in used:
                used.add(sid)
                out.append(sid)
    return np.array(out, dtype=object)


def make_reference(out_dir, n_perf=2000, ko_share=0.05, seed=0, per_level=None) -> Path:
    """Write a reference_data folder (six parquet files) and return its path."""
    rng = np.random.default_rng(seed)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    used: set = set()
    sets = {}
    cls, seam = _labels(rng, n_perf, ko_share, IN_SEAMS, IN_SHARES)
    sets["performance"] = pd.DataFrame({"sample_id": _ids(rng, n_perf, used), "class": cls, "welding-seams": seam})
    per_level = per_level or max(200, n_perf // 10)  # >= 10 KO per level at 5 % KO
    parts = [("none", 0.0)] + [(x, lv) for x, levels in LADDERS.items() for lv in levels]
    rows = []
    for pert, level in parts:
        c, s = _labels(rng, per_level, ko_share, IN_SEAMS, (1, 1, 1))  # seam-balanced
        rows.append(pd.DataFrame({"class": c, "welding-seams": s, "perturbation": pert, "level": level}))
    rob = pd.concat(rows, ignore_index=True)
    rob.insert(0, "sample_id", _ids(rng, len(rob), used))
    sets["robustness"] = rob.sample(frac=1.0, random_state=seed).reset_index(drop=True)
    for name in ("ood_real", "ood_synthetic"):
        n = max(40, n_perf // 5)
        c, s = _labels(rng, n, ko_share, IN_SEAMS, IN_SHARES)
        ood = np.array([0] * (n // 2) + [1] * (n - n // 2))
        rng.shuffle(ood)
        sets[name] = pd.DataFrame({"sample_id": _ids(rng, n, used), "class": c, "welding-seams": s, "ood": ood})
    n = max(60, int(n_perf * 0.3))
    c, s = _labels(rng, n, ko_share, UNSEEN, (1, 1, 1))
    sets["generalization"] = pd.DataFrame({"sample_id": _ids(rng, n, used), "class": c, "welding-seams": s})
    n = max(50, n_perf // 4)
    c, s = _labels(rng, n, 0.10, IN_SEAMS, IN_SHARES)  # drift: class mix not dominated by KO
    pos = np.arange(n)
    sets["drift"] = pd.DataFrame({"sample_id": _ids(rng, n, used), "class": c, "welding-seams": s,
                                  "ood": (pos >= int(n * 0.8)).astype(int), "position": pos})
    for name, frame in sets.items():
        frame.to_parquet(out / f"{name}.parquet", index=False)
    return out


@pytest.fixture(scope="session")
def reference_dir(tmp_path_factory):
    """A reference folder, calibrated like build-sets does (alphas in its scoring.yaml)."""
    from challenge_welding.scoring.calibrate import calibrate

    ref = make_reference(tmp_path_factory.mktemp("data") / "reference_data")
    calibrate(ref)
    return ref


@pytest.fixture(scope="session")
def uncalibrated_reference(tmp_path_factory):
    return make_reference(tmp_path_factory.mktemp("raw") / "reference_data", n_perf=600, seed=3)


@pytest.fixture(scope="session")
def reference_maker():
    """make_reference, for tests that need their own sizes (test modules must not import conftest by name)."""
    return make_reference


# ----------------------------------------------------------------------------- significance
def _small_reference(folder, seed=0):
    """A calibrated reference of 600 performance samples with B = 300 resamples (enough for these checks)."""
    import yaml

    from challenge_welding.scoring.calibrate import calibrate

    ref = make_reference(folder, n_perf=600, seed=seed)
    calibrate(ref)
    config = yaml.safe_load((ref / "scoring.yaml").read_text())
    config.setdefault("extras", {}).setdefault("bootstrap", {})["n"] = 300
    (ref / "scoring.yaml").write_text(yaml.safe_dump(config))
    return ref


@pytest.fixture(scope="session")
def scored_runs(tmp_path_factory):
    """{name: scored folder} with draws beside each: with_trust twice (identical predictions), random, perfect."""
    import shutil

    from challenge_welding.contract.draws import draws_path
    from challenge_welding.flows.score import score
    from challenge_welding.scoring.virtual import make_virtual

    base = tmp_path_factory.mktemp("signif")
    ref = _small_reference(base / "reference_data")
    runs = {}
    for name, kind in (("trust-a", "with_trust"), ("random", "random"), ("perfect", "perfect"),
                       ("full-ko", "full_ko"), ("full-ok", "full_ok")):
        pred = make_virtual(ref, kind, base / "pred" / name)
        runs[name] = base / "scored" / name
        score(ref, pred, runs[name], draws_path=draws_path(runs[name]))
    # a second team sending byte-identical predictions
    shutil.copytree(base / "pred" / "trust-a", base / "pred" / "trust-b")
    runs["trust-b"] = base / "scored" / "trust-b"
    score(ref, base / "pred" / "trust-b", runs["trust-b"], draws_path=draws_path(runs["trust-b"]))
    return {"reference": ref, "base": base, "runs": runs}


@pytest.fixture
def small_reference():
    """The maker of small references (test modules must not import conftest by name)."""
    return _small_reference
