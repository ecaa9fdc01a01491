"""The Docker image's inputs: the pinned requirements match pyproject, the Dockerfile's
contract; and the container-vs-host comparison of scores.json, by hand."""

from __future__ import annotations

import re

import pytest
from packaging.requirements import Requirement

from challenge_welding.bundle.compare import TIME_DEPENDENT_KEYS, compare_scores
from challenge_welding.contract.names import SCORE_KEYS

from .conftest import ROOT

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11


def _lock() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "challenge-welding" / "requirements.lock").read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;]+)", line)
        if m:
            pins[m.group(1).lower().replace("_", "-")] = m.group(2)
    return pins


def test_lock_pins_every_dependency_within_pyproject_specifiers():
    project = tomllib.loads((ROOT / "challenge-welding" / "pyproject.toml").read_text())["project"]
    pins = _lock()
    for dep in project["dependencies"]:
        req = Requirement(dep)
        name = req.name.lower().replace("_", "-")
        assert name in pins, f"{name} is a dependency in pyproject.toml but not pinned in the lock"
        assert req.specifier.contains(pins[name]), f"{name}=={pins[name]} violates {req}"
    assert all(re.fullmatch(r"[0-9][0-9A-Za-z.+!]*", v) for v in pins.values())


def test_dockerfile_contract():
    text = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^ARG BASE_IMAGE=python:3\.12-slim$", text, re.M)
    assert re.search(r"^FROM \$\{BASE_IMAGE\}$", text, re.M)
    assert "requirements.lock" in text and "uv pip install" in text
    # root by default: Codabench's worker makes /app/output 0755 as its own user and runs the
    # image's user (issue 13); a non-root user stays a build argument for local use
    assert re.search(r"^ARG APP_USER=(\w+)$", text, re.M).group(1) == "root"
    assert re.search(r"^USER \$\{APP_USER\}$", text, re.M)
    assert re.search(r"useradd .*\$\{APP_USER\}", text)
    # opencv-python (not headless) imports only with libGL and glib
    assert re.search(r"apt-get install .*\blibgl1\b.*\blibglib2\.0-0\b", text)
    assert "python3 -m venv" in text  # per-submission environments need venv in the image


def _scores(**changes):
    s = {k: 0.5 for k in SCORE_KEYS}
    s.update(score=50.0, time_p95=0.01)
    s.update(changes)
    return s


def test_compare_ignores_only_the_time_dependent_keys():
    assert TIME_DEPENDENT_KEYS == ("score", "perf", "time_p95")
    assert compare_scores(_scores(), _scores(score=51.2, perf=0.48, time_p95=0.02)) == []
    assert compare_scores(_scores(), _scores(op=0.5 + 1e-6)) == ["op: 0.5 != 0.500001"]
    assert compare_scores(_scores(), _scores(uop=0.5 * (1 + 1e-12))) == []  # last bits only


@pytest.mark.parametrize("other, expected", [
    ({"ml": float("nan")}, "ml: not finite"),
    ({"time_p95": float("inf")}, "time_p95: not finite"),
])
def test_compare_requires_finite_numbers(other, expected):
    [diff] = compare_scores(_scores(), _scores(**other))
    assert diff.startswith(expected)


def test_compare_requires_exactly_the_score_keys():
    extra = _scores(accuracy=1.0)
    missing = _scores()
    del missing["ood_d"]
    assert "keys ['accuracy'] differ" in compare_scores(extra, _scores())[0]
    diffs = compare_scores(_scores(), missing)
    assert "second: keys ['ood_d'] differ" in diffs[0] and "ood_d: not finite" in diffs[1]
