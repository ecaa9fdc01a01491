"""Where the submission runs: an isolated virtual environment, and the device.

One environment per distinct set of dependencies, cached: the key hashes the
Python interpreter, the (filtered) requirements.txt, setup.py / pyproject.toml /
setup.cfg, the interface shim and the index options. The environment holds the
requirements, the interface shim and the submission's dependencies; the
submission's own code is then installed (``pip install --no-deps --target``)
into a per-run folder that the child puts first on its path, so two
submissions with identical requirements share one environment safely.

No participant code runs with the network, nor with the caller's variables:

1. the evaluator's uv (it runs no participant code: wheels only, ``--only-binary :all:``,
   and it installs with ``--prefix`` through the base interpreter, so that no ``.pth`` file
   of the environment runs) resolves, fetches and installs requirements.txt and the build
   backend (pyproject's ``[build-system] requires``, else setuptools), with the
   proxy/CA settings of :data:`confine.variables.INSTALLER_ENV_PASS`;
2. the submission's own package (setup.py / its build backend) is built and installed inside
   the sandbox, offline (``--offline --no-index --no-build-isolation --no-cache``, no network
   in its confinement), with :func:`participant_env` as its whole environment;
3. the evaluator's uv installs what the built package declares (Requires-Dist), wheels only.

A dependency without a usable wheel is one :class:`InstallError` line naming it. uv is used
when available, else the standard ``venv`` + pip (the same steps).

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
import re
import threading
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import challenge_welding
from challenge_welding.contract.errors import ChallengeError
from challenge_welding.ingestion.confine import reaper
from challenge_welding.ingestion.confine.variables import installer_env, participant_env
from challenge_welding.ingestion.install import submission as sub
from challenge_welding.ingestion.install.disk import DiskWatch
from challenge_welding.ingestion.confine.sandbox import Sandbox

ENV_FORMAT = "3"  # bump to invalidate every cached environment
_INTERFACE_FILES = ("ai_component_interface.py", "AIComponent_interface.py")
WHEELHOUSE_ENV = "CHALLENGE_WELDING_WHEELHOUSE"
PUBLISHED_MIN_PYTHON = (3, 12)  # requires-python of the published challenge-welding


class InstallError(ChallengeError):
    """The submission's environment could not be built (the submission's fault, or ours when
    ``ours``: no route to the index, an untrusted certificate, a full disk)."""

    def __init__(self, message: str, ours: bool = False, no_wheel: tuple | None = None):
        super().__init__(message)
        self.ours = ours
        self.no_wheel = no_wheel  # (name, version) of a pin without a usable wheel


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
    except Exception:  # no uv package: pip fallback
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
    # a name of this process's own: two runs at once may both write it (the same content),
    # and the last os.replace wins; a shared ".tmp" made the other's rename fail
    tmp = out.with_name(f"{out.name}.{os.getpid()}-{threading.get_ident()}.tmp")
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


def _run(cmd: list[str], log: Path, timeout: float, what: str, jail=None, say=None,
         python: str = "") -> None:
    """Run one install step. Without ``jail``: the evaluator's own uv/pip (no participant code),
    with :func:`installer_env`, its progress lines passed to ``say``. Inside ``jail`` (a
    sandbox.Confinement, participant code): its own process group, confined, with
    :func:`participant_env` alone, capped by the fork watchdog, and the whole group killed
    when the step ends (a daemon forked by setup.py does not outlive it)."""
    with open(log, "ab") as fh:
        fh.write(("$ " + " ".join(map(str, cmd)) + "\n").encode())
        fh.flush()
        start = fh.tell()
        if jail is None:
            tmp = log.parent / "install-tmp"
            tmp.mkdir(exist_ok=True)
            code = _run_streamed(cmd, fh, installer_env(tmp), timeout, say)
        else:
            code = _run_jailed(cmd, fh, jail.env, timeout, what, jail)
    if code is None:
        raise InstallError(f"{what}: still running after {timeout:.0f} s, stopped (see {log})")
    if code != 0:
        with open(log, "rb") as fh:
            fh.seek(start)
            raise install_failure(fh.read().decode(errors="replace"), what, code, python)


# What the installers print while they work, worth a line on the console.
_PROGRESS = re.compile(r"^\s*(Downloading|Downloaded|Resolved|Prepared|Installed|Built|Building|"
                       r"Collecting|Successfully installed)\b")


def _run_streamed(cmd, fh, env, timeout, say) -> int | None:
    """Run the evaluator's own installer, its output copied to ``fh`` line by line and its
    progress lines (what is downloaded, how much) to ``say``; None: timed out."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, env=env)
    fired = threading.Event()

    def stop():
        fired.set()
        proc.kill()

    timer = threading.Timer(timeout, stop)
    timer.start()
    try:
        for raw in proc.stdout:
            fh.write(raw)
            line = raw.decode(errors="replace").rstrip()
            if say and _PROGRESS.match(line):
                say("  " + line.strip())
        code = proc.wait()
    finally:
        timer.cancel()
    return None if fired.is_set() else code


