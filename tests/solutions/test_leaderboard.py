"""Leaderboard: ranks, colours and files from hand-made scores.json folders."""

import json
import subprocess
import sys

import pandas as pd
import pytest

from challenge_welding.contract.names import SCORE_KEYS
from challenge_welding.contract.errors import ChallengeError
from challenge_welding.flows.leaderboard import colour, leaderboard, rank


def _scored(folder, score, op=0.5):
    folder.mkdir(parents=True)
    scores = {k: 0.5 for k in SCORE_KEYS}
    scores.update(score=score, op=op)
    (folder / "scores.json").write_text(json.dumps(scores))
    return folder


def test_rank_is_competition_ranking_of_submissions_only():
    assert rank([90.0, 80.0, 80.0, 70.0], [False] * 4) == [1, 2, 2, 4]
    assert rank([95.0, 80.0, 60.0], [True, False, False]) == [None, 1, 2]


def test_colour_ends_and_direction():
    assert colour(1.0, 0.0, 1.0) == "hsl(120, 70%, 78%)"  # best: green
    assert colour(0.0, 0.0, 1.0) == "hsl(0, 70%, 78%)"    # worst: red
    assert colour(0.25, 0.0, 1.0) == "hsl(30, 70%, 78%)"
    assert colour(0.0, 0.0, 2.0, lower_better=True) == "hsl(120, 70%, 78%)"
    assert colour(3.0, 3.0, 3.0) == "hsl(0, 0%, 92%)"      # constant column: neutral


def test_leaderboard_files_order_and_colours(tmp_path):
    a = _scored(tmp_path / "runs" / "alpha", 42.0, op=0.9)
    b = _scored(tmp_path / "runs" / "beta", 77.5, op=0.1)
    c = _scored(tmp_path / "runs" / "gamma", 42.0, op=0.5)
    frame = leaderboard([a, b, c], tmp_path / "board.html")
    assert list(frame["solution"]) == ["beta", "alpha", "gamma"]  # ties broken by name
    assert list(frame["rank"]) == [1, 2, 2]
    csv = pd.read_csv(tmp_path / "board.csv")
    assert list(csv["solution"]) == ["beta", "alpha", "gamma"]
    assert csv.loc[0, "score"] == 77.5
    page = (tmp_path / "board.html").read_text()
    assert "<script" not in page and "http" not in page.split("<body>")[1]
    # beta is best on score and on op (lower better): its row holds two pure greens;
    # alpha has the worst op (0.9): pure red in the op column.
    beta_row = page.split('class="name">beta</td>')[1].split("</tr>")[0]
    assert beta_row.count("hsl(120, 70%, 78%)") == 2
    alpha_row = page.split('class="name">alpha</td>')[1].split("</tr>")[0]
    cells = [c.split(">")[1].split("<")[0] for c in alpha_row.split("<td")[1:]]
    op_col = 1 + len(("perf", "uncertainty", "robustness", "ood", "generalization", "drift"))
    assert cells[op_col] == "0.900"
    assert "hsl(0, 70%, 78%)" in alpha_row.split("<td")[op_col + 1]


def test_missing_key_is_one_clear_error(tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "scores.json").write_text(json.dumps({"score": 1.0}))
    with pytest.raises(ChallengeError, match="bad/scores.json lacks the numeric key"):
        leaderboard([bad], tmp_path / "board")


def test_cli_prints_table_and_writes_files(tmp_path):
    a = _scored(tmp_path / "one", 10.0)
    res = subprocess.run([sys.executable, "-m", "challenge_welding", "leaderboard", str(a),
                          "--output", str(tmp_path / "lb")], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "one" in res.stdout and "10.00" in res.stdout
    assert (tmp_path / "lb.html").exists() and (tmp_path / "lb.csv").exists()
    res = subprocess.run([sys.executable, "-m", "challenge_welding", "leaderboard",
                          str(tmp_path / "nope"), "--output", str(tmp_path / "x")],
                         capture_output=True, text=True)
    assert res.returncode == 2 and res.stderr.startswith("error: ") and "nope" in res.stderr
