"""Where the submission runs: an isolated virtual environment, and the device.

One environment per distinct set of dependencies, cached: the key hashes the
Python interpreter, the (filtered) requirements.txt, setup.py / pyproject.toml /
setup.cfg, the interface shim and the index options. The environment holds the
requirements, the interface shim and the submission's dependencies; the
submission's own code is then installed (``pip install --no-deps --target``)
into a per-run folder that the child puts first on its path, so two
submissions with identical requirements share one environment safely.

uv is used when available (``uv venv`` + ``uv pip install``), else the standard
``venv`` + pip.

The starter kit's package: a submission written for the real challenge pins the
published ``challenge-welding==1.0`` (Python >= 3.12). Where the environment's Python
is >= 3.12, that published package is installed as pinned (so its user_interface,
inference_tools and dataloaders import), plus the older ``AIComponent_interface``
import path when it lacks it. Where it cannot install (an older Python, or the
install fails), the evaluator drops that line and installs its own tiny
``challenge-welding`` package (the two interface modules, numpy only) in its place:
with uv through an ``--override`` pointing at that wheel (which also beats a pin in
setup.py's install_requires), with pip by giving the wheel the pinned version.
``Environment.interface`` says which ("published" or "stand-in").

Offline workers: when the environment variable CHALLENGE_WELDING_WHEELHOUSE names a
folder, every install is made from it alone (``--no-index --find-links DIR``).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import challenge_welding
from challenge_welding.contract.errors import ChallengeError
from challenge_welding.ingestion import reaper
from challenge_welding.ingestion import submission as sub
from challenge_welding.ingestion.sandbox import Sandbox

ENV_FORMAT = "2"  # bump to invalidate every cached environment
_INTERFACE_FILES = ("ai_component_interface.py", "AIComponent_interface.py")
WHEELHOUSE_ENV = "CHALLENGE_WELDING_WHEELHOUSE"
PUBLISHED_MIN_PYTHON = (3, 12)  # requires-python of the published challenge-welding


class InstallError(ChallengeError):
    """The submission's environment could not be built."""


@dataclass
class Environment:
    python: str
    pythonpath: list[str]
    kind: str  # "uv", "pip" or "none" (no isolation)
    key: str = ""
    path: str = ""
    cached: bool = False
    install_s: float = 0.0
    notes: list[str] = field(default_factory=list)
    installer: str = ""  # e.g. "uv 0.13.9" or "pip 24.0"
    interface: str = ""  # "published" (the pinned challenge-welding), "stand-in" (ours), "" (not pinned)