# Faults on our side, told by the installer's own words: (pattern, what it means, the fix).
DISK_FIX = "free space under the environment cache (challenge-welding cache prune)"
_OUR_FAULTS = (
    (re.compile(r"No space left on device|os error 28|Errno 28", re.I), "the disk is full",
     DISK_FIX),
    (re.compile(r"certificate|UnknownIssuer|CERTIFICATE_VERIFY_FAILED|invalid peer", re.I),
     "the package index's TLS certificate is not trusted here",
     "give the evaluator the proxy's CA (SSL_CERT_FILE) or use a wheelhouse "
     "(CHALLENGE_WELDING_WHEELHOUSE)"),
    (re.compile(r"dns error|failed to lookup address|Name or service not known|Network is "
                r"unreachable|Connection refused|client error \(Connect\)|Failed to establish|"
                r"Temporary failure in name resolution|timed out", re.I),
     "the package index cannot be reached from this machine",
     "check the network or the proxy (HTTPS_PROXY), or use a wheelhouse "
     "(CHALLENGE_WELDING_WHEELHOUSE)"),
)
_NO_WHEEL = re.compile(r"Because ([A-Za-z0-9._-]+)(==|===)([^\s]+) has no usable wheels")
_NO_WHEEL_PIP = re.compile(r"Could not find a version that satisfies the requirement "
                           r"([A-Za-z0-9._-]+)==([^\s)]+)")


def ours_error(line: str, fix: str) -> InstallError:
    """An install failure on our side: it says so, with the fix, and blames no submission."""
    return InstallError(f"{line} (the evaluator's fault, not the submission's) -> fix: {fix}",
                        ours=True)


def install_failure(text: str, what: str, code: int, python: str = "") -> InstallError:
    """One line for a failed install step, cause first, from the installer's output ``text``:
    a fault of ours (disk, certificate, no route) says so and does not blame the submission;
    a dependency without a wheel is named with the fix; else the installer's own error."""
    for pattern, cause, fix in _OUR_FAULTS:
        if pattern.search(text):
            return ours_error(f"{what}: {cause}", fix)
    found = _NO_WHEEL.search(text) or _NO_WHEEL_PIP.search(text)
    if found:
        name, version = found.group(1), found.group(found.lastindex)
        return InstallError(
            f"{name}=={version} has no wheel for this Python and platform, and the evaluator "
            f"builds no dependency from source -> fix: pin a version of {name} with a wheel for "
            f"Python {python or '.'.join(map(str, sys.version_info[:2]))} (challenge-welding "
            "check-submission names one), or ask the organisers for --allow-source-builds",
            no_wheel=(name, version))
    because = re.search(r"Because (.+?)(?:,? and you require|, we can conclude|\n|$)", text)
    if because:  # uv's resolver: the first clause is the cause
        cause = because.group(1).strip()
        if "provided package locations" in cause:  # --no-index: the wheelhouse lacks it
            return InstallError(f"{what}: {cause} (the offline wheelhouse) -> fix: add its wheel "
                                f"to the wheelhouse ({WHEELHOUSE_ENV})", ours=True)
        return InstallError(f"{what}: {cause} -> fix: change requirements.txt so that it "
                            "resolves (uv pip compile requirements.txt shows why)")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    said = [ln for ln in lines if ln.startswith(("error:", "ERROR:", "Because", "hint:"))
            or ln.startswith("cause:")]
    cause = " ".join(dict.fromkeys(said or lines[-3:]))  # each line once (no header twice)
    return InstallError(f"{what} failed (exit status {code}): {cause[:600] or 'no output'}")


def _run_jailed(cmd, fh, env, timeout, what, jail) -> int | None:
    """The exit status (None: timed out); InstallError when a process survived or stormed."""
    proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env=env, preexec_fn=jail)
    dog = reaper.Watchdog(proc.pid, jail.max_processes) if jail.max_processes else None
    disk = DiskWatch(proc.pid, jail.policy.write)
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
        disk.stop()
        if not survivors:  # what the sandbox's user wrote is ours again (sandbox.Confinement)
            jail.reclaim()
    if dog is not None and dog.line:
        raise InstallError(f"{what}: {dog.line}")
    if disk.line:
        raise ours_error(f"{what}: {disk.line}", DISK_FIX) if disk.ours \
            else InstallError(f"{what}: {disk.line}")
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


def _add_old_import_path(env_dir: Path, log_path: Path) -> None:
    """The published package lacks ``AIComponent_interface``: add it as an alias module.
    Written by us into the environment's ``challenge_welding`` folder (installed by our uv a
    step before; no participant code has run in it since): before, the environment's own
    python wrote it, in the sandbox, where a ``.pth`` of a dependency would have run too."""
    pkg = _site_packages(env_dir) / "challenge_welding"
    alias = pkg / "AIComponent_interface.py"
    if pkg.is_dir() and not pkg.is_symlink() and not os.path.lexists(alias):
        alias.write_text("# older import path, added by the evaluator\n"
                         "from challenge_welding.ai_component_interface import *  # noqa\n"
                         "from challenge_welding.ai_component_interface import "
                         "AbstractAIComponent  # noqa\n")
        with open(log_path, "a") as fh:
            fh.write(f"added {alias} (the older import path)\n")


