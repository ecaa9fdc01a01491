"""The package skeleton: CLI entry point, interface import paths, config copies."""

import subprocess
import sys
from pathlib import Path

import pytest

from challenge_welding.commands import cli
from challenge_welding.contract.names import SCORE_KEYS

ROOT = Path(__file__).resolve().parents[1]


def test_both_interface_import_paths_are_the_same_class():
    from challenge_welding.ai_component_interface import AbstractAIComponent as new
    from challenge_welding.AIComponent_interface import AbstractAIComponent as old

    assert new is old
    with pytest.raises(TypeError):
        new()  # abstract


def test_every_contract_command_is_registered():
    for name in ("synth", "build-sets", "ingest", "score", "virtual", "evaluate", "leaderboard",
                 "demo", "bundle", "check-submission", "calibrate", "dry-run"):
        assert name in cli.COMMANDS


@pytest.mark.parametrize("name", sorted(cli.COMMANDS))
def test_every_command_documents_its_exit_status(name):
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices[name]
    text = " ".join(sub.format_help().split())
    status = text.split("exit status:")[1]
    assert status.lstrip().startswith("0") and "2" in status and "bad input or usage" in status
    # the commands that run a submission say when it failed (1)
    if name in ("ingest", "score", "evaluate", "check-submission", "dry-run"):
        assert "1 = the submission failed" in status or "1 the submission failed" in status


def test_console_script_runs_and_prints_help():
    out = subprocess.run([sys.executable, "-m", "challenge_welding", "--help"],
                         capture_output=True, text=True, check=True).stdout
    assert "build-sets" in out and "score" in out


def test_score_keys_match_contract():
    assert len(SCORE_KEYS) == 23 and SCORE_KEYS[0] == "score"
    assert all(len(k) <= 36 for k in SCORE_KEYS)


def test_reference_data_config_is_the_packaged_default():
    packaged = ROOT / "challenge-welding/challenge_welding/scoring/default_scoring.yaml"
    assert (ROOT / "reference_data/scoring.yaml").read_text() == packaged.read_text()


def test_the_ingestion_times_the_percentile_the_default_score_uses():
    from challenge_welding.contract.names import TIME_PERCENTILE
    from challenge_welding.scoring.config import load_config

    time = load_config(None).time
    assert (time.percentile, time.method) == (TIME_PERCENTILE, "linear")
