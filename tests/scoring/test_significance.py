"""Paired significance: the arithmetic by hand, an exhaustive tiny case, and real scored runs on the leaderboard."""

import itertools
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from challenge_welding.contract.errors import ChallengeError
from challenge_welding.flows.leaderboard import leaderboard
from challenge_welding.contract import draws as draws_io
from challenge_welding.scoring.bootstrap import Resampler
from challenge_welding.scoring.config import load_config
from challenge_welding.scoring.criteria import SetArrays, set_criteria
from challenge_welding.scoring.significance import compare, holm, letters, p_better, p_values, rank_intervals

CLI = [sys.executable, "-m", "challenge_welding"]


# --- the arithmetic, by hand ------------------------------------------------------------------------
def test_p_better_counts_ties_as_half():
    v = np.array([[1.0, 2.0, 3.0, 4.0],
                  [1.0, 1.0, 4.0, 0.0],
                  [1.0, 2.0, 3.0, 4.0]])
    p = p_better(v)
    # row 0 vs row 1: tie, win, loss, win -> (2 + 0.5) / 4
    assert p[0, 1] == 0.625 and p[1, 0] == 0.375
    assert p[0, 2] == p[2, 0] == 0.5 and np.all(np.diag(p) == 0.5)
    np.testing.assert_allclose(p + p.T, 1.0)


def test_p_values_and_holm_by_hand():
    np.testing.assert_allclose(p_values(np.array([[0.5, 0.99], [0.01, 0.5]])), [[1.0, 0.02], [0.02, 1.0]])
    # m = 4: thresholds 0.0125, 0.0167, 0.025, 0.05 on the sorted p-values 0.01, 0.015, 0.03, 0.04
    # -> 0.01 and 0.015 rejected, 0.03 > 0.025 stops the procedure (0.04 kept although < 0.05)
    assert holm([0.04, 0.01, 0.03, 0.015]).tolist() == [False, True, False, True]
    assert holm([0.0, 0.0]).tolist() == [True, True]


def test_letters_are_maximal_runs_of_ties():
    # order a b c d; ties: a~b, b~c, c~d, but a and c differ
    ties = np.eye(4, dtype=bool)
    for i, j in ((0, 1), (1, 2), (2, 3)):
        ties[i, j] = ties[j, i] = True
    assert letters([0, 1, 2, 3], ties) == ["a", "ab", "bc", "c"]
    assert letters([0, 1], np.eye(2, dtype=bool)) == ["a", "b"]
    assert letters([0, 1, 2], np.ones((3, 3), dtype=bool)) == ["a", "a", "a"]


def test_rank_intervals_by_hand():
    # resample by resample: A first 3 times of 4, B first once; C always last
    v = np.array([[3.0, 3.0, 3.0, 1.0],
                  [2.0, 2.0, 2.0, 3.0],
                  [0.0, 0.0, 0.0, 0.0]])
    # sorted ranks of A: 1 1 1 2, of B: 1 2 2 2. Level 0.2: quantiles 0.4 and 0.6 at positions 1.2 and 1.8
    # of 0..3, taken "lower" (1) and "higher" (2): A [1, 1], B [2, 2]
    np.testing.assert_array_equal(rank_intervals(v, level=0.2), [[1, 1], [2, 2], [3, 3]])
    np.testing.assert_array_equal(rank_intervals(v, level=0.95), [[1, 2], [1, 2], [3, 3]])


# --- a tiny stratified set: the bootstrap's P equals the exhaustive computation --------------------
def _tiny(pred):
    """Performance set of 5 samples, one seam: 2 KO (stratum 0), 3 OK (stratum 1)."""
    y = np.array([0, 0, 1, 1, 1], dtype=np.int8)
    pred = np.asarray(pred, dtype=np.int8)
    proba = np.eye(3)[pred]
    return SetArrays(n=5, y=y, pred=pred, proba=proba, ood_score=np.zeros(5), seams=np.zeros(5, dtype=np.int64),
                     seam_names=["c102"], seam_w=np.array([1.0]), time=np.full(5, 0.01))


