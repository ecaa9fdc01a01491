"""Fixtures of the significance tests: real scoring of virtual predictions on a small reference.

The reference generator is the scoring tests' (tests/scoring/conftest.py), loaded by path.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("scoring_conftest_for_significance",
                                               Path(__file__).resolve().parents[1] / "scoring" / "conftest.py")
_scoring = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_scoring)
make_reference = _scoring.make_reference


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

    from challenge_welding.scoring.draws import draws_path
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