def default_cache_dir() -> Path:
    """~/.cache/challenge-welding/envs, or under the temp folder when HOME is not writable."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    path = base / "challenge-welding" / "envs"
    try:
        path.mkdir(parents=True, exist_ok=True)
        return path
    except OSError:
        import tempfile

        return Path(tempfile.gettempdir()) / "challenge-welding-envs"


def find_uv() -> str | None:
    """The uv executable: on PATH, beside this interpreter, or from the ``uv`` Python package."""
    found = shutil.which("uv") or shutil.which("uv", path=str(Path(sys.executable).parent))
    if found:
        return found
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except Exception:  # noqa: BLE001 - no uv package: pip fallback
        return None


def interface_wheel(out_dir: Path, version: str) -> Path:
    """Write the interface shim as a wheel ``challenge_welding-<version>-py3-none-any.whl``.

    A wheel is a zip with a dist-info folder (PEP 427); writing it directly
    needs no build backend, so it also works with ``--no-index`` and no setuptools.
    """
    src = Path(challenge_welding.__file__).parent
    files = {f"challenge_welding/{name}": (src / name).read_bytes() for name in _INTERFACE_FILES}
    files["challenge_welding/__init__.py"] = (
        f'"""Interface shim installed by the challenge evaluator (numpy only)."""\n\n'
        f'__version__ = "{version}"\n').encode()
    digest = hashlib.sha256(b"".join(files.values())).hexdigest()[:12]
    out = out_dir / digest / f"challenge_welding-{version}-py3-none-any.whl"
    if out.is_file():
        return out
    info = f"challenge_welding-{version}.dist-info"
    files[f"{info}/METADATA"] = (f"Metadata-Version: 2.1\nName: challenge-welding\nVersion: {version}\n"
                                 "Summary: participant interface (provided by the evaluator)\n"
                                 "Requires-Dist: numpy\n").encode()
    files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: challenge-welding\n" \
                             b"Root-Is-Purelib: true\nTag: py3-none-any\n"
    record = []
    for name, data in files.items():
        h = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={h},{len(data)}")
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    os.replace(tmp, out)
    return out


def detect_device() -> tuple[str, str]:
    """("cuda", why) when a GPU is visible, else ("cpu", why).

    Heuristic, no CUDA library needed: CUDA_VISIBLE_DEVICES set to "" or -1
    hides every GPU; otherwise ``nvidia-smi -L`` listing a GPU, or a
    /dev/nvidia0 device node, means one is visible.
    """
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return "cpu", f"CUDA_VISIBLE_DEVICES={visible!r}"
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=10).stdout
            if "GPU" in out:
                return "cuda", out.strip().splitlines()[0]
        except (OSError, subprocess.SubprocessError):
            pass
    if Path("/dev/nvidia0").exists():
        return "cuda", "/dev/nvidia0 present"
    return "cpu", "no GPU visible (no nvidia-smi GPU, no /dev/nvidia0)"


@contextlib.contextmanager
def _locked(path: Path):
    """An exclusive file lock (POSIX); without fcntl (Windows) no lock: one run at a time."""
    with open(path, "w") as fh:
        try:
            import fcntl
        except ImportError:
            yield
            return
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _run(cmd: list[str], log: Path, timeout: float, what: str, jail=None) -> None:
    """Run one install step; inside ``jail`` (a sandbox.Confinement) when given: its own
    process group, confined, capped by the fork watchdog, and the whole group killed when
    the step ends (a daemon forked by setup.py does not outlive it)."""
    with open(log, "ab") as fh:
        fh.write(("$ " + " ".join(map(str, cmd)) + "\n").encode())
        fh.flush()
        env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", **(jail.env if jail else {})}
        if jail is None:
            try:
                code = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout,
                                      env=env).returncode
            except subprocess.TimeoutExpired:
                code = None
        else:
            code = _run_jailed(cmd, fh, env, timeout, what, jail)
    if code is None:
        raise InstallError(f"{what}: still running after {timeout:.0f} s, stopped (see {log})")
    if code != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-12:]
        raise InstallError(f"{what} failed (exit status {code}); installer said:\n  "
                           + "\n  ".join(tail))


def _run_jailed(cmd, fh, env, timeout, what, jail) -> int | None:
    """The exit status (None: timed out); InstallError when a process survived or stormed."""
    proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env=env, preexec_fn=jail)
    dog = reaper.Watchdog(proc.pid, jail.max_processes) if jail.max_processes else None
    try:
        code = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        code = None
    finally:  # the whole group, every time: what setup.py left running must not outlive it
        survivors = reaper.end_group(proc.pid, jail.kill_timeout, skip=proc.pid)
        proc.kill()
        proc.wait()
        if dog is not None:
            dog.stop()
    if dog is not None and dog.line:
        raise InstallError(f"{what}: {dog.line}")
    if survivors:
        raise InstallError(f"{what}: {survivors} process(es) of the install survived the kill "
                           f"of its process group: the install is not trusted")
    return code


def _index_args(wheelhouse: str | None, no_index: bool) -> list[str]:
    args = []
    if wheelhouse:
        args += ["--find-links", str(Path(wheelhouse).resolve())]
    if no_index:
        args.append("--no-index")
    return args


def wheelhouse_options(wheelhouse: str | None, no_index: bool) -> tuple[str | None, bool]:
    """(wheelhouse, no_index): CHALLENGE_WELDING_WHEELHOUSE, when set, makes every install
    offline from that folder; explicit options are kept otherwise."""
    env = os.environ.get(WHEELHOUSE_ENV, "").strip()
    if not env:
        return wheelhouse, no_index
    if not Path(env).is_dir():
        raise InstallError(f"{WHEELHOUSE_ENV}={env}: no such folder (the offline wheelhouse)")
    return env, True


def python_version(python: str) -> tuple[int, int]:
    """(major, minor) of an interpreter."""
    if os.path.realpath(python) == os.path.realpath(sys.executable):
        return sys.version_info[:2]
    try:
        out = subprocess.run([python, "-c", "import sys; print(*sys.version_info[:2])"],
                             capture_output=True, text=True, timeout=60).stdout.split()
        return int(out[0]), int(out[1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        raise InstallError(f"the submission's Python {python} does not run") from None


def _add_old_import_path(py: Path, log_path: Path, jail=None) -> None:
    """The published package lacks ``AIComponent_interface``: add it as an alias module."""
    code = ("import importlib.util, pathlib, challenge_welding as p\n"
            "d = pathlib.Path(p.__file__).parent\n"
            "f = d / 'AIComponent_interface.py'\n"
            "if not f.exists():\n"
            "    f.write_text('# older import path, added by the evaluator\\n'\n"
            "                 'from challenge_welding.ai_component_interface import *  # noqa\\n'\n"
            "                 'from challenge_welding.ai_component_interface import AbstractAIComponent  # noqa\\n')\n")
    _run([str(py), "-c", code], log_path, 120, "adding challenge_welding.AIComponent_interface",
         jail)


def prepare_environment(root: Path, workdir: Path, *, isolation: bool = True,
                        cache_dir: str | Path | None = None, installer: str = "auto",
                        wheelhouse: str | None = None, no_index: bool = False,
                        timeout: float = 1800.0, log=print, python: str | None = None,
                        sandbox=None) -> Environment:
    """Build (or reuse) the submission's environment and install its code for this run.

    ``python``: the interpreter of the environment (default: the evaluator's own).
    ``sandbox``: a sandbox.Sandbox confining every install step (default: one that only
    keeps the evaluator's own files out of reach).
    """
    if not isolation:
        return Environment(python=sys.executable, pythonpath=[str(root)], kind="none",
                           notes=["--no-isolation: the submission runs from its folder in the "
                                  "evaluator's own environment"])
    t0 = time.perf_counter()
    # the base interpreter itself: the installer never needs our own virtual environment
    python = os.path.realpath(python or sys.executable)
    sandbox = sandbox or Sandbox.default()
    wheelhouse, no_index = wheelhouse_options(wheelhouse, no_index)
    uv = find_uv() if installer in ("auto", "uv") else None
    if installer == "uv" and uv is None:
        raise InstallError("--installer uv: uv not found (pip install uv)")
    kind = "uv" if uv else "pip"
    req_path = root / "requirements.txt"
    req_text = req_path.read_text(errors="replace") if req_path.is_file() else ""
    _, dropped = sub.filter_requirements(req_text)
    pyver = python_version(python)
    cache = Path(cache_dir) if cache_dir else default_cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    modes = ["stand-in"] if dropped else [""]
    if dropped and pyver >= PUBLISHED_MIN_PYTHON:
        modes.insert(0, "published")
    notes: list[str] = []
    for mode in modes:
        try:
            env = _build(root, workdir, cache, mode, dropped, req_text, python, pyver, uv, kind,
                         wheelhouse, no_index, timeout, log, sandbox)
        except InstallError as exc:
            if mode != "published":
                raise
            last = str(exc).strip().splitlines()[-1].strip()
            notes.append(f"requirement {dropped!r}: the published package could not be installed "
                         f"({last}); the evaluator's interface stand-in was tried in its place")
            log(notes[-1])
            continue
        env.notes = notes + env.notes
        env.install_s = time.perf_counter() - t0
        return env
    raise AssertionError("unreachable")


# over 60 lines: one install attempt, step by step under one sandbox, reaper and log
def _build(root, workdir, cache, mode, dropped, req_text, python, pyver, uv, kind, wheelhouse,
           no_index, timeout, log, sandbox) -> Environment:
    """One attempt: ``mode`` "published" keeps the pin, "stand-in" puts our shim in its place."""
    index = _index_args(wheelhouse, no_index)
    where = "the wheelhouse" if no_index else "the package index"
    version = sub.pinned_version(dropped) or challenge_welding.__version__
    notes = []
    shim = None
    if mode == "published":
        requirements = req_text
        notes.append(f"requirement {dropped!r}: the published package is installed from {where} "
                     f"(Python {pyver[0]}.{pyver[1]} >= 3.12), with its user_interface, "
                     "inference_tools and dataloaders")
    else:
        requirements, _ = sub.filter_requirements(req_text)
        shim = interface_wheel(cache / "interface", version)
        if dropped:
            why = (f"the published package needs Python >= 3.12, this is {pyver[0]}.{pyver[1]}"
                   if pyver < PUBLISHED_MIN_PYTHON else "the published package did not install")
            notes.append(f"requirement {dropped!r} satisfied by the evaluator: its own "
                         f"challenge-welding {version} interface package (numpy only) is installed "
                         f"in its place ({why}; only the interface modules import)")
    h = hashlib.sha256()
    for part in (ENV_FORMAT, f"{pyver}", os.path.realpath(python), kind, mode, requirements,
                 shim.read_bytes().hex() if shim else "-", repr(index)):
        h.update(part.encode() + b"\0")
    for name in ("setup.py", "pyproject.toml", "setup.cfg"):
        h.update((root / name).read_bytes() if (root / name).is_file() else b"-")
    key = h.hexdigest()[:20]
    env_dir = cache / key
    py = env_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    install_log = workdir / "install.log"
    req_file = root / ".evaluator-requirements.txt"  # beside the original: relative -r lines work
    req_file.write_text(requirements)
    shim_args = [str(shim)] if shim else []
    with _locked(cache / f"{key}.lock"):  # one builder per key; others wait, then reuse it
        cached = (env_dir / ".complete").is_file()
        if not cached:
            log(f"creating the submission's environment ({kind}) in {env_dir}")
            shutil.rmtree(env_dir, ignore_errors=True)
            env_dir.mkdir(parents=True)  # exists before the jail names it writable
            override = []
            if uv and shim:
                (workdir / "overrides.txt").write_text(f"challenge-welding @ {shim.resolve().as_uri()}\n")
                override = ["--override", str(workdir / "overrides.txt")]
            # the build backend writes in the submission's folder (egg-info): our copy of it
            jail = _install_jail(sandbox, workdir, [env_dir, root], [shim and shim.parent, wheelhouse,
                                                                     uv, override and override[1]],
                                 python)
            if uv:
                _run([uv, "venv", "--quiet", "--allow-existing", "--python", python, str(env_dir)],
                     install_log, timeout, "creating the virtual environment", jail)
                _run([uv, "pip", "install", "--python", str(py), *override,
                      *index, "-r", str(req_file), *shim_args, str(root)],
                     install_log, timeout, "installing requirements.txt and the submission", jail)
            else:
                _run([python, "-m", "venv", str(env_dir)], install_log, timeout,
                     "creating the virtual environment", jail)
                links = ["--find-links", str(shim.parent)] if shim else []
                _run([str(py), "-m", "pip", "install", "--quiet", *links, *index,
                      "-r", str(req_file), *shim_args, str(root)],
                     install_log, timeout, "installing requirements.txt and the submission", jail)
            if mode == "published":
                _add_old_import_path(py, install_log, jail)
            (env_dir / ".complete").write_text(key)
        else:
            log(f"reusing the cached environment {env_dir}")
        # The submission's own code, for this run only (the cached env may hold another copy).
        site = workdir / "site"
        shutil.rmtree(site, ignore_errors=True)
        site.mkdir()
        jail = _install_jail(sandbox, workdir, [site, root], [env_dir, wheelhouse, uv], python)
        if uv:
            _run([uv, "pip", "install", "--python", str(py), "--no-deps", *index, "--target",
                  str(site), str(root)], install_log, timeout, "installing the submission package",
                 jail)
        else:
            _run([str(py), "-m", "pip", "install", "--quiet", "--no-deps", *index, "--target",
                  str(site), str(root)], install_log, timeout, "installing the submission package",
                 jail)
    return Environment(python=str(py), pythonpath=[str(site)], kind=kind, key=key,
                       path=str(env_dir), cached=cached, notes=notes, interface=mode,
                       installer=_installer_version(uv or [str(py), "-m", "pip"]))


def _install_jail(sandbox, workdir: Path, write, read, python: str):
    """The install's confinement: write ``write``, the installers' caches and a temp folder of
    its own; read ``read`` (None entries skipped), the system, local package mirrors (/opt,
    find-links) and the installers' configuration."""
    tmp = workdir / "install-tmp"
    tmp.mkdir(exist_ok=True)
    home = Path.home()
    xdg_cache = Path(os.environ.get("XDG_CACHE_HOME") or home / ".cache")
    xdg_config = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    caches = [Path(os.environ.get("UV_CACHE_DIR") or xdg_cache / "uv"),
              Path(os.environ.get("PIP_CACHE_DIR") or xdg_cache / "pip")]
    for cache in caches:
        cache.mkdir(parents=True, exist_ok=True)
    links = os.environ.get("PIP_FIND_LINKS", "").split()
    reads = [str(p) for p in read if p] + ["/opt", str(xdg_config / "pip"), str(xdg_config / "uv"),
                                           *[p for p in links if os.path.isabs(p)]]
    # the base interpreter's own prefix (pyenv, conda: outside /usr)
    reads.append(str(Path(os.path.realpath(python)).parent.parent))
    jail = sandbox.install(write=[*map(str, write), *map(str, caches), str(tmp)], read=reads)
    jail.env = {"TMPDIR": str(tmp), "TEMP": str(tmp), "TMP": str(tmp)}
    return jail


def _installer_version(cmd) -> str:
    cmd = [cmd] if isinstance(cmd, str) else list(cmd)
    try:
        out = subprocess.run(cmd + ["--version"], capture_output=True, text=True, timeout=30)
        return " ".join(out.stdout.split()[:2])
    except (OSError, subprocess.SubprocessError):
        return ""
