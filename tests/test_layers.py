"""The import rule of the package, stated once: the table LAYERS (docs/architecture.md points here).

Each folder of challenge_welding is a layer; a layer imports only the layers listed for it
(function-level imports included). Nothing else sits at the package root but the package's
face (``__init__``, ``__main__``), the participant interface under its two published
import paths and the published starter kit's modules (docs/contracts.md).
"""

import ast
import sys
from pathlib import Path

import pytest

import challenge_welding

PACKAGE = Path(challenge_welding.__file__).parent

ENGINE = ("contract", "scoring", "data", "ingestion", "report")
# layer -> the layers it may import (besides itself), bottom to top
LAYERS = {
    "contract": (),                                        # names, registry, prediction rules, errors, files
    "scoring": ("contract",),                              # every number
    "data": ("contract", "scoring"),                       # build-sets ends by calibrating the score
    "ingestion": ("contract", "data"),                     # row rules, map format, parquet writer: no scoring
    "report": ("contract",),                               # draws what it is given
    "bundle": ENGINE,                                      # the Codabench bundle, its limits, its dry run
    "flows": ENGINE + ("bundle",),                         # one run, top to bottom (rehearse packs a bundle)
    "commands": ENGINE + ("flows", "bundle"),              # shell: the command line
}
# the package root: its face, the participant interface (a numpy-only file copied into
# submissions) and the published starter kit's modules (its API, same paths: docs/contracts.md)
# Rooms inside a layer: layer -> {room -> the rooms of that layer it may import}, bottom to top.
# A layer with rooms keeps no module of its own but its __init__ (docs/architecture.md).
ROOMS = {
    "ingestion": {
        "confine": (),                                     # sandbox, layers, reaper, self-check
        "install": ("confine",),                           # the submission on disk, its environment
        "handover": ("confine",),                          # the child, the wire, buffers, the clock
        "run": ("confine", "install", "handover"),         # ingest(), one set, validate, write, check
    },
}
# What is reported but never scored has one room in scoring (analyses/: the analyses, the extras,
# the leaderboard's analyses); inside scoring only the shell that fills details.json enters it, so
# nothing scored can depend on what is only reported.
REPORTED = {"scoring": ("analyses", {"score.py"})}
# A layer's face beside its rooms: options (every option of a run, its default, its check), read
# by every room and by the commands' --help, so it imports only contract and the standard library.
FACES = {"ingestion": {"options.py"}}
ROOT_MODULES = {"__init__.py", "__main__.py", "ai_component_interface.py", "AIComponent_interface.py",
                "_version_.py", "user_interface.py", "dataloaders.py", "inference_tools.py"}
ROOT_MAY_IMPORT = {"__main__": ("commands",), "AIComponent_interface": ("ai_component_interface",),
                   "user_interface": ("contract",), "dataloaders": ("contract", "user_interface"),
                   # TestAIComponent runs a submission as the evaluator does: its device and rules
                   "inference_tools": ("contract", "user_interface", "ingestion")}


