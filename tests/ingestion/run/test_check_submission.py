"""check-submission on real submission folders: each problem comes with its fix."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from challenge_welding.commands import cli
from challenge_welding.ingestion.install import environment as envmod
from challenge_welding.ingestion.run.check import _requirement_findings, check_submission, missing_library_finding

from ingestion_helpers import GOOD, REQUIREMENTS, make_submission
from test_faults import _kill_leftovers  # the submission's processes, by cwd

NEEDS_MODEL = GOOD.replace(
    "self.loaded = True",
    "from pathlib import Path\n"
    "        self.loaded = (Path(__file__).parent / 'model.bin').read_text() == 'weights'")


def test_good_submission_passes(tmp_path, env_cache, capsys):
    sub = make_submission(tmp_path / "sub")
    status = cli.main(["check-submission", str(sub), "--env-cache", str(env_cache)])
    out = capsys.readouterr().out
    assert status == 0, out
    # a loaded machine may exceed the time budget (a warning): only that warning is allowed
    assert "0 error(s)" in out and "ready to upload" in out
    assert out.count("[warning]") == out.count("exceeds the challenge's budget")
    assert "predict() ran on 4 images; valid outputs" in out


def test_model_file_missing_from_manifest(tmp_path, env_cache):
    sub = make_submission(tmp_path / "sub", NEEDS_MODEL, extra={"challenge_solution/model.bin": "weights"})
    findings = check_submission(sub, cache_dir=env_cache, log=lambda s: None)
    # statically: data file without MANIFEST.in
    static = next(f for f in findings if "no MANIFEST.in" in f.message)
    assert static.fix.startswith("add a MANIFEST.in with a line 'include challenge_solution/model.bin'")
    # for real: load_model cannot find the file in the installed package, and why
    load = next(f for f in findings if f.level == "error" and "load_model()" in f.message)
    assert "FileNotFoundError" in load.message and "ROOT_PATH" in load.fix
    manifest = next(f for f in findings if "are not installed" in f.message)
    assert manifest.message == "1 file(s) of challenge_solution/ are not installed: " \
                               "challenge_solution/model.bin"
    assert "include challenge_solution/model.bin" in manifest.fix

    # the fix works
    (sub / "MANIFEST.in").write_text("include challenge_solution/model.bin\n")
    findings = check_submission(sub, cache_dir=env_cache, log=lambda s: None)
    # the time-budget warning depends on the machine's load, not on the submission's layout
    assert [f for f in findings if f.level != "ok" and "budget" not in f.message] == []


def test_requirement_findings(tmp_path):
    (tmp_path / "requirements.txt").write_text(
        "numpy>=1.26\nopencv-python==4.11.0.86\nchallenge-welding==1.0\ntorch\n")
    found = {f.level + ":" + f.message: f for f in _requirement_findings(tmp_path)}
    assert found["warning:requirements.txt: not pinned to an exact version: numpy>=1.26, torch"]
    assert found["warning:requirements.txt: 'opencv-python==4.11.0.86' needs libGL, often absent "
                 "on evaluation workers"].fix == "use opencv-python-headless with the same version"
    assert any(k.startswith("ok:requirements.txt: 'challenge-welding==1.0': the evaluator installs the "
                            "published package where its Python is >= 3.12, else its own interface "
                            "stand-in") for k in found)


# ----------------------------------------------------------------------------- the published package
def _python312():
    """A Python 3.12 on PATH (or pyenv's), None without one: the published package needs >= 3.12."""
    import glob
    import shutil

    # pyenv's real binary first: its shim on PATH may not run 3.12
    found = next(iter(sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python3.12")))),
                 None) or shutil.which("python3.12")
    return Path(found) if found else None


PY312 = _python312()
OLD_PATH = GOOD.replace("challenge_welding.ai_component_interface", "challenge_welding.AIComponent_interface")


def test_the_pin_on_python_below_3_12_gets_the_stand_in_and_says_so(tmp_path, env_cache):
    sub = make_submission(tmp_path / "sub", OLD_PATH, requirements=REQUIREMENTS + "challenge-welding==1.0\n")
    # this machine's own Python (a 3.12 at hand would be chosen otherwise)
    findings = check_submission(sub, cache_dir=env_cache, log=lambda s: None, python=sys.executable)
    assert [f for f in findings if f.level == "error"] == []
    major, minor = sys.version_info[:2]
    assert (major, minor) < (3, 12)  # this machine's Python; the image's 3.12 is tested below
    assert [f.message for f in findings if f.message.startswith("installed and ran on")] == [
        f"installed and ran on Python {major}.{minor} ({sys.executable}): --python, not the "
        "evaluator's 3.12, for which requirements.txt was only resolved"]
    note = next(f for f in findings if f.message.startswith("requirement 'challenge-welding==1.0'"))
    assert note.message == (
        "requirement 'challenge-welding==1.0' satisfied by the evaluator: its own challenge-welding 1.0 "
        "interface package (numpy only) is installed in its place (the published package needs "
        f"Python >= 3.12, this is {major}.{minor}; only the interface modules import)")


@pytest.mark.skipif(PY312 is None, reason="no python3.12 on PATH: install Python 3.12 (Debian/Ubuntu: "
                    "python3.12; or `uv python install 3.12`) to test the published challenge-welding==1.0 install")
def test_the_pin_on_python_3_12_installs_the_published_package(tmp_path, env_cache):
    # what user_interface and inference_tools import (dataloaders also needs torch)
    reqs = ("challenge-welding==1.0\nnumpy==2.2.6\npandas==2.2.3\npyyaml==6.0.2\nrequests==2.32.3\n"
            "pillow==11.0.0\ntqdm==4.67.0\nmatplotlib==3.10.0\n")
    sub = make_submission(tmp_path / "sub", OLD_PATH, requirements=reqs)
    work = tmp_path / "work"
    work.mkdir()
    env = envmod.prepare_environment(sub, work, cache_dir=env_cache, python=str(PY312), log=lambda s: None)
    assert env.interface == "published"
    assert env.notes[0] == ("requirement 'challenge-welding==1.0': the published package is installed "
                            "from the package index (Python 3.12 >= 3.12), with its user_interface, "
                            "inference_tools and dataloaders")
    assert env.notes[1].startswith("environment: ") and len(env.notes) == 2  # its size and time
    probe = ("import importlib.metadata as m, importlib.util as u, sys\n"
             "import challenge_welding.user_interface, challenge_welding.inference_tools\n"
             "from challenge_welding.AIComponent_interface import AbstractAIComponent as A\n"
             "from challenge_welding.ai_component_interface import AbstractAIComponent as B\n"
             "assert A is B\n"
             "print(sys.version_info[:2], m.version('challenge-welding'), "
             "u.find_spec('challenge_welding.dataloaders') is not None)\n")
    res = subprocess.run([env.python, "-c", probe], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(env.pythonpath)})
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "(3, 12) 1.0 True"
    # and the submission imports through the older path, from the published package
    res = subprocess.run([env.python, "-c", "from challenge_solution.AIComponent import MyAIComponent; "
                          "import challenge_welding; print(challenge_welding.__file__)"],
                         capture_output=True, text=True, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(env.pythonpath)})
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().startswith(env.path)


