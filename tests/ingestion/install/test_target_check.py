"""check-submission answers for the evaluator's target (contract/target.py), not for this
machine's Python, in seconds and before any install; faults of ours are said to be ours."""

from __future__ import annotations

import re
import socket
import ssl
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from challenge_welding.commands import cli
from challenge_welding.contract import target
from challenge_welding.ingestion.install import environment as envmod

from ingestion_helpers import make_submission

ROOT = Path(__file__).resolve().parents[3]
TARGET = dict(pyver=target.python_version(), platform=target.PLATFORM)


def test_the_dockerfile_base_image_is_the_target():
    dockerfile = (ROOT / "Dockerfile").read_text()
    base = re.search(r"^ARG BASE_IMAGE=(\S+)", dockerfile, re.M).group(1)
    assert base == target.BASE_IMAGE == f"python:{target.python_version()}-slim"


def test_a_pin_without_a_wheel_for_the_target_is_refused_in_seconds(tmp_path, capsys):
    # numpy 1.25.2 has cp39-cp311 wheels only; 1.26.0 (September 2023) was the first with cp312
    assert sys.version_info[:2] != target.PYTHON  # this machine's Python is not the target's
    sub = make_submission(tmp_path / "sub", requirements="numpy==1.25.2\n")
    cache = tmp_path / "envs"
    t0 = time.monotonic()
    status = cli.main(["check-submission", str(sub), "--env-cache", str(cache)])
    seconds = time.monotonic() - t0
    out = capsys.readouterr().out
    assert status == 1
    errors = [line for line in out.splitlines() if line.startswith("[error]")]
    assert errors == ["[error] numpy==1.25.2 has no wheel for Python 3.12 on Linux x86_64; the first "
                      "release with one is 1.26.0"]
    assert "          fix: write numpy==1.26.0 in requirements.txt (and test with it)" in out
    assert out.rstrip().endswith("1 error(s), 0 warning(s) - fix the errors before uploading")
    assert not cache.exists() or not any(cache.iterdir())  # nothing was installed
    assert seconds < 60, seconds  # ~10 s on a loaded 2-core machine, most of it imports


def test_a_good_submission_resolves_and_says_which_python_ran(tmp_path, env_cache, capsys):
    sub = make_submission(tmp_path / "sub")
    status = cli.main(["check-submission", str(sub), "--env-cache", str(env_cache)])
    out = capsys.readouterr().out
    assert status == 0, out
    assert re.search(r"^\[ok\] requirements.txt resolves for the evaluator's target, Python 3.12 on "
                     r"Linux x86_64 \(manylinux wheels\), wheels only \(\d+\.\d s\)$", out, re.M), out
    ran = re.search(r"^\[ok\] the submission ran on Python (3\.\d+)\.\d+ \((.+)\)$", out, re.M)
    found = envmod.find_target_python(target.python_version())
    if found:  # pyenv's 3.12 here: the real install and predict() on the target's version
        assert ran.groups() == ("3.12", found)
    else:
        assert re.search(r"^\[warning\] installed and ran on Python 3\.\d+ .*: no Python 3.12 was "
                         r"found here, so for the evaluator's Python requirements.txt was only "
                         r"resolved$", out, re.M), out
    assert re.search(r"^\[ok\] environment: [\d,]+ MB, (made|reused from the cache) in [\d.]+ s "
                     r"\([\d.]+ % of the install's 1800 s budget\)$", out, re.M), out


def test_lines_that_conflict_and_versions_that_do_not_exist(tmp_path):
    conflict = envmod.resolve_for_target("numpy==2.2.6\nnumpy==2.1.0\n", **TARGET)
    assert len(conflict) == 1 and not conflict[0].ours
    assert conflict[0].cause == "you require numpy==2.2.6 and numpy==2.1.0"
    assert conflict[0].fix.startswith("change requirements.txt so that the lines agree")
    missing = envmod.resolve_for_target("numpy==0.0.1\nchallenge-welding==1.0\n", **TARGET)
    assert [u.requirement for u in missing] == ["numpy==0.0.1"]  # the kit's pin is ours to install
    assert missing[0].cause == ("numpy==0.0.1: there is no version of numpy==0.0.1 (for Python 3.12 on "
                                "Linux x86_64)")


# ------------------------------------------------------------------ faults on our side: one line
@pytest.fixture
def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there: connection refused
    return port


