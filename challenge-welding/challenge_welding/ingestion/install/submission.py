"""A submission on disk: unpack a zip or copy a folder, check its layout, read its requirements."""

from __future__ import annotations

import ast
import difflib
import re
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from challenge_welding.contract.errors import ChallengeError

PACKAGE = "challenge_solution"
COMPONENT_FILE = f"{PACKAGE}/AIComponent.py"
CLASS_NAME = "MyAIComponent"
BUILD_FILES = ("setup.py", "pyproject.toml")
# The starter kit's own package: its interface is provided by the evaluator.
INTERFACE_DIST = "challenge-welding"
_IGNORED = shutil.ignore_patterns(".git", "__pycache__", "*.pyc", ".venv", "venv", "build",
                                  "*.egg-info", ".ipynb_checkpoints", "__MACOSX", ".DS_Store")


@dataclass
class Problem:
    message: str
    fix: str
    fatal: bool = True

    def __str__(self) -> str:
        return f"{self.message} -> fix: {self.fix}"


def _find_root(base: Path) -> Path:
    """The folder holding setup.py/pyproject.toml: ``base`` or its single top folder."""
    if any((base / f).is_file() for f in BUILD_FILES) or (base / PACKAGE).is_dir():
        return base
    entries = [p for p in base.iterdir() if p.name not in ("__MACOSX", ".DS_Store")]
    if len(entries) == 1 and entries[0].is_dir():
        return _find_root(entries[0])
    return base


def unpack(path: str | Path, workdir: str | Path) -> Path:
    """Copy a submission folder, or extract a zip, under ``workdir``; return its root.

    A copy keeps the original untouched (building writes *.egg-info and build/
    into the source) and drops caches, git data and virtual environments.
    """
    path, workdir = Path(path), Path(workdir)
    dest = workdir / "submission"
    if dest.exists():
        shutil.rmtree(dest)
    if path.is_dir():
        shutil.copytree(path, dest, ignore=_IGNORED)
    elif path.is_file() and zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                name = PurePosixPath(info.filename)
                if name.is_absolute() or ".." in name.parts:
                    raise ChallengeError(f"{path}: unsafe member {info.filename!r} in the zip")
            zf.extractall(dest)
    elif path.exists():
        raise ChallengeError(f"{path}: not a folder nor a zip file")
    else:
        raise ChallengeError(f"submission not found: {path}")
    return _find_root(dest)


def layout_problems(root: Path) -> list[Problem]:
    """Check the layout the challenge requires. Fatal problems stop an ingestion."""
    problems = []
    if not any((root / f).is_file() for f in BUILD_FILES):
        problems.append(Problem("no setup.py or pyproject.toml at the submission's root",
                                "add the starter kit's setup.py (it reads requirements.txt) at "
                                "the top of the zip, next to challenge_solution/"))
    if not (root / "requirements.txt").is_file():
        problems.append(Problem("no requirements.txt", "add a requirements.txt listing your "
                                "dependencies with exact versions (name==version)", fatal=False))
    if not (root / PACKAGE / "__init__.py").is_file():
        problems.append(Problem(f"no {PACKAGE}/__init__.py", f"create an empty {PACKAGE}/__init__.py "
                                "so that setup.py packages the folder"))
    component = root / COMPONENT_FILE
    if not component.is_file():
        problems.append(Problem(f"no {COMPONENT_FILE}", f"put your class {CLASS_NAME} in "
                                f"{COMPONENT_FILE}"))
    else:
        problems.extend(_component_problems(component))
    setup = root / "setup.py"
    if setup.is_file():
        text = setup.read_text(errors="replace")
        if "requirements" not in text and "install_requires" not in text:
            problems.append(Problem("setup.py does not read requirements.txt",
                                    "pass install_requires=parse_requirements('requirements.txt') "
                                    "as in the starter kit", fatal=False))
        if "include_package_data" not in text:
            problems.append(Problem("setup.py lacks include_package_data=True",
                                    "add include_package_data=True so that the files listed in "
                                    "MANIFEST.in are installed", fatal=False))
    data_files = [p for p in (root / PACKAGE).rglob("*") if p.is_file()
                  and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts] \
        if (root / PACKAGE).is_dir() else []
    if data_files and not (root / "MANIFEST.in").is_file():
        problems.append(Problem(f"{PACKAGE}/ holds data files ({data_files[0].name}, ...) but "
                                "there is no MANIFEST.in",
                                "add a MANIFEST.in with a line 'include "
                                f"{data_files[0].relative_to(root).as_posix()}' per file (or "
                                f"'recursive-include {PACKAGE} *')", fatal=False))
    for name in ("metadata", "metadata.yaml"):
        if (root / name).is_file():
            # Codabench runs the `command` of a submission's metadata file as a program of its own,
            # next to the ingestion and with the same output folder: it could rewrite predictions.
            problems.append(Problem(f"a file named {name} at the submission's root",
                                    f"remove {name}: Codabench would run it as a program "
                                    "instead of leaving the run to the evaluator"))
    return problems