def test_a_missing_system_library_names_this_machine_and_what_to_install(tmp_path, env_cache):
    # a real loader failure, as opencv-python gives without libGL.so.1; check-submission runs on the
    # user's own machine, so the line says what to install there
    component = "import ctypes\nctypes.CDLL('libXcw-missing.so.1')\n" + GOOD
    sub = make_submission(tmp_path / "sub", component)
    findings = check_submission(sub, cache_dir=env_cache, log=lambda s: None)
    errors = [f for f in findings if f.level == "error"]
    assert len(errors) == 1
    assert errors[0].message.startswith("this machine lacks the system library libXcw-missing.so.1 that "
                                        "the submission loads")
    assert errors[0].fix == ("on this machine install the system package that provides it; or depend "
                             "on opencv-python-headless, which needs neither")


def test_a_missing_libgl_names_both_debian_packages():
    finding = missing_library_finding("libGL.so.1", "ImportError: libGL.so.1: cannot open shared object file")
    assert str(finding).splitlines()[0].startswith("[error] this machine lacks the system library libGL.so.1")
    assert finding.fix == ("on this machine install libgl1 libglib2.0-0 (Debian/Ubuntu: apt-get install libgl1 "
                           "libglib2.0-0); or depend on opencv-python-headless, which needs neither")


