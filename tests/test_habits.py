"""Habits that check themselves: every ``noqa`` that stays says why; each folder's ``__init__``
names its modules. (Ruff itself, with RUF100 for the ``noqa`` that silence nothing, runs in
``make test``; see pyproject.toml's [tool.ruff].)"""

import io
import re
import subprocess
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# A noqa comment names one code or more, then why (`E402 - after sys.path is set`). A bare noqa
# silences every rule, and a code alone leaves the next reader to guess whether the rule still
# has to be broken there.
NOQA = re.compile(r"#\s*(?:ruff:\s*|flake8:\s*)?noqa\b(?P<rest>.*)", re.IGNORECASE)
WITH_REASON = re.compile(r":\s*[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*\s*[-–—(:]?\s*(?P<why>.*)")


def python_files():
    """The repository's Python files: the ones git tracks or would track, else every one below
    the root outside hidden and generated folders (a copy with no git)."""
    try:
        out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "*.py"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.split()
        return [ROOT / name for name in out if (ROOT / name).is_file()]
    except (OSError, subprocess.CalledProcessError):
        skip = {"__pycache__", "build", "dist", "demo-work", "node_modules"}
        return [p for p in ROOT.rglob("*.py")
                if not any(part.startswith(".") or part in skip for part in p.relative_to(ROOT).parts)]


def noqa_without_reason(source):
    """The (line, comment) of each ``noqa`` comment that does not say why. Only comments count:
    a ``noqa`` inside a string (a script a test writes for a submission) is not ours to lint.
    """
    found = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type != tokenize.COMMENT:
            continue
        m = NOQA.search(tok.string)
        if m is None:
            continue
        reason = WITH_REASON.match(m["rest"])
        if reason is None or not re.search(r"[A-Za-z]{2}", reason["why"]):
            found.append((tok.start[0], tok.string))
    return found


def test_the_noqa_check_catches_a_bare_noqa_and_a_code_alone():
    src = ("import os  # noqa\n"
           "import re  # noqa: F401\n"
           "import io  # NOQA:F401,E402\n"
           "import sys  # noqa: E402 - after sys.path is set\n"
           "x = 1  # ruff: noqa\n"
           "s = '# noqa'  # a string, then a comment with no noqa\n")
    assert [line for line, _ in noqa_without_reason(src)] == [1, 2, 3, 5]


def test_every_noqa_in_the_repository_says_why():
    files = python_files()
    assert len(files) > 100  # the listing found the tree
    bad = [f"{path.relative_to(ROOT)}:{line}: {comment}"
           for path in files for line, comment in noqa_without_reason(path.read_text())]
    assert not bad, ("a noqa without its reason (write `# noqa: CODE - why`):\n" + "\n".join(bad))