def _component_problems(component: Path) -> list[Problem]:
    try:
        tree = ast.parse(component.read_text(errors="replace"), filename=str(component))
    except SyntaxError as exc:
        return [Problem(f"{COMPONENT_FILE} line {exc.lineno}: syntax error: {exc.msg}",
                        "fix the syntax error")]
    classes = {node.name: node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    if CLASS_NAME not in classes:
        near = difflib.get_close_matches(CLASS_NAME, list(classes), n=1, cutoff=0.6) \
            or [c for c in classes if c.lower() == CLASS_NAME.lower()]
        if near:  # a near miss: name what was found and what is looked for
            return [Problem(f"{COMPONENT_FILE}: found class {near[0]}: the evaluator looks for "
                            f"{CLASS_NAME}", f"rename class {near[0]} to {CLASS_NAME}")]
        found = f" (it defines {', '.join(sorted(classes))})" if classes else ""
        return [Problem(f"{COMPONENT_FILE} defines no class {CLASS_NAME}{found}",
                        f"name your component class {CLASS_NAME}")]
    cls = classes[CLASS_NAME]
    methods = {n.name: n for n in cls.body
               if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    problems = []
    bases = [ast.unparse(b) for b in cls.bases]
    if not any(b.endswith("AbstractAIComponent") for b in bases):
        problems.append(Problem(f"{CLASS_NAME} does not subclass AbstractAIComponent "
                                f"(bases: {', '.join(bases) or 'none'})",
                                "from challenge_welding.ai_component_interface import "
                                f"AbstractAIComponent; class {CLASS_NAME}(AbstractAIComponent)",
                                fatal=False))
    load = methods.get("load_model")
    if load is not None:
        required = len(load.args.args) - 1 - len(load.args.defaults)
        if required > 0:
            problems.append(Problem(f"{CLASS_NAME}.load_model requires {required} argument(s); "
                                    "the evaluator calls load_model() with none",
                                    "give its parameters defaults, e.g. load_model(self, "
                                    "config_file=None), and find files through ROOT_PATH",
                                    fatal=False))
    for name in ("load_model", "predict"):
        if name not in methods:
            problems.append(Problem(f"{CLASS_NAME} has no method {name}()",
                                    f"implement {name} as in the starter kit's template",
                                    fatal=False))
    if "predict" in methods:
        args = [a.arg for a in methods["predict"].args.args]
        if len(args) < 3 and methods["predict"].args.vararg is None:
            problems.append(Problem(f"{CLASS_NAME}.predict takes {args}, expected "
                                    "(self, input_images, images_meta_informations, device='cuda')",
                                    "use the interface's signature", fatal=False))
    return problems


_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def canonical(name: str) -> str:
    """PEP 503 normalised distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def filter_requirements(text: str) -> tuple[str, str | None]:
    """Drop the starter kit's own package from a requirements file.

    Returns the filtered text and the dropped line (e.g. ``challenge-welding==1.0``)
    or None. The evaluator installs its own interface package in its place.
    """
    kept, dropped = [], None
    for line in text.splitlines():
        stripped = line.split("#", 1)[0].strip()
        match = _NAME.match(stripped) if stripped and not stripped.startswith("-") else None
        if match and canonical(match.group(1)) == INTERFACE_DIST:
            dropped = stripped
            continue
        kept.append(line)
    return "\n".join(kept) + "\n", dropped


def pinned_version(requirement: str | None) -> str | None:
    """The version of an exact pin ``name==X``, else None."""
    if not requirement:
        return None
    match = re.search(r"===?\s*([A-Za-z0-9.+!_-]+)\s*(?:;.*)?$", requirement)
    return match.group(1) if match else None
