"""``check-submission``: what a participant runs before uploading.

Static checks (layout, setup.py, requirements.txt, MANIFEST.in, the class and
its methods), then the real thing on a few synthetic full-size images: the
same ``ingest`` as the evaluator (isolated install, child process, output
validation), and a comparison of the installed package with the source folder
(files missing from MANIFEST.in). Every problem comes with the fix to make.
"""

from __future__ import annotations

import re
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import pandas as pd

from challenge_welding.contract.files import OwnedFolder, remove_stale
from challenge_welding.data.parquet_io import write_parquet
from challenge_welding.ingestion.install import submission as sub

# The check's work folder: locked while the check lives (contract/files.py), so the next check
# removes what a killed one left, never a live one's. The ingestion's work folder is made in it.
CHECK_PREFIX = "cw-check-"
# The challenge's compute budget: 1/12 s per image on CPU at 1920x1080.
TIME_BUDGET_S = 1 / 12
# Packages whose GUI builds need system libraries (libGL) missing from slim worker images.
_HEADLESS = {"opencv-python": "opencv-python-headless",
             "opencv-contrib-python": "opencv-contrib-python-headless"}


# A shared library the loader could not find (ImportError or OSError from dlopen).
_MISSING_LIB = re.compile(r"(lib[\w.+-]*?\.so(?:\.[\d.]+)?): cannot open shared object file")
# Debian packages of the usual culprits (opencv-python's GUI build).
_LIB_PACKAGES = {"libGL.so.1": "libgl1", "libgthread-2.0.so.0": "libglib2.0-0",
                 "libglib-2.0.so.0": "libglib2.0-0", "libSM.so.6": "libsm6", "libXext.so.6": "libxext6",
                 "libXrender.so.1": "libxrender1"}


def missing_system_library(text: str) -> str | None:
    """The shared library named by a loader error in ``text`` (e.g. libGL.so.1), else None."""
    match = _MISSING_LIB.search(text or "")
    return match.group(1) if match else None


@dataclass
class Finding:
    level: str  # "ok", "warning", "error"
    message: str
    fix: str = ""

    def __str__(self) -> str:
        text = f"[{self.level}] {self.message}"
        return text + (f"\n          fix: {self.fix}" if self.fix else "")


def missing_library_finding(lib: str, err: str) -> "Finding":
    """check-submission runs on the user's own machine: say what to install there.

    The evaluator image has libGL and glib (Dockerfile), so the submission itself is not at fault.
    """
    # opencv-python needs glib as soon as libGL is found: name both at once, not one per run
    wanted = [_LIB_PACKAGES.get(lib, ""), "libglib2.0-0" if lib == "libGL.so.1" else ""]
    packages = " ".join(p for p in dict.fromkeys(wanted) if p)
    install = (f"install {packages} (Debian/Ubuntu: apt-get install {packages})" if packages
               else "install the system package that provides it")
    return Finding("error", f"this machine lacks the system library {lib} that the submission loads "
                            f"(the evaluator image has libGL and glib for opencv-python) ({err})",
                   f"on this machine {install}; or depend on opencv-python-headless, which needs neither")


