"""Imports run one way: scoring -> data -> ingestion; scoring -> report; then pipeline -> commands/CLI
(lazy imports included)."""

import ast
from pathlib import Path

import pytest

import challenge_welding

PACKAGE = Path(challenge_welding.__file__).parent
# a layer never imports these (higher layers)
# scoring is the base; data may call it (build-sets ends by calibrating the score), the
# ingestion may use both (the scorer's row rules and time percentile, the parquet writer);
# report reads scoring only; the shell (pipeline, evaluate, commands, ...) sits on top.
_SHELL = ("pipeline", "evaluate", "commands", "cli", "leaderboard", "demo", "bundle")
FORBIDDEN = {
    "scoring": ("data", "ingestion", "report") + _SHELL,
    "data": ("ingestion", "report") + _SHELL,
    "ingestion": ("report",) + _SHELL,
    "report": ("data", "ingestion") + _SHELL,
}


def _imports(path: Path):
    """Every module a file imports, anywhere in it (function bodies too), as dotted names."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the file's package
                base = path.relative_to(PACKAGE.parent).with_suffix("").parts[:-node.level]
                yield ".".join(base + ((node.module,) if node.module else ()))
            else:
                yield node.module or ""


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_no_import_goes_up(layer):
    files = sorted((PACKAGE / layer).glob("*.py"))
    assert files
    bad = [(f.name, name) for f in files for name in _imports(f)
           if any(name == f"challenge_welding.{up}" or name.startswith(f"challenge_welding.{up}.")
                  for up in FORBIDDEN[layer])]
    assert bad == []


def test_the_check_sees_a_lazy_import(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from challenge_welding.report.html import render_report\n")
    assert "challenge_welding.report.html" in set(_imports(probe))