def prepare_environment(root: Path, workdir: Path, *, isolation: bool = True,
                        cache_dir: str | Path | None = None, installer: str = "auto",
                        wheelhouse: str | None = None, no_index: bool = False,
                        timeout: float = 1800.0, log=print, python: str | None = None,
                        sandbox=None, allow_source_builds: bool = False) -> Environment:
    """Build (or reuse) the submission's environment and install its code for this run.

    ``python``: the interpreter of the environment (default: the evaluator's own).
    ``sandbox``: a sandbox.Sandbox confining every install step (default: one that only
    keeps the evaluator's own files out of reach). ``timeout``: the install phase's budget,
    also what its time is weighed against. ``allow_source_builds``: see :func:`_fetch_cmd`.
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
    plan = InstallPlan(root, workdir, cache, dropped, req_text, python, pyver, uv, kind, wheelhouse,
                       no_index, timeout, log, sandbox, allow_source_builds)
    notes: list[str] = []
    for mode in modes:
        try:
            env = _build(plan, mode)
        except InstallError as exc:
            if mode != "published":
                raise
            last = str(exc).strip().splitlines()[-1].strip()
            notes.append(f"requirement {dropped!r}: the published package could not be installed "
                         f"({last}); the evaluator's interface stand-in was tried in its place")
            log(notes[-1])
            continue
        env.install_s = time.perf_counter() - t0
        env.notes = notes + env.notes + install_summary(Path(env.path), env.install_s, timeout,
                                                         env.cached, detect_device()[0])
        return env
    raise AssertionError("unreachable")


# GPU-only distributions: CUDA libraries (what tensorflow[and-cuda] and torch's CUDA builds pull)
_GPU_ONLY = re.compile(r"^(nvidia-|cupy-cuda|jax-cuda|jaxlib-cuda|tensorrt)")
# an install taking more than this share of its phase's budget gets a warning
SLOW_INSTALL_SHARE = 0.25


def _dist_name(dist_info: Path) -> str:
    """The canonical distribution name of a ``<name>-<version>.dist-info`` folder."""
    return sub.canonical(dist_info.name.removesuffix(".dist-info").rsplit("-", 1)[0])


def _dist_sizes(env_dir: Path) -> dict[str, int]:
    """{distribution: bytes} of the environment's packages, from their RECORD files."""
    out = {}
    for record in env_dir.glob("lib*/python*/site-packages/*.dist-info/RECORD"):
        name = _dist_name(record.parent)
        total = 0
        for line in record.read_text(errors="replace").splitlines():
            size = line.rsplit(",", 1)[-1]
            total += int(size) if size.isdigit() else 0
        out[name] = total
    return out


def _tree_bytes(path: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, f)).st_size
    return total


def install_summary(env_dir: Path, seconds: float, budget: float, cached: bool,
                    device: str) -> list[str]:
    """The environment's size and install time against the phase's budget; a warning
    ("warning: ...") for GPU-only packages on a worker without GPU, and for an install that
    alone takes more than SLOW_INSTALL_SHARE of the budget."""
    size = _tree_bytes(env_dir)
    share = seconds / budget if budget else 0.0
    lines = [f"environment: {size / 1e6:,.0f} MB, "
             + ("reused from the cache" if cached else "made")
             + f" in {seconds:.1f} s ({100 * share:.1f} % of the install's {budget:.0f} s budget)"]
    gpu = {n: b for n, b in _dist_sizes(env_dir).items() if _GPU_ONLY.match(n)}
    if gpu and device != "cuda":
        lines.append(f"warning: {len(gpu)} GPU-only package(s) ({', '.join(sorted(gpu)[:4])}"
                     f"{', ...' if len(gpu) > 4 else ''}; {sum(gpu.values()) / 1e9:.1f} GB) and "
                     "this worker has no GPU -> fix: depend on the CPU build (e.g. tensorflow "
                     "without [and-cuda], tensorflow-cpu, torch from the CPU index)")
    if not cached and share > SLOW_INSTALL_SHARE:
        lines.append(f"warning: the install alone took {100 * share:.0f} % of the install "
                     f"phase's budget ({seconds:.0f} of {budget:.0f} s) -> fix: depend on fewer "
                     "or smaller packages")
    return lines


@dataclass(frozen=True)
class InstallPlan:
    """What every install attempt of one run shares (prepare_environment tries the published
    package, then the evaluator's stand-in): the submission, the folders, the interpreter, the
    installer and the options, settled once."""

    root: Path              # the submission's folder
    workdir: Path           # this run's work folder (install.log, the build's copies)
    cache: Path             # the environments' cache
    dropped: str | None     # the challenge-welding requirement filtered out of requirements.txt
    req_text: str           # requirements.txt as written
    python: str             # the environment's base interpreter (real path)
    pyver: tuple            # its (major, minor)
    uv: str | None          # uv's path; None: pip
    kind: str               # "uv" or "pip"
    wheelhouse: str | None
    no_index: bool
    timeout: float          # seconds per install step
    log: Callable
    sandbox: object         # sandbox.Sandbox confining every step
    allow_source_builds: bool = False


