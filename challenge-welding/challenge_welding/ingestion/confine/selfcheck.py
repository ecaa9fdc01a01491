"""The evaluator is complete and unchanged: every module loaded before participant code runs,
and the evaluator's own files hashed at the start of a run and checked at its end.

A submission's code runs between the two (install, import, load_model, predict). Under
Landlock it cannot write these files at all (sandbox.py); the hashes are the fallback where
the kernel lacks it, and the proof where it has it. The files: every ``.py`` of our package,
and the ``.pth`` files and ``sitecustomize``/``usercustomize`` modules of our interpreter's
site-packages (a planted ``.pth`` runs in every later Python process, e.g. ``score``).
"""

from __future__ import annotations

import hashlib
import importlib
import os
import pkgutil
from pathlib import Path

import challenge_welding
from challenge_welding.ingestion.confine.sandbox import evaluator_site_dirs

# Entry points that run code when imported, and modules that need optional extras.
_SKIP = ("challenge_welding.__main__",)
_STARTUP = ("sitecustomize.py", "usercustomize.py")


# What a run imports: the ingestion, and the scorer (its config and provenance checks).
# ``evaluate`` adds the report (matplotlib: seconds to import; it scores in the same process).
RUN_PACKAGES = ("challenge_welding.ingestion", "challenge_welding.scoring")


def preload(packages=RUN_PACKAGES) -> list[str]:
    """Import every module of ``packages`` now: a module first imported after load_model()
    would be read from a file the submission may have changed. Returns the modules that
    could not be imported (optional dependencies)."""
    failed = []
    for info in pkgutil.walk_packages(challenge_welding.__path__, "challenge_welding."):
        if info.name in _SKIP or not info.name.startswith(tuple(p + "." for p in packages)
                                                          + tuple(packages)):
            continue
        try:
            importlib.import_module(info.name)
        except Exception:  # an optional dependency missing: not ours to fix
            failed.append(info.name)
    return failed


def evaluator_files() -> list[Path]:
    """Our package's .py files, and the start-up files of our interpreter's site-packages."""
    pkg = Path(challenge_welding.__file__).parent
    files = sorted(pkg.rglob("*.py"))
    for d in evaluator_site_dirs():
        try:
            names = os.listdir(d)
        except OSError:
            continue
        files += sorted(Path(d) / n for n in names if n.endswith(".pth") or n in _STARTUP)
    return files


def fingerprint() -> dict[str, str]:
    """{path: sha256 hex} of :func:`evaluator_files` (a new or removed file changes the keys)."""
    out = {}
    for path in evaluator_files():
        try:
            out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            out[str(path)] = "unreadable"
    return out


def changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Paths added, removed or changed between two fingerprints."""
    return sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))


def change_line(changed: list[str]) -> str:
    """The one line that fails the run."""
    shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
    return (f"the evaluator's own files changed during the run ({shown}): the run is not "
            "trusted; reinstall the evaluator before scoring anything")