def test_tiny_set_matches_the_exhaustive_enumeration():
    config = load_config()
    a = _tiny([0, 0, 1, 1, 1])          # right everywhere: OP = 0 on every resample
    b = _tiny([0, 0, 1, 1, 0])          # the last OK sample called KO: OP > 0 whenever it is drawn
    # by hand: A beats B on OP (lower is better) when the wrong sample is drawn, P = 1 - (2/3)^3 = 19/27,
    # and ties otherwise (8/27), counted 1/2: P(A better) = 19/27 + 4/27 = 23/27
    expected = 23 / 27

    # exhaustive: every ordered draw of 2 positions in the KO stratum and 3 in the OK stratum (4 * 27 = 108)
    weights = []
    for ko in itertools.product(range(2), repeat=2):
        for ok in itertools.product(range(2, 5), repeat=3):
            weights.append(np.bincount(list(ko) + list(ok), minlength=5))
    weights = np.array(weights, dtype=float)
    op_a = set_criteria("performance", a, config, weights)[0]["op"]
    op_b = set_criteria("performance", b, config, weights)[0]["op"]
    exact = np.mean((op_a < op_b) + 0.5 * (op_a == op_b))
    assert exact == pytest.approx(expected, abs=1e-12)
    # the same through p_better (higher is better: compare -OP)
    assert p_better(np.stack([-op_a, -op_b]))[0, 1] == pytest.approx(expected, abs=1e-12)

    # the bootstrap's resamples (drawn from the strata and the seed only) estimate it; shared by A and B
    resampler = Resampler(a.strata(), 0, "performance")
    w = resampler.counts(np.arange(5), 5, 4000)
    np.testing.assert_array_equal(w[:, :2].sum(1), 2)
    mc = p_better(np.stack([-set_criteria("performance", a, config, w)[0]["op"],
                            -set_criteria("performance", b, config, w)[0]["op"]]))[0, 1]
    assert mc == pytest.approx(expected, abs=0.02)  # sd sqrt(0.85 * 0.15 / 4000) = 0.006


# --- real scored runs ----------------------------------------------------------------------------------
def _draws(scored_runs, name):
    return draws_io.load(draws_io.draws_path(scored_runs["runs"][name]))


def test_draws_file_beside_the_scored_folder_not_in_it(scored_runs):
    out = scored_runs["runs"]["random"]
    assert not any(p.suffix == ".npz" for p in out.rglob("*"))
    d = _draws(scored_runs, "random")
    assert d.path == out.parent / "random.draws.npz"
    assert set(d.values) == set(draws_io.DRAW_KEYS + draws_io.RAW_KEYS) and all(len(v) == 300 for v in d.values.values())
    # the per-resample values give back the published interval of the score
    import json

    details = json.loads((out / "details.json").read_text())
    lo, hi = np.percentile(d.values["score"], [2.5, 97.5])
    assert details["score_ci"] == pytest.approx([lo, hi], rel=1e-9)
    assert d.point["score"] == details["score"]


def test_identical_predictions_give_one_half_and_the_same_rank_interval(scored_runs):
    a, b = _draws(scored_runs, "trust-a"), _draws(scored_runs, "trust-b")
    np.testing.assert_array_equal(a.values["score"], b.values["score"])
    names = ["trust-a", "trust-b", "random"]
    ds = [_draws(scored_runs, n) for n in names]
    for key in draws_io.DRAW_KEYS:
        result = compare(np.stack([d.values[key] for d in ds]), [d.point[key] for d in ds])
        assert result.p[0, 1] == 0.5 and not result.differ[0, 1]
        np.testing.assert_array_equal(result.rank_interval[0], result.rank_interval[1])
        assert result.letters[0] == result.letters[1]


def test_better_everywhere_gives_one(scored_runs):
    perfect, random = _draws(scored_runs, "perfect"), _draws(scored_runs, "random")
    assert np.all(perfect.values["score"] > random.values["score"])  # on every shared resample
    result = compare(np.stack([perfect.values["score"], random.values["score"]]), [100.0, 10.0])
    assert result.p[0, 1] == 1.0 and result.p[1, 0] == 0.0 and result.differ[0, 1]
    assert result.rank_interval.tolist() == [[1, 1], [2, 2]]


def test_deterministic_for_a_seed(scored_runs, tmp_path):
    from challenge_welding.flows.score import score

    ref, base = scored_runs["reference"], scored_runs["base"]
    again = tmp_path / "again"
    score(ref, base / "pred" / "random", again, draws_path=tmp_path / "again.draws.npz")
    first, second = _draws(scored_runs, "random"), draws_io.load(tmp_path / "again.draws.npz")
    assert first.fingerprint == second.fingerprint
    for key in draws_io.DRAW_KEYS:
        np.testing.assert_array_equal(first.values[key], second.values[key])


