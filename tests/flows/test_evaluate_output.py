"""`evaluate --output` inside the submission folder is refused: the results would ship in the
participant's next zip of it (issue 26). Also when the names differ only by case (one folder
on macOS and Windows)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from challenge_welding.contract.errors import ChallengeError
from challenge_welding.flows.evaluate import evaluate, output_fault

SOLUTIONS = Path(__file__).resolve().parents[2] / "reference-solutions"


@pytest.fixture
def setup(tmp_path):
    """A real submission folder and a DATA folder (evaluate refuses before reading its sets)."""
    sub = tmp_path / "OUT" / "Solution-1"
    shutil.copytree(SOLUTIONS / "always-ko", sub)
    for name in ("input_data", "reference_data"):
        (tmp_path / "DATA" / name).mkdir(parents=True)
    return sub, tmp_path / "DATA"


def files(folder):
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*"))


@pytest.mark.parametrize("output, why", [
    ("OUT/Solution-1", "inside the submission"),
    ("OUT/solution-1", "differ only by case"),          # the README's old pair of names
])
def test_refused_in_one_line_and_nothing_written(setup, output, why):
    """Before: `evaluate --submission S --output S` ran (exit 0, 95 s) and left predictions/,
    scores.json, details.json and detailed_results.html inside S."""
    sub, data = setup
    before = files(sub)
    root = data.parent
    run = subprocess.run([sys.executable, "-m", "challenge_welding", "evaluate", "--submission", str(sub),
                          "--data", str(data), "--output", str(root / output)],
                         capture_output=True, text=True)
    assert run.returncode == 2 and run.stdout == ""
    [line] = run.stderr.splitlines()
    assert line.startswith(f"error: --output {root / output}: ") and why in line
    assert line.endswith(f"write them elsewhere, e.g. --output {root / 'OUT' / 'Solution-1-results'}")
    assert files(sub) == before
    assert output == "OUT/Solution-1" or not (root / output).exists()
    assert not list(root.glob("**/*.draws.npz"))


@pytest.mark.parametrize("output, why", [
    ("OUT/Solution-1/results", "inside the submission"),
    ("OUT/SOLUTION-1/results", "differ only by case"),
])
def test_the_flow_refuses_before_ingesting(setup, output, why):
    sub, data = setup
    before = files(sub)
    with pytest.raises(ChallengeError, match=why):
        evaluate(sub, data, data.parent / output)
    assert files(sub) == before and not (data.parent / output).exists()


def test_output_fault_by_hand(tmp_path):
    sub = tmp_path / "S"
    sub.mkdir()
    assert output_fault(sub, tmp_path / "S-results") is None
    assert output_fault(sub, tmp_path) is None          # the submission inside OUT is fine
    assert output_fault(tmp_path / "S.zip", tmp_path / "S") is None
    assert "inside the submission" in output_fault(tmp_path / "S.zip", tmp_path / "S.zip")
    # through a symbolic link to the submission
    (tmp_path / "link").symlink_to(sub)
    assert "inside the submission" in output_fault(sub, tmp_path / "link" / "out")
    assert "differ only by case" in output_fault(sub, tmp_path / "s")