def _imports(path: Path):
    """Every module a file imports, anywhere in it (function bodies too), as dotted names."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the file's package
                base = path.relative_to(PACKAGE.parent).with_suffix("").parts[:-node.level]
                module = ".".join(base + ((node.module,) if node.module else ()))
            else:
                module = node.module or ""
            if module == "challenge_welding":  # from challenge_welding import x: x is the module
                yield from (f"challenge_welding.{a.name}" for a in node.names)
            else:
                yield module


def _target(name: str) -> str | None:
    """The package part a dotted name lands in (a layer or a root module), None outside the package."""
    parts = name.split(".")
    if parts[0] != "challenge_welding" or len(parts) == 1:
        return None
    return None if parts[1].startswith("__") else parts[1]  # __version__: the package's face


def _violations(path: Path, own: str, allowed) -> list:
    return [(path.name, name) for name in _imports(path)
            if (t := _target(name)) is not None and t != own and t not in allowed]


def test_every_folder_has_a_row_and_nothing_else_is_loose():
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == set(LAYERS)
    assert {p.name for p in PACKAGE.glob("*.py")} == ROOT_MODULES


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_a_layer_imports_only_what_its_row_allows(layer):
    files = sorted((PACKAGE / layer).rglob("*.py"))
    assert files
    assert [v for f in files for v in _violations(f, layer, LAYERS[layer])] == []


def test_the_root_imports_only_its_entry_points():
    bad = [v for f in sorted(PACKAGE.glob("*.py")) for v in _violations(f, f.stem, ROOT_MAY_IMPORT.get(f.stem, ()))]
    assert bad == []


def test_every_folder_says_what_it_owns_and_may_import():
    for layer in LAYERS:
        doc = ast.get_docstring(ast.parse((PACKAGE / layer / "__init__.py").read_text(encoding="utf-8"))) or ""
        assert "import" in doc, layer


def test_the_check_sees_a_lazy_import_and_a_from_package_import(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from challenge_welding.report.html import render_report\n"
                     "from challenge_welding import flows, __version__\nfrom challenge_welding.contract import names\n")
    assert _violations(probe, "scoring", LAYERS["scoring"]) == [
        ("probe.py", "challenge_welding.flows"), ("probe.py", "challenge_welding.report.html")]


def _room(name: str, layer: str) -> str | None:
    """The room of ``layer`` a dotted name lands in, None outside the layer's rooms."""
    parts = name.split(".")
    inside = parts[:2] == ["challenge_welding", layer] and len(parts) > 2
    return parts[2] if inside and parts[2] in ROOMS[layer] else None


@pytest.mark.parametrize("layer", sorted(ROOMS))
def test_every_room_has_a_row_and_nothing_else_is_loose(layer):
    rooms = {p.name for p in (PACKAGE / layer).iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert rooms == set(ROOMS[layer])
    assert {p.name for p in (PACKAGE / layer).glob("*.py")} == {"__init__.py", *FACES.get(layer, ())}


@pytest.mark.parametrize("layer,face", [(layer, f) for layer in sorted(FACES) for f in FACES[layer]])
def test_a_face_imports_only_contract_and_the_standard_library(layer, face):
    ours = [n for n in _imports(PACKAGE / layer / face) if n.split(".")[0] == "challenge_welding"]
    assert ours and all(n.startswith("challenge_welding.contract") for n in ours), ours
    third = [n for n in _imports(PACKAGE / layer / face)
             if n.split(".")[0] not in sys.stdlib_module_names and n.split(".")[0] != "challenge_welding"]
    assert third == []


@pytest.mark.parametrize("layer,room", [(layer, room) for layer in sorted(ROOMS) for room in ROOMS[layer]])
def test_a_room_imports_only_the_rooms_below_it_and_lists_its_modules(layer, room):
    files = sorted((PACKAGE / layer / room).glob("*.py"))
    allowed = ROOMS[layer][room]
    bad = [(f.name, name) for f in files for name in _imports(f)
           if (r := _room(name, layer)) is not None and r != room and r not in allowed]
    assert bad == []
    doc = ast.get_docstring(ast.parse((PACKAGE / layer / room / "__init__.py").read_text(encoding="utf-8")))
    assert "import" in doc
    listed = {f.stem for f in files if f.name != "__init__.py"}
    assert [m for m in sorted(listed) if f"  {m} " not in doc] == []


def test_the_room_check_sees_an_import_that_runs_back_up(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from challenge_welding.ingestion.run.ingest import ingest\n"
                     "from challenge_welding.ingestion.confine import sandbox\n")
    ups = [n for n in _imports(probe) if _room(n, "ingestion") not in (None, "confine")]
    assert ups == ["challenge_welding.ingestion.run.ingest"]


@pytest.mark.parametrize("layer", sorted(REPORTED))
def test_only_the_shell_enters_the_room_of_what_is_reported(layer):
    room, shells = REPORTED[layer]
    inside = f"challenge_welding.{layer}.{room}"
    entering = sorted(f.name for f in (PACKAGE / layer).glob("*.py")
                      if any(n == inside or n.startswith(inside + ".") for n in _imports(f)))
    assert entering == sorted(shells)
