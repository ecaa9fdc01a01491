"""Validation targets of docs/scoring.md: the virtual solutions on calibrated reference data.

The reference folder is label-only, in the build-sets format (conftest.make_reference),
calibrated as build-sets does; predictions go through the files (make_virtual ->
PRED/<set>.parquet -> read_frames).
"""

import pytest

from challenge_welding.scoring.config import load_config
from challenge_welding.scoring.inputs import read_frames
from challenge_welding.scoring.score import score_frames
from challenge_welding.scoring.virtual import make_virtual


@pytest.fixture(scope="session")
def virtual_scores(reference_dir, tmp_path_factory):
    config = load_config(reference_dir / "scoring.yaml")
    cache = {}

    def get(kind, seed=0):
        if (kind, seed) not in cache:
            pred = make_virtual(reference_dir, kind, tmp_path_factory.mktemp(kind), seed=seed)
            frames, _, _ = read_frames(reference_dir, pred)
            cache[kind, seed] = score_frames(frames, config, with_bootstrap=False)
        return cache[kind, seed]
    return get


def test_perfect_scores_100(virtual_scores):
    scores, details = virtual_scores("perfect")
    assert scores["score"] == 100.0
    assert all(details["kpis"][k]["raw"] == 1.0 for k in details["kpis"])


def test_very_good_between_95_and_99(virtual_scores):
    assert 95.0 <= virtual_scores("very_good")[0]["score"] <= 99.0


def test_good_between_85_and_95(virtual_scores):
    assert 85.0 <= virtual_scores("good")[0]["score"] <= 95.0


def test_full_unknown_between_5_and_15(virtual_scores):
    assert 5.0 <= virtual_scores("full_unknown")[0]["score"] <= 15.0


@pytest.mark.parametrize("kind", ["full_ok", "full_ko", "random"])
def test_naive_solutions_at_most_20(virtual_scores, kind):
    assert virtual_scores(kind)[0]["score"] <= 20.0


def test_with_trust_beats_no_trust_with_equal_perf_and_generalization(virtual_scores):
    no, _ = virtual_scores("no_trust")
    wt, _ = virtual_scores("with_trust")
    assert wt["score"] >= no["score"] + 15.0
    for key in ("perf", "generalization", "op", "ml", "op_g", "ml_g"):
        assert wt[key] == no[key]
    for key in ("uncertainty", "robustness", "ood", "drift"):
        assert wt[key] > no[key]


def test_no_trust_has_no_uncertainty_gain_and_chance_ood(virtual_scores):
    scores, _ = virtual_scores("no_trust")
    assert scores["uop"] == 0.0 and scores["ood_syn"] == 0.5 and scores["ood_real"] == 0.5


def test_targets_hold_for_another_seed(virtual_scores):
    assert 95.0 <= virtual_scores("very_good", seed=7)[0]["score"] <= 99.0
    assert 80.0 <= virtual_scores("good", seed=7)[0]["score"] <= 95.0


def test_with_trust_gives_the_same_hard_answers_on_performance_and_generalization(reference_dir, tmp_path):
    import pandas as pd

    no = make_virtual(reference_dir, "no_trust", tmp_path / "no")
    wt = make_virtual(reference_dir, "with_trust", tmp_path / "wt")
    for name in ("performance", "generalization"):
        a, b = pd.read_parquet(no / f"{name}.parquet"), pd.read_parquet(wt / f"{name}.parquet")
        assert (a["predicted_state"] == b["predicted_state"]).all()
        assert (a["scores OK"] != b["scores OK"]).any()  # but not the same probabilities
    a, b = pd.read_parquet(no / "ood_real.parquet"), pd.read_parquet(wt / "ood_real.parquet")
    assert (a["predicted_state"] != "UNKNOWN").all() and (b["predicted_state"] == "UNKNOWN").any()
