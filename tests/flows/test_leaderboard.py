"""Leaderboard: ranks, colours and files from hand-made scores.json folders."""

import json
import subprocess
import sys

import pandas as pd
import pytest

from challenge_welding.contract.names import SCORE_KEYS
from challenge_welding.contract.errors import ChallengeError
from challenge_welding.flows.leaderboard import leaderboard, rank
from challenge_welding.report.leaderboard import colour


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


def _row_cells(page, name):
    """(text, background) of each cell after the name cell of row ``name``."""
    row = page.split(f'class="name">{name}</td>')[1].split("</tr>")[0]
    return [(c.split(">")[1].split("<")[0], c.split("background: ")[1].split('"')[0] if "background" in c else "")
            for c in row.split("<td")[1:]]


def test_leaderboard_files_order_and_absolute_colours(tmp_path):
    a = _scored(tmp_path / "runs" / "alpha", 42.0, op=0.9)
    b = _scored(tmp_path / "runs" / "beta", 77.5, op=0.1)
    c = _scored(tmp_path / "runs" / "gamma", 42.0, op=0.5)
    scores = json.loads((b / "scores.json").read_text())
    scores.update(perf=0.9, time_p95=1 / 48)  # the 'good' reference's KPI; 4x under the 1/12 s budget
    (b / "scores.json").write_text(json.dumps(scores))
    frame = leaderboard([a, b, c], tmp_path / "board.html")
    assert list(frame["solution"]) == ["beta", "alpha", "gamma"]  # ties broken by name
    assert list(frame["rank"]) == [1, 2, 2]
    csv = pd.read_csv(tmp_path / "board.csv")
    assert list(csv["solution"]) == ["beta", "alpha", "gamma"]
    assert csv.loc[0, "score"] == 77.5
    page = (tmp_path / "board.html").read_text()
    assert "<script" not in page and "http" not in page.split("<body>")[1]
    keys = list(SCORE_KEYS)
    beta = dict(zip(keys, _row_cells(page, "beta")))
    alpha = dict(zip(keys, _row_cells(page, "alpha")))
    # hue = 120 x the position on the column's fixed scale, whatever the other rows hold
    assert beta["score"] == ("77.50", "hsl(93, 70%, 78%)")    # 0..100
    assert beta["perf"] == ("0.900", "hsl(108, 70%, 78%)")    # 0..1: 'good' is green, not red
    assert beta["time_p95"] == ("20.8", "hsl(90, 70%, 78%)")  # ms; red at 83.3 ms, green at 0
    assert beta["op"] == ("0.100", "hsl(108, 70%, 78%)")      # red at 1 (human-only), green at 0
    assert alpha["op"] == ("0.900", "hsl(12, 70%, 78%)")
    assert alpha["time_p95"] == ("500.0", "hsl(0, 70%, 78%)")  # over the budget: red
    assert alpha["ucalib_ko"] == ("0.500", "hsl(0, 70%, 78%)")  # ECE 0.5: I_U's factor is 0
    assert alpha["ood_real"] == ("0.500", "hsl(0, 70%, 78%)")   # AUROC 0.5: chance
    # absolute: the same folder alone on a board gets the same colours
    leaderboard([a], tmp_path / "alone.html")
    assert dict(zip(keys, _row_cells((tmp_path / "alone.html").read_text(), "alpha"))) == alpha


def test_every_column_header_has_a_legend_row(tmp_path):
    leaderboard([_scored(tmp_path / "one", 10.0)], tmp_path / "board.html")
    page = (tmp_path / "board.html").read_text()
    board, rest = page.split('<table class="board">')[1].split("</table>", 1)
    second_row = board.split("</thead>")[0].split("</tr>")[1]
    heads = [h.split(">", 1)[1].split("<")[0].split("&nbsp;")[0].replace("\u200b", "")
             for h in second_row.split("<th")[1:]]
    heads = [h for h in heads if h not in ("rank", "solution")]
    legend = rest.split('<table class="legend">')[1].split("</table>")[0]
    explained = [c.split(">", 1)[1].split("<")[0] for c in legend.split('<td class="k"')[1:]]
    assert len(heads) == len(SCORE_KEYS) and sorted(heads) == sorted(explained)
    assert "t p95 ms" in heads and "uncert." in heads


def test_missing_key_is_one_clear_error(tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "scores.json").write_text(json.dumps({"score": 1.0}))
    with pytest.raises(ChallengeError, match=r"bad/scores.json: key 'perf' is absent, not a number \(and 21 more key\(s\)\)"):
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
