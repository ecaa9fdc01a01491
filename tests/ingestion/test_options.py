"""IngestOptions (ingestion/options.py): one home for each default, one check, one line per bad value.

Before IngestOptions (measured on the commit before it, always-ok on 102 performance images):
``--batch-timeout -5`` ran the submission and blamed it (exit 1, "Timeout value out of range"
in the warm-up call); ``--install-timeout 0`` blamed it too (exit 1, "still running after
0 s"); ``--workers -2``, ``--decode-stock-mb -1`` and ``--max-log-mb -1`` were accepted
(exit 0). Now each is refused before anything runs or is written: exit 2, one line naming
the flag.
"""

import subprocess
import sys

import pytest

from challenge_welding.commands.cli import build_parser
from challenge_welding.contract.errors import ChallengeError
from challenge_welding.contract.names import SET_NAMES
from challenge_welding.ingestion.options import IngestOptions
from challenge_welding.ingestion.run.ingest import ingest


def _args(*argv):
    return build_parser().parse_args(list(argv))


def test_the_commands_defaults_are_the_options_defaults():
    # every flag left out: the CLI's options equal the dataclass's own defaults, field by field
    ing = IngestOptions.from_args(_args("ingest", "--submission", "s", "--input-data", "i", "--output", "o"))
    assert ing == IngestOptions()
    assert (ing.batch_size, ing.batch_timeout, ing.load_timeout, ing.install_timeout) == (10, 600.0, 1800.0, 1800.0)
    assert (ing.max_log_mb, ing.decode_stock_mb, ing.max_processes) == (20.0, 384.0, 512)
    assert ing.sets == tuple(SET_NAMES) and ing.exclusive_predict == "timed" and ing.isolation and ing.warmup
    ev = IngestOptions.from_args(_args("evaluate", "--submission", "s", "--data", "d", "--output", "o"))
    assert ev == IngestOptions()


def test_flags_map_onto_options():
    got = IngestOptions.from_args(_args(
        "ingest", "--submission", "s", "--input-data", "i", "--output", "o", "--batch-size", "3",
        "--no-isolation", "--no-warmup", "--no-progress", "--env-cache", "C", "--sets", "drift",
        "performance", "--exclusive-predict", "--max-processes", "0"))
    assert (got.batch_size, got.isolation, got.warmup, got.progress, got.cache_dir) == (3, False, False, False, "C")
    assert got.sets == ("drift", "performance") and got.exclusive_predict == "all" and got.max_processes == 0
    ev = IngestOptions.from_args(_args("evaluate", "--submission", "s", "--data", "d", "--output", "o",
                                       "--python", "/p", "--allow-source-builds", "--batch-size", "2"))
    assert (ev.python, ev.allow_source_builds, ev.batch_size) == ("/p", True, 2)


@pytest.mark.parametrize("flag, value, says", [
    ("--batch-size", "0", "--batch-size: must be a whole number >= 1, got 0"),
    ("--batch-timeout", "-5", "--batch-timeout: must be a number > 0, got -5.0"),
    ("--install-timeout", "0", "--install-timeout: must be a number > 0, got 0.0"),
    ("--load-timeout", "nan", "--load-timeout: must be a number > 0, got nan"),
    ("--total-timeout", "-1", "--total-timeout: must be a number >= 0, got -1.0"),
    ("--workers", "-2", "--workers: must be a whole number >= 0, got -2"),
    ("--decode-stock-mb", "-1", "--decode-stock-mb: must be a number >= 0, got -1.0"),
    ("--max-log-mb", "-1", "--max-log-mb: must be a number > 0, got -1.0"),
    ("--max-processes", "-3", "--max-processes: must be a whole number >= 0, got -3"),
    ("--sets", "bogus", "--sets: unknown set(s) bogus -> name sets among performance"),
])
def test_a_bad_option_is_one_line_naming_the_flag(tmp_path, flag, value, says):
    out = tmp_path / "pred"
    res = subprocess.run([sys.executable, "-m", "challenge_welding", "ingest", "--submission",
                          str(tmp_path / "none"), "--input-data", str(tmp_path / "none"), "--output",
                          str(out), flag, value], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {says}"), res.stderr
    assert "->" in lines[0] and not out.exists()  # the fix said; refused before anything was made


def test_evaluate_refuses_a_bad_batch_size_in_one_line(tmp_path):
    res = subprocess.run([sys.executable, "-m", "challenge_welding", "evaluate", "--submission",
                          str(tmp_path), "--data", str(tmp_path), "--output", str(tmp_path / "o"),
                          "--batch-size", "-1"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        "error: --batch-size: must be a whole number >= 1, got -1 -> leave it out for the default (10)"]


def test_the_api_checks_the_same_way(tmp_path):
    with pytest.raises(ChallengeError, match=r"^--batch-size: must be a whole number >= 1, got 0 "):
        ingest(tmp_path, tmp_path, tmp_path / "o", batch_size=0)
    with pytest.raises(ChallengeError, match=r"^--installer: 'conda' is not a choice -> use one of auto, uv, pip"):
        IngestOptions(installer="conda")
    with pytest.raises(TypeError, match="batchsize"):
        IngestOptions(batchsize=3)  # a misspelt option is a programming error, not a value
    assert not (tmp_path / "o").exists()
    assert IngestOptions(exclusive_predict=False).exclusive_predict == "none"
    assert IngestOptions(sets=["drift"]).sets == ("drift",)