def _install_from(index_url: str, tmp_path, monkeypatch) -> envmod.InstallError:
    """The InstallError of a good submission's install from ``index_url`` (uv's cache off)."""
    monkeypatch.setenv("UV_INDEX_URL", index_url)
    monkeypatch.setenv("UV_NO_CACHE", "1")
    sub = make_submission(tmp_path / "sub")
    (tmp_path / "work").mkdir()
    with pytest.raises(envmod.InstallError) as info:
        envmod.prepare_environment(sub, tmp_path / "work", cache_dir=tmp_path / "envs",
                                   log=lambda s: None)
    return info.value


def test_an_unreachable_index_is_our_fault_in_one_line(tmp_path, closed_port, monkeypatch):
    err = _install_from(f"http://127.0.0.1:{closed_port}/simple", tmp_path, monkeypatch)
    msg = str(err)
    assert err.ours and "\n" not in msg
    assert msg == ("installing requirements.txt: the package index cannot be reached from this "
                   "machine (the evaluator's fault, not the submission's) -> fix: check the network "
                   "or the proxy (HTTPS_PROXY), or use a wheelhouse (CHALLENGE_WELDING_WHEELHOUSE)")
    # and check-submission, before any install, says the same without blaming the requirements
    found = envmod.resolve_for_target("numpy==2.2.6\n", **TARGET)
    assert len(found) == 1 and found[0].ours
    assert found[0].cause.startswith("the package index cannot be reached from this machine: the "
                                     "requirements were not resolved for the target (not the "
                                     "submission's fault)")


class _Index(BaseHTTPRequestHandler):
    def do_GET(self):  # never reached by a client that refuses the certificate
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_an_untrusted_certificate_is_our_fault_in_one_line(tmp_path, monkeypatch):
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
                    "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1"], check=True,
                   capture_output=True)
    server = HTTPServer(("127.0.0.1", 0), _Index)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        err = _install_from(f"https://127.0.0.1:{server.server_port}/simple", tmp_path, monkeypatch)
    finally:
        server.shutdown()
    assert err.ours
    assert str(err) == (
        "installing requirements.txt: the package index's TLS certificate is not trusted here (the "
        "evaluator's fault, not the submission's) -> fix: give the evaluator the proxy's CA "
        "(SSL_CERT_FILE) or use a wheelhouse (CHALLENGE_WELDING_WHEELHOUSE)")


def test_install_failure_messages_are_one_line_cause_first():
    uv_no_wheel = ("Using CPython 3.12.1\n  x No solution found when resolving dependencies:\n"
                   "  `-> Because numpy==1.25.2 has no usable wheels and you require numpy==1.25.2, "
                   "we can conclude that your requirements are unsatisfiable.\n\n      hint: Wheels "
                   "are required for `numpy` because building from source is disabled\n")
    err = envmod.install_failure(uv_no_wheel, "installing requirements.txt", 1, "3.12")
    assert str(err) == ("numpy==1.25.2 has no wheel for this Python and platform, and the evaluator "
                        "builds no dependency from source -> fix: pin a version of numpy with a wheel "
                        "for Python 3.12 (challenge-welding check-submission names one), or ask the "
                        "organisers for --allow-source-builds")
    assert not err.ours
    full = envmod.install_failure("error: failed to write to file `x`: No space left on device "
                                  "(os error 28)\n", "installing requirements.txt", 2)
    assert full.ours and str(full).startswith("installing requirements.txt: the disk is full")


# ------------------------------------------------------------------ a system without Linux's confinement
# macOS as the package sees it: sys.platform "darwin", no memfd_create, and (as on Windows) no
# `resource` nor `fcntl` module; the third-party libraries are imported first, as themselves.
NOT_LINUX = """
import os, sys
import numpy, pandas, cv2, pyarrow.parquet, yaml, sysconfig
sysconfig.get_config_vars()
sys.platform = "darwin"
sys.modules["resource"] = None  # ImportError, as on Windows
sys.modules["fcntl"] = None
for name in ("memfd_create", "pidfd_open"):
    if hasattr(os, name):
        delattr(os, name)
from challenge_welding.commands import cli
sys.exit(cli.main(sys.argv[1:]))
"""


def test_check_submission_runs_without_linux_confinement_and_says_so(tmp_path, env_cache):
    sub = make_submission(tmp_path / "sub")
    res = subprocess.run([sys.executable, "-c", NOT_LINUX, "check-submission", str(sub),
                          "--env-cache", str(env_cache)], capture_output=True, text=True,
                         timeout=900)
    out = res.stdout
    assert res.returncode == 0, out + res.stderr
    assert "Traceback" not in res.stderr
    lines = [ln for ln in out.splitlines() if "confine" in ln]
    assert lines == ["[warning] this system (darwin) has no Linux confinement: the submission ran "
                     "unconfined here; the evaluator runs it confined (Landlock, seccomp, no "
                     "network), where writing outside its temp folder, reading the evaluation data "
                     "or opening a connection fails"], out
    assert "NO SANDBOX" not in out
    assert "predict() ran on 4 images; valid outputs" in out
    # a loaded machine may exceed the time budget (a warning): the only other one allowed
    others = [ln for ln in out.splitlines() if ln.startswith("[warning]") and "confine" not in ln]
    assert all("exceeds the challenge's budget" in ln for ln in others), others
    assert f"0 error(s), {1 + len(others)} warning(s) - ready to upload" in out


