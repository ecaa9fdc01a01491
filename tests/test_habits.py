"""Habits that check themselves: every ``noqa`` that stays says why; each folder's ``__init__``
names its modules. (Ruff itself, with RUF100 for the ``noqa`` that silence nothing, runs in
``make test``; see pyproject.toml's [tool.ruff].)"""

import ast
import io
import re
import subprocess
import tokenize
from pathlib import Path

import challenge_welding

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path(challenge_welding.__file__).resolve().parent

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


def unnamed_modules(folder):
    """The modules and sub-folders of the package folder ``folder`` that its ``__init__``'s
    docstring does not name. A name counts as ``name.py``, ``name/``, in backquotes, or first
    on an indented line of a listing (``  metrics    each criterion``): a bare word would pass
    on prose (``run``, ``data``) without naming the module."""
    doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text())) or ""
    names = sorted(p.stem for p in folder.glob("*.py") if p.name != "__init__.py")
    names += sorted(p.name for p in folder.iterdir() if (p / "__init__.py").is_file())
    missing = []
    for name in names:
        n = re.escape(name)
        if not re.search(rf"(?<![\w.]){n}(?:\.py|/)|``{n}``|(?<!`)`{n}`(?!`)|^\s+{n}\s", doc, re.MULTILINE):
            missing.append(name)
    return missing


def test_the_module_check_needs_a_name_not_a_word(tmp_path):
    (tmp_path / "__init__.py").write_text('"""The parts: run the score (``score``), draws.py;\n'
                                          '  kpis    the six KPIs\nand reporting/."""\n')
    for name in ("run", "score", "draws", "kpis", "metrics"):
        (tmp_path / f"{name}.py").write_text("")
    for name in ("reporting", "extras"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
    assert unnamed_modules(tmp_path) == ["metrics", "run", "extras"]


def test_every_package_folder_names_its_modules_in_its_init():
    folders = [PACKAGE] + sorted(p.parent for p in PACKAGE.rglob("__init__.py") if p.parent != PACKAGE)
    checked = folders
    assert len(checked) >= 8
    missing = {str(f.relative_to(PACKAGE.parent)): unnamed_modules(f) for f in checked}
    assert {k: v for k, v in missing.items() if v} == {}, (
        "a folder's __init__ docstring does not name these modules (name.py, ``name`` or a listing line)")


def test_every_package_folder_with_modules_is_a_package():
    loose = [p.parent for p in PACKAGE.rglob("*.py") if not (p.parent / "__init__.py").is_file()]
    assert sorted(set(map(str, loose))) == []
