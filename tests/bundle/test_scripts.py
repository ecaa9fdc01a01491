"""The shell scripts: valid bash, and their argument errors (no container is started)."""

from __future__ import annotations

import subprocess

import pytest

from .conftest import ROOT

SCRIPTS = ROOT / "scripts"


@pytest.mark.parametrize("name", ["dry_run.sh", "container_test.sh"])
def test_scripts_parse_and_print_help(name):
    assert subprocess.run(["bash", "-n", str(SCRIPTS / name)]).returncode == 0
    res = subprocess.run(["bash", str(SCRIPTS / name), "--help"], capture_output=True, text=True,
                         timeout=30)
    assert "scripts/" + name in res.stdout


@pytest.mark.parametrize("args, message", [
    ([], "--image is required"),
    (["--image", "x"], "--submission is required"),
    (["--image", "x", "--submission", "/nonexistent.zip"], "/nonexistent.zip: no such file"),
    (["--image", "x", "--submission", "{sub}"], "give --bundle bundle.zip or --data DATA"),
    (["--image", "x", "--submission", "{sub}", "--data", "{sub}"], "not a build-sets folder"),
    (["--bogus"], "unknown option --bogus"),
])
def test_dry_run_argument_errors(tmp_path, args, message):
    args = [a.replace("{sub}", str(tmp_path)) for a in args]
    res = subprocess.run(["bash", str(SCRIPTS / "dry_run.sh"), *args, "--engine", "true",
                          "--out", str(tmp_path / "out")],
                         capture_output=True, text=True, timeout=30)
    assert res.returncode == 2
    [line] = res.stderr.strip().splitlines()  # one clear line
    assert line.startswith("dry_run: error: ") and message in line