# over 60 lines: one install attempt, step by step under one sandbox, reaper and log
def _build(plan: InstallPlan, mode: str) -> Environment:
    """One attempt: ``mode`` "published" keeps the pin, "stand-in" puts our shim in its place."""
    root, workdir, cache, dropped, req_text, python, pyver, uv, kind = (
        plan.root, plan.workdir, plan.cache, plan.dropped, plan.req_text, plan.python, plan.pyver,
        plan.uv, plan.kind)
    wheelhouse, no_index, timeout, log, sandbox, allow_source_builds = (
        plan.wheelhouse, plan.no_index, plan.timeout, plan.log, plan.sandbox, plan.allow_source_builds)
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
                 shim.read_bytes().hex() if shim else "-", repr(index),
                 "sdists" if allow_source_builds else "wheels"):
        h.update(part.encode() + b"\0")
    for name in ("setup.py", "pyproject.toml", "setup.cfg"):
        h.update((root / name).read_bytes() if (root / name).is_file() else b"-")
    key = h.hexdigest()[:20]
    env_dir = cache / key
    py = env_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    install_log = workdir / "install.log"
    req_file = workdir / "evaluator-requirements.txt"
    req_file.write_text(safe_requirements(requirements, root))
    shim_args = [str(shim)] if shim else []
    pyname = f"{pyver[0]}.{pyver[1]}"
    offline = [] if getattr(sandbox, "install_network", True) else ["--offline"]
    with _locked(cache / f"{key}.lock"):  # one builder per key; others wait, then reuse it
        cached = (env_dir / ".complete").is_file()
        override = []
        if uv and shim:
            (workdir / "overrides.txt").write_text(f"challenge-welding @ {shim.resolve().as_uri()}\n")
            override = ["--override", str(workdir / "overrides.txt")]
        sdists: list[Path] = []
        if not cached:
            log(f"creating the submission's environment ({kind}, Python {pyname}) in {env_dir}")
            shutil.rmtree(env_dir, ignore_errors=True)
            # 1. the evaluator's installer, no participant code: the requirements and the
            # build backend, wheels only
            if uv:
                _run([uv, "venv", "--quiet", "--allow-existing", "--python", python, str(env_dir)],
                     install_log, timeout, "creating the virtual environment")
            else:
                # pip comes with the wheels below, into this environment alone (--prefix)
                _run([python, "-m", "venv", "--without-pip", str(env_dir)], install_log, timeout,
                     "creating the virtual environment")
            # --allow-source-builds: participant code then writes into this environment, so
            # its files are copies, not hard links of uv's cache (which every run trusts):
            # where the user cannot change (uid 0, a Codabench worker) they are its to write
            link = ["--link-mode", "copy"] if uv and allow_source_builds else []
            sdists = _fetch_requirements(
                lambda extra: _run(_fetch_cmd(uv, python, env_dir, shim) + link
                                   + [*override, *index, *offline, "-r", str(req_file),
                                      *build_requirements(root), *extra, *shim_args],
                                   install_log, timeout, "installing requirements.txt", say=log,
                                   python=pyname),
                req_file, workdir / "sdists", allow_source_builds, wheelhouse, no_index, log)
            if sdists:  # --allow-source-builds: built offline in the sandbox, into the env
                jail = _install_jail(sandbox, workdir, [env_dir], [workdir / "sdists", uv], python)
                _run([uv, "pip", "install", "--python", str(py), "--offline", "--no-index",
                      "--no-cache", "--no-build-isolation", "--no-deps", *map(str, sdists)]
                     if uv else [str(py), "-m", "pip", "install", "--no-index", "--no-cache-dir",
                                 "--no-build-isolation", "--no-deps", *map(str, sdists)],
                     install_log, timeout, "building dependencies from source (offline, "
                                           "--allow-source-builds)", jail)
            if mode == "published":
                _add_old_import_path(env_dir, install_log)
        else:
            log(f"reusing the cached environment {env_dir}")
        # 2. the submission's own code, for this run only (the cached env may hold another
        # copy): built offline in the sandbox with the environment's build backend
        site = workdir / "site"
        shutil.rmtree(site, ignore_errors=True)
        site.mkdir()
        src = workdir / "build-src"  # the build backend writes (egg-info, build/) in a copy
        shutil.rmtree(src, ignore_errors=True)
        shutil.copytree(root, src, symlinks=True)
        jail = _install_jail(sandbox, workdir, [site, src], [env_dir, uv], python)
        # Landlock ABI 1: uv moves the built wheel between folders of its own (EXDEV there, in
        # Rust: EXDEV_SHIM cannot help it), so pip builds, patched by the shim
        abi1 = 0 < getattr(sandbox, "abi", 0) < 2
        if uv and abi1 and not (_site_packages(env_dir) / "pip").is_dir():
            _run([uv, "pip", "install", "--quiet", "--python", str(py), *index, *offline, "pip"],
                 install_log, timeout, "installing pip (Landlock ABI 1: uv cannot build there)")
        if uv and not abi1:
            build = [uv, "pip", "install", "--python", str(py), "--no-deps", "--no-build-isolation",
                     "--offline", "--no-index", "--no-cache", "--target", str(site), str(src)]
        else:
            build = [str(py), "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                     "--no-index", "--no-cache-dir", "--target", str(site), str(src)]
        _run(build, install_log, timeout, "building the submission's package (offline)", jail)
        if not cached:
            # 3. what the package itself declares (install_requires), wheels only
            declared = requires_dist(site) + [
                r for d in sdists for r in requires_dist(_site_packages(env_dir), d)]
            if declared:  # written by setup.py: held to the same rules
                (workdir / "declared.txt").write_text(safe_requirements(
                    "\n".join(declared), root, "the package's Requires-Dist (setup.py)"))
                _run(_fetch_cmd(uv, python, env_dir, shim) + link + [*override, *index, *offline, "-r",
                                                              str(workdir / "declared.txt")],
                     install_log, timeout, "installing the dependencies setup.py declares",
                     say=log, python=pyname)
            (env_dir / ".complete").write_text(key)
    return Environment(python=str(py), pythonpath=[str(site)], kind=kind, key=key,
                       path=str(env_dir), cached=cached, notes=notes, interface=mode,
                       # the base interpreter's pip: the environment's python runs only confined
                       installer=_installer_version(uv or [python, "-m", "pip"]))


def _site_packages(env_dir: Path) -> Path:
    found = sorted(env_dir.glob("lib*/python*/site-packages"))
    return found[0] if found else env_dir / "Lib" / "site-packages"


def _fetch_requirements(install, req_file: Path, sdist_dir: Path, allow: bool, wheelhouse,
                        no_index: bool, log) -> list[Path]:
    """Step 1, ``install(extra_requirements)``; with ``allow`` (--allow-source-builds), each
    pin of requirements.txt without a wheel is taken out of the wheel install, its source
    fetched by the evaluator and its build backend added: the sdists to build offline."""
    sdists: list[Path] = []
    extra: list[str] = []
    while True:
        try:
            install(extra)
            return sdists
        except InstallError as exc:
            if not allow or exc.no_wheel is None or len(sdists) >= 20:
                raise
            name, version = exc.no_wheel
            lines = req_file.read_text().splitlines()
            kept = [ln for ln in lines if not (sub._NAME.match(ln.split("#", 1)[0].strip())
                    and sub.canonical(sub._NAME.match(ln.split("#", 1)[0].strip()).group(1))
                    == sub.canonical(name))]
            if len(kept) == len(lines):
                raise InstallError(f"{name}=={version} has no wheel for this Python and it is "
                                   "not a line of requirements.txt -> fix: pin it there "
                                   f"({name}=={version}) so that its source is built "
                                   "(--allow-source-builds)", no_wheel=exc.no_wheel) from None
            req_file.write_text("\n".join(kept) + "\n")
            sdist = fetch_sdist(name, version, sdist_dir, wheelhouse, no_index)
            sdists.append(sdist)
            extra += sdist_build_requirements(sdist)
            log(f"{name}=={version}: no wheel; its source {sdist.name} is built offline in "
                "the sandbox (--allow-source-builds)")


def _fetch_cmd(uv, python, env_dir: Path, shim) -> list[str]:
    """The evaluator's install into ``env_dir``, wheels only. Through the base interpreter
    with ``--prefix``: the environment's own python never runs here, so a ``.pth`` file that
    a wheel put in it cannot run outside the sandbox (uv queries the interpreter it installs
    for)."""
    if uv:
        return [uv, "pip", "install", "--python", python, "--prefix", str(env_dir),
                "--only-binary", ":all:", "--no-python-downloads"]
    links = ["--find-links", str(shim.parent)] if shim else []
    # --ignore-installed: with --prefix, pip counts what the base interpreter has as installed;
    # pip and wheel: the offline build runs the environment's pip, setuptools < 70.1 needs wheel
    return [python, "-m", "pip", "install", "--prefix", str(env_dir), "--only-binary", ":all:",
            "--ignore-installed", "--no-warn-script-location", *links, "pip", "wheel"]


def build_requirements(root: Path) -> list[str]:
    """The build backend the submission's package needs: pyproject.toml's
    ``[build-system] requires``, else setuptools (what pip assumes for a bare setup.py)."""
    path = root / "pyproject.toml"
    return _build_requires_of(path.read_text(errors="replace") if path.is_file() else "")


def _build_requires_of(pyproject: str) -> list[str]:
    """``[build-system] requires`` of a pyproject.toml's text; setuptools without one."""
    try:
        import tomllib
    except ImportError:  # Python 3.10: setuptools, as for a bare setup.py
        return ["setuptools>=40.8.0"]
    try:
        requires = tomllib.loads(pyproject)["build-system"]["requires"]
        if isinstance(requires, list) and all(isinstance(r, str) for r in requires):
            return requires or ["setuptools>=40.8.0"]
    except (KeyError, TypeError, tomllib.TOMLDecodeError):
        pass
    return ["setuptools>=40.8.0"]


def requires_dist(site: Path, sdist: Path | None = None) -> list[str]:
    """The Requires-Dist lines of the packages installed in ``site`` (their METADATA); only
    the package built from ``sdist`` when given."""
    out = []
    metas = sorted(site.glob("*.dist-info/METADATA"))
    if sdist is not None:
        m = _SDIST.match(sdist.name)
        metas = [p for p in metas if m and _dist_name(p.parent) == sub.canonical(m["name"])]
    for meta in metas:
        for line in meta.read_text(errors="replace").splitlines():
            if line.startswith("Requires-Dist:"):
                out.append(line.split(":", 1)[1].strip())
            elif not line.strip():
                break  # the headers end at the first blank line; the description follows
    return out


_INCLUDE = re.compile(r"^(-r|-c|--requirement|--constraint)\s*=?\s*(\S+)$")
_INDEX = re.compile(r"^(-i|--index-url|--extra-index-url|-f|--find-links)\s*=?\s*(\S+)$")
_DIRECT = re.compile(r"@\s*(\S+)")


def safe_requirements(text: str, root: Path, where: str = "requirements.txt",
                      depth: int = 0) -> str:
    """The submission's requirements as the evaluator's uv may read them, ``-r``/``-c``
    includes inlined. The evaluator's uv runs outside the sandbox and echoes what it cannot
    parse into install.log, which the participant sees: it is handed no path outside the
    submission (``-r /root/.ssh/id_rsa``), no local file or folder (``-f /etc``, ``x @
    file:///...``), no option but an http(s) index; else one InstallError line names it."""
    out = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if not line:
            continue
        bad = None
        include, index, direct = _INCLUDE.match(line), _INDEX.match(line), _DIRECT.search(line)
        if include:
            path = Path(os.path.realpath(root / include.group(2)))
            if depth > 5 or not path.is_file() or not path.is_relative_to(os.path.realpath(root)):
                bad = f"{include.group(1)} {include.group(2)} is not a file of the submission"
            elif include.group(1) in ("-r", "--requirement"):
                out.append(safe_requirements(path.read_text(errors="replace"), root,
                                             path.name, depth + 1))
                continue
            else:  # constraints: the evaluator's uv gets them by name, inlined as requirements
                bad = f"{include.group(1)} (constraints files) is not supported"
        elif index:
            if not index.group(2).startswith(("https://", "http://")):
                bad = f"{index.group(1)} {index.group(2)}: only an http(s) index is accepted"
        elif line.startswith("-"):
            bad = f"the option {line.split()[0]} is not accepted by the evaluator"
        elif direct and not direct.group(1).startswith(("https://", "http://")):
            bad = f"{line}: only an http(s) URL is accepted after @"
        if bad:
            raise InstallError(f"{where} line {n}: {bad} -> fix: remove or change this line")
        out.append(line)
    return "\n".join(out) + "\n"


def _install_jail(sandbox, workdir: Path, write, read, python: str):
    """The confinement of participant code at install (the build backend, setup.py): write
    ``write`` and a temp folder of its own; read ``read`` (None entries skipped), the system
    and the base interpreter's prefix; no network; :func:`participant_env` alone."""
    # its own, new for each step (the evaluator's uv has install-tmp): nothing a step of
    # participant code leaves there is used by us or by the next step (removed with workdir)
    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix="sandbox-tmp-", dir=workdir))
    reads = [str(p) for p in read if p]
    # the base interpreter's own prefix (pyenv, conda: outside /usr)
    reads.append(str(Path(os.path.realpath(python)).parent.parent))
    shim = None
    if 0 < getattr(sandbox, "abi", 0) < 2:  # Landlock ABI 1: no file moves to another folder
        shim = workdir / "exdev-shim"
        shim.mkdir(exist_ok=True)
        (shim / "sitecustomize.py").write_text(EXDEV_SHIM)
        reads.append(str(shim))
    jail = sandbox.install(write=[*map(str, write), str(tmp)], read=reads, network=False)
    jail.env = participant_env(tmp, tmp)
    if shim is not None:
        jail.env["PYTHONPATH"] = str(shim)
    return jail