def synthetic_input(root: Path, n: int = 4, seed: int = 0) -> Path:
    """A ``performance`` set of ``n`` synthetic weld-like JPEGs at the real resolutions."""
    rng = np.random.default_rng(seed)
    folder = root / "performance"
    (folder / "images").mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(n):
        w, h = (1920, 1080) if i % 2 == 0 else (960, 540)
        plate = rng.normal(110, 12, size=(h // 8, w // 8)).clip(0, 255).astype(np.uint8)
        img = cv2.resize(plate, (w, h), interpolation=cv2.INTER_LINEAR)
        y = h // 2 + int(rng.integers(-h // 8, h // 8))
        cv2.line(img, (0, y), (w, y), 200, thickness=max(4, h // 20))  # the bead
        img = cv2.cvtColor(cv2.GaussianBlur(img, (5, 5), 0), cv2.COLOR_GRAY2BGR)
        rel = f"images/check{i:02d}.jpeg"
        cv2.imwrite(str(folder / rel), img, [cv2.IMWRITE_JPEG_QUALITY, 90])
        rows.append({"sample_id": f"check{i:02d}", "path": rel,
                     "welding-seams": ("c102", "c20", "c33")[i % 3], "resolution": [w, h]})
    write_parquet(pd.DataFrame(rows), folder / "metadata.parquet")
    return root


def _requirement_findings(root: Path) -> list[Finding]:
    path = root / "requirements.txt"
    if not path.is_file():
        return []
    out = []
    loose = []
    for line in path.read_text(errors="replace").splitlines():
        req = line.split("#", 1)[0].strip()
        if not req or req.startswith("-"):
            continue
        name = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", req)
        canon = sub.canonical(name.group(0)) if name else req
        if canon == sub.INTERFACE_DIST:
            out.append(Finding("ok", f"requirements.txt: {req!r}: the evaluator installs the published "
                                     "package where its Python is >= 3.12, else its own interface "
                                     "stand-in (the install below says which)"))
            continue
        if "==" not in req and "@" not in req:
            loose.append(req)
        if canon in _HEADLESS:
            out.append(Finding("warning", f"requirements.txt: {req!r} needs libGL, often absent "
                                          "on evaluation workers",
                               f"use {_HEADLESS[canon]} with the same version"))
    if loose:
        out.append(Finding("warning", f"requirements.txt: not pinned to an exact version: "
                                      f"{', '.join(loose)}",
                           "pin each line as name==version (pip freeze shows yours) so that the "
                           "evaluation installs what you tested"))
    return out


def _manifest_findings(root: Path, site: Path) -> list[Finding]:
    src, installed = root / sub.PACKAGE, site / sub.PACKAGE
    if not installed.is_dir():
        return [Finding("error", f"the installed package has no {sub.PACKAGE}/ folder",
                        f"let setup.py package it: packages=setuptools.find_packages() and "
                        f"{sub.PACKAGE}/__init__.py")]
    missing = sorted(p.relative_to(root).as_posix() for p in src.rglob("*")
                     if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
                     and not (installed / p.relative_to(src)).exists())
    if missing:
        return [Finding("error", f"{len(missing)} file(s) of {sub.PACKAGE}/ are not installed: "
                                 f"{', '.join(missing[:5])}",
                        "list them in MANIFEST.in (" + "; ".join(f"include {m}" for m in missing[:3])
                        + ") and keep include_package_data=True in setup.py")]
    return [Finding("ok", f"every file of {sub.PACKAGE}/ is installed (MANIFEST.in)")]


# over 60 lines: the checks in the order a participant reads their findings
def target_findings(root: Path, python: str | None, log=print) -> tuple[list[Finding], str | None]:
    """The requirements resolved for the evaluator's target (contract/target.py), before any
    install; and the interpreter to run on: ``python``, else one of the target's version at
    hand, else None (this one runs, and a warning says what was only resolved)."""
    from challenge_welding.contract import target
    from challenge_welding.ingestion.install import environment as envmod

    out = []
    req = root / "requirements.txt"
    text = req.read_text(errors="replace") if req.is_file() else ""
    try:  # what the evaluator refuses to hand its installer
        envmod.safe_requirements(text, root)
    except envmod.InstallError as exc:
        cause, _, fix = str(exc).partition(" -> fix: ")
        return [Finding("error", cause, fix)], python
    t0 = time.perf_counter()
    wheelhouse, no_index = envmod.wheelhouse_options(None, False)
    problems = envmod.resolve_for_target(text, target.python_version(), target.PLATFORM,
                                         index=envmod._index_args(wheelhouse, no_index))
    for p in problems:
        out.append(Finding("warning" if p.ours else "error", p.cause, p.fix))
    if not problems:
        out.append(Finding("ok", f"requirements.txt resolves for the evaluator's target, "
                                 f"{target.describe()}, wheels only "
                                 f"({time.perf_counter() - t0:.1f} s)"))
    if python is None:
        python = envmod.find_target_python(target.python_version())
    return out, python


# over 60 lines: the checks in the order a participant reads their findings
def check_submission(path, *, cache_dir=None, isolation: bool = True, n_images: int = 4,
                     batch_size: int = 2, log=print, python: str | None = None,
                     allow_source_builds: bool = False) -> list[Finding]:
    """Check a submission folder or zip; return the findings (also printed through ``log``).

    ``python``: the interpreter to install and run on (default: one of the evaluator's target
    version when at hand, else this one, and a warning says so)."""
    from challenge_welding.contract import target
    from challenge_welding.ingestion.install import environment as envmod
    from challenge_welding.ingestion.run.ingest import ingest, listed

    findings: list[Finding] = []

    def add(f: Finding) -> None:
        findings.append(f)
        log(str(f))

    swept = remove_stale(CHECK_PREFIX)
    if swept:
        log(f"note: removed {len(swept)} temporary folder(s) that killed checks left: "
            + listed(swept, 3))
    owned = OwnedFolder(CHECK_PREFIX)
    work = owned.path
    try:
        root = sub.unpack(path, work)
        problems = sub.layout_problems(root)
        for p in problems:
            add(Finding("error" if p.fatal else "warning", p.message, p.fix))
        if not problems:
            add(Finding("ok", "layout: setup.py, requirements.txt, challenge_solution/"
                              "AIComponent.py with MyAIComponent.load_model and predict"))
        for f in _requirement_findings(root):
            add(f)
        if any(p.fatal for p in problems):
            log("not installed nor run: fix the errors above first")  # no error of its own
            return findings
        if isolation:
            log(f"resolving requirements.txt for the evaluator's target ({target.describe()})...")
            given = python
            found, python = target_findings(root, python, log)
            if allow_source_builds:  # the organisers' evaluator builds these from source
                for f in found:
                    if f.level == "error" and "has no wheel" in f.message:
                        f.level = "warning"
                        f.message += " (built from source: --allow-source-builds)"
            for f in found:
                add(f)
            if any(f.level == "error" for f in found):
                log("not installed nor run: fix the errors above first")  # no error of its own
                return findings
            here = python or sys.executable
            ver = ".".join(map(str, envmod.python_version(here)))
            if ver != target.python_version():
                why = (f"--python, not the evaluator's {target.python_version()}, for which" if given
                       else f"no Python {target.python_version()} was found here, so for the "
                            "evaluator's Python")
                add(Finding("warning", f"installed and ran on Python {ver} ({here}): {why} "
                                       "requirements.txt was only resolved",
                            f"uv python install {target.python_version()} (or --python PATH) "
                            "to install and run it on the evaluator's Python"))
        data = synthetic_input(work / "input_data", n=n_images)
        log(f"installing and running the submission on {n_images} synthetic images "
            "(1920x1080 and 960x540) as the evaluator does...")
        report = ingest(path, data, work / "pred", cache_dir=cache_dir, isolation=isolation,
                        sets=["performance"], batch_size=batch_size, keep_workdir=True,
                        work_parent=work,
                        progress=False, verbose=False, python=python, install_progress=log,
                        allow_source_builds=allow_source_builds,
                        # synthetic inputs, no reference data, the participant's own machine:
                        # nothing of ours to protect, so a system without the Linux layers runs
                        # the check anyway (and says so below) instead of refusing it
                        unsafe_unconfined=True)
        ran = report.get("versions", {}).get("submission_python")
        if ran:
            add(Finding("ok", f"the submission ran on Python {ran}"
                              + (f" ({python})" if python else f" ({sys.executable})")))
        for line in report["environment"].get("notes", []):
            # which challenge-welding was installed, the environment's size and time, ...
            warn = line.startswith("warning: ")
            add(Finding("warning" if warn else "ok", line.removeprefix("warning: ")))
        for err in report["errors"]:
            fault = report.get("fault") or {}
            lib = missing_system_library(err + "\n" + (fault.get("traceback") or ""))
            if lib:
                add(missing_library_finding(lib, err))
                continue
            if fault.get("stage") == "install":  # one line, cause first, its own fix
                cause, _, fix = err.removeprefix("install: ").partition(" -> fix: ")
                add(Finding("error", cause, fix))
                continue
            fix = {"import": "make `from challenge_solution.AIComponent import MyAIComponent` "
                             "work after installation",
                   "init": "make MyAIComponent() work without arguments",
                   "load_model": "load files through ROOT_PATH = Path(__file__).parent.resolve() "
                                 "and list them in MANIFEST.in",
                   }.get(fault.get("stage"), "return a dict with 'predictions' (KO/OK/UNKNOWN), "
                                             "'probabilities' and 'OOD_scores', one per image")
            add(Finding("error", err, fix))
            if fault.get("traceback"):
                log("          " + "\n          ".join(fault["traceback"].rstrip().splitlines()[-15:]))
        for w in report["warnings"]:
            if w.startswith("performance: "):  # what predict() returned
                add(Finding("warning", w, "return exactly what the interface's docstring says"))
            elif w.startswith("the submission wrote"):
                add(Finding("warning", w, "print less: the evaluation keeps a capped log"))
            elif w.startswith("NO SANDBOX") and not sys.platform.startswith("linux"):
                add(Finding("warning", f"this system ({sys.platform}) has no Linux confinement: "
                                       "the submission ran unconfined here; the evaluator runs it "
                                       "confined (Landlock, seccomp, no network), where writing "
                                       "outside its temp folder, reading the evaluation data or "
                                       "opening a connection fails"))
            elif w.startswith("NO SANDBOX"):  # sandbox.py: this kernel has no Landlock
                add(Finding("warning", w, "the evaluation runs it confined (Landlock): a "
                                          "submission that writes outside its temp folder, "
                                          "reads the evaluation data or opens TCP connections "
                                          "while it runs fails there; check on Linux >= 6.7"))
            # other warnings repeat the layout findings above
        box = report.get("sandbox") or {}
        if box.get("landlock_abi"):
            add(Finding("ok", f"ran confined as on the evaluator (Landlock ABI {box['landlock_abi']}:"
                              " writes only to its temp folder, no TCP while it runs)"))
        if report["status"] == "ok":
            t = report["timings"]["sets"]["performance"]
            add(Finding("ok", f"predict() ran on {t['n']} images; valid outputs; "
                              f"{1000 * t['time_p95']:.1f} ms per image (p95)"))
            if t["time_p95"] > TIME_BUDGET_S:
                add(Finding("warning", f"{1000 * t['time_p95']:.0f} ms per image exceeds the "
                                       f"challenge's budget of {1000 * TIME_BUDGET_S:.0f} ms on CPU",
                            "the time criterion lowers the performance KPI: batch or downscale"))
        if report.get("workdir") and isolation and report["environment"]:
            for f in _manifest_findings(root, Path(report["workdir"]) / "site"):
                add(f)
        if report.get("workdir"):
            shutil.rmtree(report["workdir"], ignore_errors=True)
    finally:
        owned.remove()  # the ingestion's work folder with it
    return findings