def test_install_summary_weighs_time_and_warns_for_gpu_only_packages(tmp_path):
    site = tmp_path / "env" / "lib" / "python3.12" / "site-packages"
    for dist, size in (("nvidia_cublas_cu12-12.4.5.8", 1_000_000_000), ("numpy-2.2.6", 40_000_000)):
        (site / f"{dist}.dist-info").mkdir(parents=True)
        (site / f"{dist}.dist-info" / "RECORD").write_text(
            f"{dist.split('-')[0]}/lib.so,sha256=x,{size}\n{dist}.dist-info/RECORD,,\n")
    lines = envmod.install_summary(tmp_path / "env", 100.0, 300.0, cached=False, device="cpu")
    assert lines[0] == "environment: 0 MB, made in 100.0 s (33.3 % of the install's 300 s budget)"
    assert lines[1] == ("warning: 1 GPU-only package(s) (nvidia-cublas-cu12; 1.0 GB) and this worker "
                        "has no GPU -> fix: depend on the CPU build (e.g. tensorflow without "
                        "[and-cuda], tensorflow-cpu, torch from the CPU index)")
    assert lines[2] == ("warning: the install alone took 33 % of the install phase's budget (100 of "
                        "300 s) -> fix: depend on fewer or smaller packages")
    # a worker with a GPU, a quick install: the size and time only
    assert envmod.install_summary(tmp_path / "env", 10.0, 300.0, cached=True, device="cuda") == [
        "environment: 0 MB, reused from the cache in 10.0 s (3.3 % of the install's 300 s budget)"]


def test_cache_list_and_prune(tmp_path, capsys):
    import os

    cache = tmp_path / "envs"
    for key, days in (("a" * 20, 0), ("b" * 20, 3)):
        env = cache / key
        env.mkdir(parents=True)
        (env / "pyvenv.cfg").write_text("home = /usr/bin\nversion_info = 3.12.1\n")
        (env / "blob").write_bytes(b"x" * 2_000_000)
        (env / ".complete").write_text(key)
        old = time.time() - days * 86400
        for f in (env / "pyvenv.cfg", env / ".complete"):
            os.utime(f, (old, old))
    assert cli.main(["cache", "list", "--env-cache", str(cache)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{'a' * 20}          2 MB  Python 3.12   last used 0.0 days ago"
    assert out[1] == f"{'b' * 20}          2 MB  Python 3.12   last used 3.0 days ago"
    assert out[2] == f"2 environment(s), 4 MB in {cache}"
    assert cli.main(["cache", "prune", "--older-than", "1", "--env-cache", str(cache)]) == 0
    assert capsys.readouterr().out == "removed 1 environment(s), 2 MB freed\n"
    assert sorted(p.name for p in cache.iterdir() if p.is_dir()) == ["a" * 20]


def test_requirements_name_nothing_outside_the_submission(tmp_path):
    # the evaluator's uv runs outside the sandbox and echoes what it cannot parse (uv 0.13:
    # "Unexpected '_' ... /etc/shadow:17:1" for `-r /etc/shadow`) into the participant's log
    (tmp_path / "more.txt").write_text("pandas==2.2.3\n")
    assert envmod.safe_requirements("numpy==2.2.6  # pinned\n-r more.txt\n", tmp_path) == \
        "numpy==2.2.6\npandas==2.2.3\n\n"
    for line, why in (("-r /etc/shadow", "-r /etc/shadow is not a file of the submission"),
                      ("-r ../outside.txt", "-r ../outside.txt is not a file of the submission"),
                      ("-f /etc", "-f /etc: only an http(s) index is accepted"),
                      ("x @ file:///etc/shadow", "x @ file:///etc/shadow: only an http(s) URL is "
                                                 "accepted after @"),
                      ("-e .", "the option -e is not accepted by the evaluator")):
        with pytest.raises(envmod.InstallError) as info:
            envmod.safe_requirements(f"numpy==2.2.6\n{line}\n", tmp_path)
        assert str(info.value) == f"requirements.txt line 2: {why} -> fix: remove or change this line"
