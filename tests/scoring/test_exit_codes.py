"""Exit statuses of score, evaluate, virtual and calibrate: 1 = the submission failed, 2 = bad input or usage."""

import shutil

import pytest

from challenge_welding.commands import cli
from challenge_welding.scoring.virtual import make_virtual


@pytest.fixture(scope="module")
def pred(uncalibrated_reference, tmp_path_factory):
    return make_virtual(uncalibrated_reference, "random", tmp_path_factory.mktemp("exit") / "pred")


@pytest.mark.parametrize("command", ["score", "evaluate", "virtual", "calibrate"])
def test_help_documents_the_exit_statuses(command, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main([command, "--help"])
    assert info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "exit status: 0 = ok" in text and "2 = bad input or usage" in text
    assert ("1 = the submission failed" in text) == (command in ("score", "evaluate"))


def test_submission_failures_exit_1_and_bad_input_2(uncalibrated_reference, pred, tmp_path, capsys):
    broken = tmp_path / "broken"
    shutil.copytree(pred, broken)
    (broken / "drift.parquet").unlink()
    args = ["score", "--reference", str(uncalibrated_reference), "--output", str(tmp_path / "out")]
    assert cli.main(args + ["--predictions", str(broken)]) == 1  # the submission's predictions are missing
    err = capsys.readouterr().err
    assert err.startswith("error: predictions missing for set drift") and err.count("error:") == 1
    # bad input: a reference folder without the reference files
    empty = tmp_path / "empty_ref"
    empty.mkdir()
    assert cli.main(["score", "--reference", str(empty), "--predictions", str(pred),
                     "--output", str(tmp_path / "o2")]) == 2
    assert "reference file" in capsys.readouterr().err
    assert cli.main(["calibrate", "--reference", str(empty)]) == 2
    assert cli.main(["virtual", "--reference", str(empty), "--kind", "good", "--output", str(tmp_path / "v")]) == 2
    assert cli.main(["evaluate", "--submission", str(tmp_path / "nowhere"), "--data", str(tmp_path),
                     "--output", str(tmp_path / "e")]) == 2
    assert not any((tmp_path / d / "scores.json").exists() for d in ("out", "o2", "e"))
