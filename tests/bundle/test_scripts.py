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


def test_dry_run_script_is_the_python_command(tmp_path):
    """scripts/dry_run.sh only hands its arguments to `challenge-welding dry-run`."""
    res = subprocess.run(["bash", str(SCRIPTS / "dry_run.sh"), "--submission", "s.zip"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2
    assert "challenge-welding dry-run: error: one of the arguments --bundle --data" in res.stderr
