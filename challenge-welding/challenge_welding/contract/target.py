"""The evaluator's target: the one place that names the Python and platform submissions run on.

The Dockerfile's base image (``ARG BASE_IMAGE=python:3.12-slim``) must agree with it (a test
reads both); ``check-submission`` resolves a submission's requirements for this target before
any install, whatever Python the participant has.
"""

from __future__ import annotations

PYTHON = (3, 12)                      # the evaluation image's interpreter (python:3.12-slim)
PLATFORM = "x86_64-manylinux_2_28"    # uv's --python-platform: Linux x86_64, glibc 2.28+ wheels
BASE_IMAGE = "python:3.12-slim"       # the Dockerfile's default base image


def python_version() -> str:
    """"3.12": the target's Python as uv and pip spell it."""
    return f"{PYTHON[0]}.{PYTHON[1]}"


def describe() -> str:
    """One line: what the evaluator runs submissions on."""
    return f"Python {python_version()} on Linux x86_64 (manylinux wheels)"