# Under Landlock ABI 1 (kernels 5.13-5.18: a Codabench worker on 5.15) a ruleset denies every
# rename or link into another folder with EXDEV (LANDLOCK_ACCESS_FS_REFER, which allows it,
# came with ABI 2), and build backends do it: setuptools' build_meta renames the wheel out of
# its temp folder, so every setup.py failed to build ("Invalid cross-device link"). The
# install step's Python gets this sitecustomize: os.rename/os.replace fall back to copy and
# delete on EXDEV, as mv(1) does across file systems. Install steps only (not the run).
EXDEV_SHIM = '''"""challenge-welding: os.rename/os.replace copy on EXDEV (Landlock ABI 1)."""
import errno
import os
import shutil


def _moving(orig):
    def move(src, dst, *, src_dir_fd=None, dst_dir_fd=None):
        try:
            return orig(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)
        except OSError as exc:
            if exc.errno != errno.EXDEV or src_dir_fd is not None or dst_dir_fd is not None:
                raise
        if os.path.isdir(src) and not os.path.islink(src):
            shutil.copytree(src, dst, symlinks=True, dirs_exist_ok=True)
            shutil.rmtree(src)
        else:
            shutil.copy2(src, dst, follow_symlinks=False)
            os.unlink(src)
    return move


os.rename, os.replace = _moving(os.rename), _moving(os.replace)
'''