# ----------------------------------------------------------------------------- wheelhouse
def _install(tmp_path, name="sub"):
    sub = make_submission(tmp_path / name)
    work = tmp_path / f"work-{name}"
    work.mkdir()
    env = envmod.prepare_environment(sub, work, cache_dir=tmp_path / "envs", log=lambda s: None)
    return env, (work / "install.log").read_text()


def test_the_wheelhouse_variable_makes_installs_offline(tmp_path, monkeypatch):
    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir()
    monkeypatch.setenv(envmod.WHEELHOUSE_ENV, str(wheelhouse))
    # empty: nothing can be installed, since the index is never asked
    with pytest.raises(envmod.InstallError) as info:
        _install(tmp_path, "empty")
    assert str(info.value).startswith("installing requirements.txt: numpy was not found in the "
                                      "provided package locations (the offline wheelhouse) -> fix: add")
    log = next((tmp_path).glob("work-empty/install.log")).read_text()
    assert f"--find-links {wheelhouse.resolve()} --no-index" in log
    # filled with what the submission needs (numpy 2.2.6, and setuptools/wheel to build it)
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:", "-d",
                    str(wheelhouse), "numpy==2.2.6", "setuptools", "wheel"], check=True)
    env, log = _install(tmp_path, "filled")
    assert f"--find-links {wheelhouse.resolve()} --no-index" in log
    res = subprocess.run([env.python, "-c", "import numpy; print(numpy.__version__)"],
                         capture_output=True, text=True, check=True)
    assert res.stdout.strip() == "2.2.6"


def test_a_wheelhouse_variable_naming_no_folder_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv(envmod.WHEELHOUSE_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(envmod.InstallError, match=f"CHALLENGE_WELDING_WHEELHOUSE={tmp_path / 'nowhere'}: "
                                                  "no such folder"):
        _install(tmp_path)


# ----------------------------------------------------------------------- a killed check's folders
# predict() sleeps: the check is mid-run, its child inside a call, when it is killed
ASLEEP = GOOD.replace("        assert self.loaded\n",
                      "        assert self.loaded\n        import time\n        time.sleep(120)\n")


def _check_cli(sub, tmp: Path, env_cache) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "challenge_welding", "check-submission",
                             str(sub), "--env-cache", str(env_cache)],
                            env={**os.environ, "TMPDIR": str(tmp)}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _mid_run(tmp: Path, proc: subprocess.Popen, other: Path | None = None) -> Path:
    """The check's own folder (not ``other``) once its submission is inside predict() (its
    scratch made, then two seconds for the call to start)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < 300:
        made = [p for p in tmp.glob("cw-check-*/cw-ingest-*/scratch") if p.parent.parent != other]
        if made:
            time.sleep(2)
            return made[0].parent.parent
        assert proc.poll() is None, proc.stdout.read()
        time.sleep(0.2)
    raise AssertionError("the check never reached predict()")


def test_a_killed_checks_folders_go_at_the_next_check_a_live_checks_stay(tmp_path, env_cache):
    """Before: check-submission's cw-check-* folder (with the ingestion's work folder, the
    submission's copy and its scratch) was a plain mkdtemp: a SIGKILLed check left it for good."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    asleep = make_submission(tmp_path / "asleep", ASLEEP)
    killed = _check_cli(asleep, tmp, env_cache)
    left = _mid_run(tmp, killed)
    killed.kill()
    killed.wait()
    _kill_leftovers(tmp)
    assert (left / ".cw-owner").is_file() and list(left.glob("cw-ingest-*/submission"))
    # the next check removes it (and says so) ...
    alive = _check_cli(asleep, tmp, env_cache)
    try:
        mine = _mid_run(tmp, alive, other=left)
        assert not left.exists() and mine != left
        # ... and a check beside a live one leaves the live one's folder alone
        done = subprocess.run([sys.executable, "-m", "challenge_welding", "check-submission",
                               str(make_submission(tmp_path / "good")), "--env-cache",
                               str(env_cache)], env={**os.environ, "TMPDIR": str(tmp)},
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "temporary folder(s)" not in done.stdout
        assert mine.is_dir() and sorted(p.name for p in tmp.glob("cw-check-*")) == [mine.name]
    finally:
        alive.kill()
        said = alive.communicate()[0]
        _kill_leftovers(tmp)
    assert f"note: removed 1 temporary folder(s) that killed checks left: {left}" in said, said
