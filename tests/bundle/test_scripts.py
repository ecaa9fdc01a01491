"""The shell scripts: valid bash, and their argument errors (no container is started)."""

from __future__ import annotations

import subprocess

import pytest

from .conftest import ROOT

SCRIPTS = ROOT / "scripts"


@pytest.mark.parametrize("name", ["dry_run.sh", "container_test.sh", "container_matrix.sh"])
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


def test_container_scripts_build_the_dockerfile_unchanged():
    """The image is built from the Dockerfile's own base (python:3.12-slim): no BASE_IMAGE
    argument but behind container_test.sh's --debian-base."""
    matrix = (SCRIPTS / "container_matrix.sh").read_text()
    assert "BASE_IMAGE" not in matrix and "BASE=docker.io/library/python:3.12-slim" in matrix
    test = (SCRIPTS / "container_test.sh").read_text()
    assert 'BASE=docker.io/library/python:3.12-slim\n[ "$DEBIAN_BASE" = 0 ] || ' in test
    assert '[ "$DEBIAN_BASE" = 0 ] || BUILD+=(--build-arg BASE_IMAGE="$BASE")' in test
    assert "ARG BASE_IMAGE=python:3.12-slim" in (ROOT / "Dockerfile").read_text()