def _installer_version(cmd) -> str:
    cmd = [cmd] if isinstance(cmd, str) else list(cmd)
    try:
        out = subprocess.run(cmd + ["--version"], capture_output=True, text=True, timeout=30)
        return " ".join(out.stdout.split()[:2])
    except (OSError, subprocess.SubprocessError):
        return ""


# -- the evaluator's target, before any install (check-submission) ------------------------------
@dataclass
class Unresolvable:
    """A requirement that cannot be installed on the target: ``cause`` first, ``fix`` after."""

    requirement: str
    cause: str
    fix: str
    ours: bool = False  # the index could not be asked (network, certificate): not the submission

    def __str__(self) -> str:
        return f"{self.cause} -> fix: {self.fix}"


def _compile(uv: str, lines: list[str], pyver: str, platform: str, index: list[str],
             tmp: Path, lowest: bool = False) -> tuple[int, str]:
    """``uv pip compile`` of ``lines`` for the target, wheels only: (exit status, output)."""
    req = tmp / f"req-{hashlib.sha256(chr(0).join(lines).encode()).hexdigest()[:12]}.txt"
    req.write_text("\n".join(lines) + "\n")
    # --python: this interpreter (no source build runs); without it uv looks for one of the
    # target's version first, seconds where a pyenv shim answers
    cmd = [uv, "pip", "compile", "--python", os.path.realpath(sys.executable), "--quiet",
           "--no-header", "--no-annotate", "--no-python-downloads",
           "--python-version", pyver, "--python-platform", platform, "--only-binary", ":all:",
           *(["--resolution", "lowest"] if lowest else []), *index, str(req)]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                             env=installer_env(tmp), stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return 1, "error: timed out (the package index did not answer in 300 s)"
    return res.returncode, res.stdout + res.stderr


