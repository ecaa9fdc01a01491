"""Every shell command shown to participants runs (issue 25, "Documented commands run").

The fenced shell blocks (```bash, ```sh, ```console, or lines starting with "$ ") of the pages
shipped in the bundle (pages/*.md), the starting kit's README and docs/participants.md are
extracted and run by bash in one folder laid out as the starting kit (challenge-welding/,
Solution-1/, Solution-1.zip), in the documents' order, so that a later command finds what an
earlier one made (DATA). The kit's Solution-1 is the repository's `random` reference solution
here (numpy only, quick to install; the bundle's is a trained model).

Run for real: `python -m venv`, the activation, and every `challenge-welding` command except
dry-run (check-submission and evaluate install the submission with uv in a fresh environment).
Stood in for, and said so: `pip install ./challenge-welding` is checked (the path is this
distribution) and links the package under test into the venv instead of downloading its
dependencies; `challenge-welding dry-run` needs a container engine: its options are checked
against its --help; `docker` lines are the README's, which `make container-test` runs with
Podman: here each is checked to be one of those (the submission's folder aside). A command
repeated by several documents runs once (Solution-1/ and Solution-1.zip count as one). A command
running the organisers' tutorials (`python 01-Tutorial.py`) is tests/test_kit_api.py's
test_published_tutorial. Placeholders: my-solution / my_submission -> Solution-1.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
KIT_README = REPO / "challenge-welding/challenge_welding/bundle/starting_kit_README.md"
DOCS = sorted((REPO / "pages").glob("*.md")) + [KIT_README, REPO / "docs/participants.md"]
SHELL_LANGS = {"bash", "sh", "shell", "console"}
CW = Path(sys.executable).with_name("challenge-welding")
PLACEHOLDERS = [(r"\bmy[-_](?:solution|submission)\.zip\b", "Solution-1.zip"),
                (r"\bmy[-_](?:solution|submission)\b", "Solution-1"),
                # the repository's baseline in the docs' samples: the kit's copy of it here
                (r"\breference-solutions/random\b", "Solution-1")]
SUBMISSION_IN_DOCKER = re.compile(r'"\$\{PWD\}/[^:"]+:/submission:ro"')

PRELUDE = r'''
set -eo pipefail
# Stands in for installing the kit's package (no download in a test): the argument must be
# this distribution's folder; the package under test is linked into the active venv.
pip() {
  [ "$1" = install ] || { echo "doc test: unexpected 'pip $*'" >&2; return 1; }
  local spec="${2%%\[*}"; spec="${spec%/}"
  grep -q '^name = "challenge-welding"' "$spec/pyproject.toml" || { echo "doc test: '$2' is not the challenge-welding distribution" >&2; return 1; }
  if [ -n "${VIRTUAL_ENV:-}" ]; then ln -sf "$CW_UNDER_TEST" "$VIRTUAL_ENV/bin/challenge-welding"; fi
}
'''


def shell_commands(text: str) -> list[tuple[str, bool]]:
    """(command, from a '$' sample block) for each command of the fenced shell blocks,
    backslash continuations joined; comment lines and sample output dropped."""
    found = []
    for lang, body in re.findall(r"^```([\w-]*)[^\n]*\n(.*?)^```", text, flags=re.M | re.S):
        lines = body.replace("\\\n", " ").splitlines()
        prompts = [ln[2:] for ln in lines if ln.startswith("$ ")]
        if prompts:
            found += [(p.strip(), True) for p in prompts]
        elif lang in SHELL_LANGS:
            found += [(ln.strip(), False) for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
    return found


def test_shell_commands_are_extracted_as_written():
    text = "```bash\na --x 1 \\\n    --y 2   # note\n# comment\n```\n```\n$ b c\noutput\n```\n```\nnot a command\n```\n"
    assert shell_commands(text) == [("a --x 1      --y 2   # note", False), ("b c", True)]


def readme_docker_lines() -> set[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    text = text.split("## Participant quick start", 1)[1].split("\n## ", 1)[0]  # that section only
    return {normalised(c) for c, _ in shell_commands(text) if c.startswith("docker ")}


def normalised(command: str) -> str:
    return SUBMISSION_IN_DOCKER.sub('"${PWD}/SUBMISSION:/submission:ro"', command)


def placeholders(command: str) -> str:
    for pattern, value in PLACEHOLDERS:
        command = re.sub(pattern, value, command)
    return command


def check_dry_run_options(command: str):
    """dry-run needs a container engine: each option it is given must be one it has."""
    helptext = subprocess.run([str(CW), "dry-run", "--help"], capture_output=True, text=True).stdout
    for option in re.findall(r"(?<!\S)(--[a-z][\w-]*)", command):
        assert option in helptext, f"{command}: dry-run has no option {option}"


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    """A folder laid out as the starting kit, the package under test as its challenge-welding/."""
    root = tmp_path_factory.mktemp("kit")
    (root / "challenge-welding").symlink_to(REPO / "challenge-welding")
    shutil.copytree(REPO / "reference-solutions/random", root / "Solution-1",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
    with zipfile.ZipFile(root / "Solution-1.zip", "w") as zf:
        for f in sorted((root / "Solution-1").rglob("*")):
            zf.write(f, f.relative_to(root / "Solution-1").as_posix())
    return root


def test_every_documented_command_runs(kit, tmp_path_factory):
    env = {**os.environ, "CW_UNDER_TEST": str(CW), "PATH": f"{CW.parent}{os.pathsep}{os.environ['PATH']}",
           "XDG_CACHE_HOME": str(tmp_path_factory.mktemp("xdg")), "NO_PROXY": "127.0.0.1,localhost"}
    env.pop("VIRTUAL_ENV", None)
    docker_lines = readme_docker_lines()
    assert len(docker_lines) == 4  # build, check-submission, data, evaluate
    done, ran = set(), []
    for doc in DOCS:
        for command, sample in shell_commands(doc.read_text(encoding="utf-8")):
            command = placeholders(command)
            where = f"{doc.relative_to(REPO)}: {command}"
            if command.startswith("docker "):
                assert normalised(command) in docker_lines, f"{where}: not one of the README's docker lines"
                continue
            if re.search(r"\bpython \d\d-[\w-]+\.py\b", command):
                continue  # the organisers' tutorials: tests/test_kit_api.py::test_published_tutorial
            if command.startswith("challenge-welding dry-run"):
                check_dry_run_options(command)
                continue
            # the command without its trailing comment, the kit's submission as a folder or a zip alike
            bare = re.sub(r"\bSolution-1(?:\.zip|/)", "Solution-1", re.sub(r"\s+#.*$", "", command))
            if bare in done:
                continue  # run once already in this folder (the documents repeat the quick start)
            proc = subprocess.run(["bash", "-c", PRELUDE + command], cwd=kit, env=env,
                                  capture_output=True, text=True, timeout=1500)
            # a '$' sample may show a failing submission (status 1); bad usage (2) never
            allowed = (0, 1) if sample else (0,)
            assert proc.returncode in allowed, f"{where}: exit {proc.returncode}\n{proc.stderr[-2000:]}"
            assert "Traceback" not in proc.stderr, f"{where}\n{proc.stderr[-2000:]}"
            done.add(bare)
            ran.append(where)
    kinds = {m.group(1) for w in ran for m in [re.search(r"challenge-welding (\S+)", w)] if m}
    assert {"check-submission", "synth", "build-sets", "evaluate", "ingest"} <= kinds, ran
    assert (kit / "OUT/scores.json").is_file() and (kit / "OUT/detailed_results.html").is_file()
    assert (kit / "PRED/ingestion.json").is_file()