def test_leaderboard_shows_the_comparisons(scored_runs, tmp_path):
    runs = scored_runs["runs"]
    names = ["trust-a", "trust-b", "random", "perfect", "full-ko", "full-ok"]
    frame = leaderboard([runs[n] for n in names], tmp_path / "board", virtual_data=scored_runs["base"],
                        virtual_dir=tmp_path / "virtual")
    assert list(frame.columns[:5]) == ["rank", "rank_lo", "rank_hi", "group", "solution"]
    by = frame.set_index("solution")
    assert by.loc["perfect", "rank_lo"] == by.loc["perfect", "rank_hi"] == 1
    assert by.loc["trust-a", "group"] == by.loc["trust-b", "group"]
    assert (by.loc["trust-a", "rank_lo"], by.loc["trust-a", "rank_hi"]) == \
        (by.loc["trust-b", "rank_lo"], by.loc["trust-b", "rank_hi"])
    assert set(by.loc["perfect", "group"]).isdisjoint(by.loc["random", "group"])
    csv = pd.read_csv(tmp_path / "board.csv")
    assert {"rank_lo", "rank_hi", "group"} <= set(csv.columns)
    pairs = pd.read_csv(tmp_path / "board.pairwise.csv")
    assert set(pairs["metric"]) == set(draws_io.DRAW_KEYS)
    assert len(pairs) == 7 * 6 * 5
    row = pairs[(pairs.metric == "score") & (pairs.a == "trust-a") & (pairs.b == "trust-b")].iloc[0]
    assert row.p_a_beats_b == 0.5 and not row.distinguishable
    html = (tmp_path / "board.html").read_text()
    assert "Which differences are real" in html and html.count('<table class="pairs">') == 7
    assert "perfect is more robust than random with P = 1.00" in html
    assert "trust-a scores higher than trust-b with P = 0.50; not distinguishable" in html
    assert "<script" not in html
    # the virtual reference rows are not compared: blank interval and group, no "nan"
    virtual = frame[frame["reference"]]
    assert len(virtual) == 9 and virtual["rank_lo"].isna().all() and virtual["group"].isna().all()
    from challenge_welding.flows.leaderboard import text_table

    # a word, not a substring: the legend says "luminance"
    assert not re.search(r"\bnan\b", html, re.I) and not re.search(r"\bnan\b", text_table(frame), re.I)


def test_refuses_runs_on_different_reference_data(scored_runs, small_reference, tmp_path):
    from challenge_welding.flows.score import score
    from challenge_welding.scoring.virtual import make_virtual

    other_ref = small_reference(tmp_path / "other" / "reference_data", seed=1)
    other = tmp_path / "elsewhere"
    score(other_ref, make_virtual(other_ref, "random", tmp_path / "p"), other,
          draws_path=draws_io.draws_path(other))
    folders = [scored_runs["runs"]["random"], other]
    with pytest.raises(ChallengeError, match="cannot compare 'random' and 'elsewhere': scored on different"):
        leaderboard(folders, tmp_path / "board")
    proc = subprocess.run(CLI + ["leaderboard", *map(str, folders), "--output", str(tmp_path / "b2")],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: cannot compare")
    # without the comparisons the board is still written (--no-significance)
    proc = subprocess.run(CLI + ["leaderboard", *map(str, folders), "--output", str(tmp_path / "b3"),
                                 "--no-significance"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "b3.pairwise.csv").exists()


def test_missing_or_stale_draws(scored_runs, tmp_path):
    import shutil

    runs = scored_runs["runs"]
    lone = tmp_path / "lone"
    shutil.copytree(runs["random"], lone)  # scores without draws
    frame = leaderboard([runs["perfect"], lone], tmp_path / "board")  # default: off, with a note
    assert "rank_lo" not in frame.columns
    with pytest.raises(ChallengeError, match="lone.draws.npz"):
        leaderboard([runs["perfect"], lone], tmp_path / "board", significance=True)
    shutil.copy(draws_io.draws_path(runs["perfect"]), draws_io.draws_path(lone))  # someone else's draws
    with pytest.raises(ChallengeError, match="does not belong to the scores of 'lone'"):
        leaderboard([runs["perfect"], lone], tmp_path / "board")


def test_score_refuses_draws_inside_the_published_output(scored_runs, tmp_path):
    ref, base = scored_runs["reference"], scored_runs["base"]
    proc = subprocess.run(CLI + ["score", "--reference", str(ref), "--predictions", str(base / "pred" / "random"),
                                 "--output", str(tmp_path / "out"), "--draws", str(tmp_path / "out" / "d.npz")],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "inside the published output" in proc.stderr
    assert not (tmp_path / "out" / "d.npz").exists()