def _version_of(name: str, output: str) -> str | None:
    for line in output.splitlines():
        m = re.match(r"^([A-Za-z0-9._-]+)==(\S+)", line.strip())
        if m and sub.canonical(m.group(1)) == sub.canonical(name):
            return m.group(2)
    return None


def resolve_for_target(requirements: str, pyver: str, platform: str, *, uv: str | None = None,
                       index: list[str] | None = None, workdir: Path | None = None
                       ) -> list[Unresolvable]:
    """Each requirement of ``requirements`` (requirements.txt's text, the kit's own line
    dropped) that cannot be installed on the target (Python ``pyver`` on ``platform``, wheels
    only, as the evaluator installs), with the value that would work. [] when all resolve.

    One ``uv pip compile`` of the whole file (seconds, no install); on failure, each line alone
    names the guilty ones, and for a pin without a wheel the index is asked for the first
    release after it (else the last before it) that has one.
    """
    import tempfile

    uv = uv or find_uv()
    if uv is None:
        return [Unresolvable("", "uv is not installed: the requirements were not resolved for "
                                 "the target", "pip install uv", ours=True)]
    index = index or []
    text, _dropped = sub.filter_requirements(requirements)
    lines = [ln.split("#", 1)[0].strip() for ln in text.splitlines()]
    options = [ln for ln in lines if ln.startswith("-")]  # --index-url, -f ...: kept for each
    reqs = [ln for ln in lines if ln and not ln.startswith("-")]
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        tmp = Path(tmp)
        code, out = _compile(uv, options + reqs, pyver, platform, index, tmp)
        if code == 0:
            return []
        ours = _ours(out)
        if ours:
            return [ours]
        whole = out

        def alone(req):
            code, out = (1, whole) if len(reqs) == 1 else \
                _compile(uv, options + [req], pyver, platform, index, tmp)
            return None if code == 0 else _explain(uv, req, out, pyver, platform, options,
                                                   index, tmp)

        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(4) as pool:  # each line alone: seconds for a long file
            found = [u for u in pool.map(alone, reqs) if u is not None]
        if not found:  # each alone resolves: they conflict together
            found.append(Unresolvable("", _because(whole) or "the requirements conflict",
                                      "change requirements.txt so that the lines agree "
                                      f"(uv pip compile --python-version {pyver} "
                                      "requirements.txt shows why)"))
        return found


def _ours(output: str) -> Unresolvable | None:
    for pattern, cause, fix in _OUR_FAULTS:
        if pattern.search(output):
            return Unresolvable("", f"{cause}: the requirements were not resolved for the "
                                    "target (not the submission's fault)", fix, ours=True)
    return None


def _because(output: str) -> str:
    m = re.search(r"Because (.+?)(?:,? and you require|, we can conclude|\n|$)", output)
    return m.group(1).strip() if m else ""


def _explain(uv, req, out, pyver, platform, options, index, tmp) -> Unresolvable:
    """Why ``req`` alone does not resolve on the target, and what would."""
    where = f"Python {pyver} on Linux x86_64"
    pin = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*===?\s*([^\s;]+)", req)
    if pin and "no usable wheels" in out:
        name, version = pin.groups()
        code, later = _compile(uv, options + [f"{name}>{version}"], pyver, platform, index, tmp,
                               lowest=True)
        good = _version_of(name, later) if code == 0 else None
        if good:
            return Unresolvable(req, f"{name}=={version} has no wheel for {where}; the first "
                                     f"release with one is {good}",
                                f"write {name}=={good} in requirements.txt (and test with it)")
        code, earlier = _compile(uv, options + [f"{name}<{version}"], pyver, platform, index, tmp)
        good = _version_of(name, earlier) if code == 0 else None
        return Unresolvable(req, f"{name}=={version} has no wheel for {where}"
                                 + (f"; the last release before it with one is {good}" if good
                                    else "; no release of it has one"),
                            f"write {name}=={good} in requirements.txt" if good else
                            f"replace {name} by a package with wheels for {where}")
    cause = _because(out) or next((ln.strip() for ln in out.splitlines()
                                   if ln.strip().startswith("error:")), out.strip()[:300])
    return Unresolvable(req, f"{req}: {cause} (for {where})",
                        "change this line of requirements.txt so that it resolves")


def find_target_python(pyver: str, uv: str | None = None) -> str | None:
    """An interpreter of the target's version at hand: uv's (managed or found), pyenv's, or
    ``python3.X`` on the PATH; None without one. Each is run once to confirm its version."""
    import glob

    want = tuple(int(x) for x in pyver.split("."))
    candidates = []
    uv = uv or find_uv()
    if uv:
        try:
            res = subprocess.run([uv, "python", "find", "--no-python-downloads", pyver],
                                 capture_output=True, text=True, timeout=30, env=installer_env(
                                     Path(os.environ.get("TMPDIR", "/tmp"))))
            candidates += res.stdout.split()[:1] if res.returncode == 0 else []
        except (OSError, subprocess.SubprocessError):
            pass
    pyenv = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    candidates += sorted(glob.glob(os.path.join(pyenv, "versions", f"{pyver}*", "bin",
                                                f"python{pyver}")), reverse=True)
    candidates += [p for p in (shutil.which(f"python{pyver}"),) if p]
    for cand in candidates:
        try:
            if python_version(cand) == want:
                return cand
        except InstallError:
            continue
    return None


