"""The leaderboard's analyses on real scored runs: P(first), rank intervals, expert rank, mCE."""

from __future__ import annotations

import json

import numpy as np
import pytest

from challenge_welding.contract.errors import ChallengeError
from challenge_welding.flows.leaderboard import leaderboard
from challenge_welding.scoring.analyses.leaderboard import relative_to, weight_stability
from challenge_welding.contract import draws as draws_io


@pytest.fixture(scope="module")
def board(scored_runs, tmp_path_factory):
    runs = scored_runs["runs"]
    names = ["perfect", "trust-a", "trust-b", "random"]
    out = tmp_path_factory.mktemp("lb") / "board"
    frame = leaderboard([runs[n] for n in names], out, names=names, baseline="trust-a")
    return frame, out.with_name("board.html").read_text(), names, runs


def test_winner_columns(board):
    frame, html, names, _ = board
    assert frame["p_first"].sum() == pytest.approx(1.0)
    perfect = frame[frame["solution"] == "perfect"].iloc[0]
    assert perfect["p_first"] == 1.0 and (perfect["wrank_lo"], perfect["wrank_hi"]) == (1, 1)
    a, b = (frame[frame["solution"] == n].iloc[0] for n in ("trust-a", "trust-b"))
    assert (a["wrank_lo"], a["wrank_hi"]) == (b["wrank_lo"], b["wrank_hi"])  # identical predictions
    assert "Does the winner hold?" in html and 'id="winner"' in html


def test_expert_rank_says_not_available_without_labelling_type(board):
    frame, html, _, _ = board
    assert frame["expert_rank"].isna().all()
    assert "not available" in html


def test_mce_against_the_baseline_row(board):
    frame, _, names, runs = board
    got = dict(zip(frame["solution"], frame["mce"]))
    assert got["trust-a"] == pytest.approx(1.0) and got["trust-b"] == pytest.approx(1.0)
    # by hand from the published curves: sum over non-zero levels of (1 - ML) over the baseline's
    mine = json.loads((runs["random"] / "details.json").read_text())["robustness"]
    base = json.loads((runs["trust-a"] / "details.json").read_text())["robustness"]
    ratios = []
    for x in mine:
        pairs = [(m, b) for lv, m, b in zip(mine[x]["levels"], mine[x]["ml"], base[x]["ml"])
                 if lv != 0 and m is not None and b is not None]
        ratios.append(sum(1 - m for m, _ in pairs) / sum(1 - b for _, b in pairs))
    assert got["random"] == pytest.approx(np.mean(ratios))
    with pytest.raises(ChallengeError, match="not one of the ranked"):
        relative_to([runs["random"]], ["random"], "Solution-1")


def test_old_draws_files_without_raw_kpis_still_work(scored_runs):
    runs = scored_runs["runs"]
    draws = {n: draws_io.load(draws_io.draws_path(runs[n])) for n in ("perfect", "random")}
    for d in draws.values():
        for k in draws_io.RAW_KEYS:
            d.values.pop(k)
    res = weight_stability(draws)
    assert "not jittered" in res["note"] and res["rows"]["perfect"][0] == 1.0