# -- the cache: list and prune (challenge-welding cache) ----------------------------------------
def cached_environments(cache_dir=None) -> list[dict]:
    """One dict per environment of the cache: key, path, size (bytes), python, complete,
    age_days (since it was last used: the newest of its marker and lock files)."""
    cache = Path(cache_dir) if cache_dir else default_cache_dir()
    out = []
    if not cache.is_dir():
        return out
    now = time.time()
    for env_dir in sorted(p for p in cache.iterdir() if p.is_dir() and (p / "pyvenv.cfg").is_file()):
        stamps = [f.stat().st_mtime for f in (env_dir / ".complete", cache / f"{env_dir.name}.lock",
                                              env_dir / "pyvenv.cfg") if f.exists()]
        cfg = (env_dir / "pyvenv.cfg").read_text(errors="replace")
        ver = re.search(r"^version(?:_info)?\s*=\s*(\d+\.\d+)", cfg, re.M)
        out.append({"key": env_dir.name, "path": str(env_dir), "cache": str(cache),
                    "size": _tree_bytes(env_dir), "python": ver.group(1) if ver else "?",
                    "complete": (env_dir / ".complete").is_file(),
                    "age_days": (now - max(stamps)) / 86400})
    return out


def prune_environments(cache_dir=None, older_than_days: float | None = None) -> tuple[int, int]:
    """Remove the cache's environments (those unused for ``older_than_days`` when given), each
    under its lock so that none is removed while a run builds or reuses it: (count, bytes)."""
    removed = freed = 0
    for env in cached_environments(cache_dir):
        if older_than_days is not None and env["age_days"] <= older_than_days:
            continue
        with _locked(Path(env["cache"]) / f"{env['key']}.lock"):
            shutil.rmtree(env["path"], ignore_errors=True)
        removed, freed = removed + 1, freed + env["size"]
    return removed, freed


# -- --allow-source-builds: the source fetched by the evaluator, built offline in the sandbox ---
_SDIST = re.compile(r"^(?P<name>.+)-(?P<version>[^-]+)\.(tar\.gz|zip)$")


def fetch_sdist(name: str, version: str, dest: Path, wheelhouse: str | None = None,
                no_index: bool = False) -> Path:
    """The source distribution of ``name==version``: from the wheelhouse, else from the index
    (its PEP 691 JSON page, the file's sha256 checked). Plain HTTP(S), no code of the package
    runs. Hand-written because uv has no ``download`` and ``pip download`` builds the
    metadata (runs setup.py) even with ``--no-deps``."""
    import json
    import urllib.parse
    import urllib.request

    def matches(filename: str) -> bool:
        m = _SDIST.match(filename)
        return bool(m) and sub.canonical(m["name"]) == sub.canonical(name) and m["version"] == version

    dest.mkdir(parents=True, exist_ok=True)
    if wheelhouse:
        for f in Path(wheelhouse).iterdir():
            if matches(f.name):
                shutil.copy(f, dest / f.name)
                return dest / f.name
    if no_index:
        raise InstallError(f"{name}=={version}: no source distribution in the wheelhouse "
                           f"{wheelhouse} -> fix: add {name}-{version}.tar.gz to it", ours=True)
    index = (os.environ.get("UV_INDEX_URL") or os.environ.get("UV_DEFAULT_INDEX")
             or os.environ.get("PIP_INDEX_URL") or "https://pypi.org/simple").rstrip("/")
    url = f"{index}/{sub.canonical(name)}/"
    req = urllib.request.Request(url, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            files = json.load(resp).get("files", [])
        entry = next((f for f in files if matches(f.get("filename", ""))), None)
        if entry is None:
            raise InstallError(f"{name}=={version} has neither a wheel for this Python nor a "
                               f"source distribution on {index} -> fix: pin another version")
        target = dest / entry["filename"]
        with urllib.request.urlopen(urllib.parse.urljoin(url, entry["url"]), timeout=600) as resp:
            target.write_bytes(resp.read())
    except InstallError:
        raise
    except (OSError, ValueError) as exc:
        raise install_failure(str(exc), f"fetching the source of {name}=={version}", 1) from None
    want = (entry.get("hashes") or {}).get("sha256")
    if want and hashlib.sha256(target.read_bytes()).hexdigest() != want:
        raise InstallError(f"{target.name}: its sha256 is not the index's", ours=True)
    return target


def sdist_build_requirements(sdist: Path) -> list[str]:
    """The build backend an sdist needs, read from its pyproject.toml (no code runs)."""
    import tarfile

    text = ""
    try:
        if sdist.name.endswith(".zip"):
            with zipfile.ZipFile(sdist) as zf:
                names = [n for n in zf.namelist() if n.count("/") == 1 and n.endswith("/pyproject.toml")]
                text = zf.read(names[0]).decode(errors="replace") if names else ""
        else:
            with tarfile.open(sdist) as tf:
                member = next((m for m in tf.getmembers() if m.name.count("/") == 1
                               and m.name.endswith("/pyproject.toml")), None)
                text = tf.extractfile(member).read().decode(errors="replace") if member else ""
    except (OSError, tarfile.TarError, zipfile.BadZipFile):
        text = ""
    return _build_requires_of(text)
