"""The sandbox around participant code (issue 17, classes 2, 3, 4, 5 and the fork storm of 8).

Each attack is a real submission folder installed and run by the real `ingest` (in this
process, or the `challenge-welding` command in a subprocess where the attack would kill the
ingestion), or by `evaluate`. The attacker is given the paths it aims at in a file of its own
(``targets.json``): a real attacker reads them from /proc or guesses them.
"""

import hashlib
import json
import os
import re
import shutil
import signal
import site
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

import challenge_welding
from challenge_welding.commands import cli
from challenge_welding.ingestion.confine import layers, sandbox
from challenge_welding.ingestion.run.ingest import ingest

from ingestion_helpers import GOOD, SETUP_PY, expected, make_reference, make_submission

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")
needs_landlock = pytest.mark.skipif(sandbox.kernel_abi() < 6, reason="needs Landlock ABI >= 6")
CHALLENGE = Path(challenge_welding.__file__).parent
CONFIG = CHALLENGE / "scoring" / "default_scoring.yaml"
EVALUATOR_MODULE = CHALLENGE / "scoring" / "rescale.py"  # first imported by the scorer
SITE = Path(site.getsitepackages()[0])
PLANTED_PTH = SITE / "zz_cw_planted_by_test.pth"
CLI = [sys.executable, "-m", "challenge_welding"]


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def attack(body: str) -> str:
    """GOOD, with ``body`` run at the top of load_model() (``T``: the targets, ``log``)."""
    head = '''
import json, os, signal, sys, time
from pathlib import Path
T = json.loads((Path(__file__).parent / "targets.json").read_text())


def log(*args):
    print("ATTACK", *args, flush=True)


def attempt():
'''
    indented = "\n".join("    " + line for line in body.strip("\n").splitlines())
    good = GOOD.replace("        self.loaded = True", "        attempt()\n        self.loaded = True")
    return head + indented + "\n" + good


def submission(tmp_path, body="", targets=None, setup=SETUP_PY):
    targets = targets or {}
    comp = attack(body or "pass")
    # participant code inherits no variable of ours (environment.participant_env): the marker
    # that finds survivors (fixture `marker`) is set by the submission itself, in each process
    if os.environ.get("CW_SANDBOX_TEST_MARKER"):
        plant = f"import os\nos.environ['CW_SANDBOX_TEST_MARKER'] = {os.environ['CW_SANDBOX_TEST_MARKER']!r}\n"
        comp, setup = plant + comp, plant + setup
    return make_submission(tmp_path / "sub", comp, setup=setup,
                           manifest="include challenge_solution/targets.json\n",
                           extra={"challenge_solution/targets.json": json.dumps(targets),
                                  "targets.json": json.dumps(targets)})


def survivors(marker: str) -> list[int]:
    """Live processes whose environment holds ``marker`` (inherited from this test)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as fh:
                if marker.encode() in fh.read():
                    with open(f"/proc/{name}/stat") as st:
                        if st.read().rsplit(")", 1)[1].split()[0] != "Z":
                            found.append(int(name))
        except OSError:
            pass
    return found


@pytest.fixture
def marker(monkeypatch):
    value = f"cw-sandbox-test-{uuid.uuid4().hex}"
    monkeypatch.setenv("CW_SANDBOX_TEST_MARKER", value)
    yield value
    for pid in survivors(value):  # never leave one behind, even when the test failed
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


@pytest.fixture
def evaluator_files():
    """The evaluator module and the site-packages .pth the attacks aim at, restored after."""
    before = EVALUATOR_MODULE.read_bytes()
    yield
    if EVALUATOR_MODULE.read_bytes() != before:
        EVALUATOR_MODULE.write_bytes(before)
    PLANTED_PTH.unlink(missing_ok=True)


# --- the binding itself -----------------------------------------------------------------------
PROBE = """
import os, signal, sys
for d in sys.argv[1:]:
    try:
        open(os.path.join(d, "f"), "w").write("x")
        print("write", d, "ok")
    except OSError as e:
        print("write", d, e.errno)
for sig in (signal.SIGSTOP, signal.SIGKILL):
    try:
        os.kill(os.getppid(), sig)
        print("kill", sig.name, "ok")
    except OSError as e:
        print("kill", sig.name, e.errno)
try:
    os.setsid()
    print("setsid ok")
except OSError as e:
    print("setsid", e.errno)
os.kill(0, 0)  # its own group: allowed
print("own group ok")
"""


@pytest.mark.parametrize("abi", [None, "3", "0"])
def test_binding_confines_writes_and_signals(tmp_path, monkeypatch, abi):
    if abi is None:
        monkeypatch.delenv(sandbox.ABI_MAX_ENV, raising=False)
    else:
        monkeypatch.setenv(sandbox.ABI_MAX_ENV, abi)
    if sandbox.kernel_abi() < 1 and abi != "0":
        pytest.skip("no Landlock on this kernel")
    allowed, denied = tmp_path / "allowed", tmp_path / "denied"
    allowed.mkdir()
    denied.mkdir()
    policy = sandbox.Policy(read=[*sandbox.SYSTEM_READ, *sandbox.base_prefixes()],
                            write=[allowed], abi=sandbox.usable_abi())
    python = os.path.realpath(sys.executable)
    out = subprocess.run([python, "-S", "-c", PROBE, str(allowed), str(denied)],
                         preexec_fn=sandbox.Confinement(policy), capture_output=True, text=True,
                         timeout=60)
    lines = out.stdout.splitlines()
    assert f"write {allowed} ok" in lines, out
    # EACCES (13) from Landlock; without it (ABI 0) the write goes through
    assert f"write {denied} {'ok' if abi == '0' else 13}" in lines, out
    # refused with EPERM (1): by Landlock's scoping (ABI >= 6) or else by the seccomp filter
    assert "kill SIGSTOP 1" in lines and "kill SIGKILL 1" in lines, out
    assert "setsid 1" in lines and "own group ok" in lines, out


def test_seccomp_program_refuses_foreign_targets_only():
    """8 bytes per instruction; the own group (777, -777) is named in it."""
    prog = sandbox.seccomp_program(777)
    assert len(prog) % 8 == 0
    ks = [int.from_bytes(prog[i + 4:i + 8], "little") for i in range(0, len(prog), 8)]
    assert sandbox.SYS["setsid"] in ks and sandbox.SYS["kill"] in ks
    assert 777 in ks and (-777) & 0xFFFFFFFF in ks


def test_carve_leaves_out_a_hole_and_keeps_its_siblings(tmp_path):
    for rel in ("a/b/secret/x", "a/b/keep/y", "a/c/z"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("1")
    got = sandbox.carve(str(tmp_path / "a"), [str(tmp_path / "a/b/secret")])
    assert sorted(got) == [str(tmp_path / "a/b/keep"), str(tmp_path / "a/c")]


# --- class 2: writing the evaluator ------------------------------------------------------------
SETUP_ATTACK = SETUP_PY + '''
import json, os
T = json.load(open("targets.json"))
for path, text in ((T["module"], "\\n# planted by setup.py\\n"), (T["pth"], T["pth_line"])):
    try:
        with open(path, "a") as fh:
            fh.write(text)
        print("ATTACK wrote", path)
    except OSError as e:
        print("ATTACK refused", path, e.errno)
'''


def _targets(tmp_path):
    return {"module": str(EVALUATOR_MODULE), "pth": str(PLANTED_PTH),
            "pth_line": f"import os; open({str(tmp_path / 'pth_ran')!r}, 'a').write('ran')\n"}


@pytest.mark.serial
@needs_landlock
def test_setup_py_cannot_write_the_evaluator(tmp_path, input_data, env_cache, evaluator_files):
    before = sha256(EVALUATOR_MODULE)
    sub = submission(tmp_path, targets=_targets(tmp_path), setup=SETUP_ATTACK)
    report = ingest(sub, input_data, tmp_path / "pred", cache_dir=env_cache, progress=False)
    assert sha256(EVALUATOR_MODULE) == before
    assert not PLANTED_PTH.exists()
    assert report["status"] == "ok"  # the refused write is setup.py's problem, not the run's
    assert report["sandbox"]["evaluator_files"]["changed"] == []
    assert report["sandbox"]["install"]["landlock_abi"] == sandbox.kernel_abi()


LOAD_ATTACK = '''
for path, text in ((T["module"], "\\n# planted by load_model\\n"), (T["pth"], T["pth_line"])):
    try:
        with open(path, "a") as fh:
            fh.write(text)
        log("wrote", path)
    except OSError as e:
        log("refused", path, e.errno)
'''


@pytest.mark.serial  # without Landlock it really changes the evaluator: no other run may watch
@pytest.mark.parametrize("abi", [None, "0"])
def test_child_cannot_change_the_evaluator_unseen(tmp_path, input_data, env_cache,
                                                   evaluator_files, monkeypatch, abi):
    """Landlock refuses the writes; without it (ABI capped to 0) the hash check fails the run
    with one line and `score` refuses the predictions."""
    if abi is None and sandbox.kernel_abi() < 1:
        pytest.skip("no Landlock")
    if abi:  # no layer at all (no namespace either): only the hash check is left
        monkeypatch.setenv(sandbox.ABI_MAX_ENV, abi)
        monkeypatch.setenv(layers.NAMESPACES_ENV, "0")
    before = sha256(EVALUATOR_MODULE)
    sub = submission(tmp_path, LOAD_ATTACK, targets=_targets(tmp_path))
    pred = tmp_path / "pred"
    report = ingest(sub, input_data, pred, cache_dir=env_cache, progress=False,
                    unsafe_unconfined=bool(abi))
    log = (pred / "submission_output.log").read_text()
    if abi is None:  # EACCES from Landlock, EROFS from the read-only mount namespace, or
        # ENOENT where the evaluator lives under a folder the namespace masks (a clone in /tmp)
        assert re.search(f"ATTACK refused {re.escape(str(EVALUATOR_MODULE))} (2|13|30)\n", log)
        assert "ATTACK wrote" not in log
        assert sha256(EVALUATOR_MODULE) == before and not PLANTED_PTH.exists()
        assert report["status"] == "ok"
    else:
        assert f"ATTACK wrote {EVALUATOR_MODULE}" in log  # no Landlock: it went through...
        assert report["status"] == "failed"  # ...and was seen
        line = [e for e in report["errors"] if "evaluator's own files changed" in e]
        assert len(line) == 1 and str(EVALUATOR_MODULE) in line[0]
        assert report["sandbox"]["landlock_abi"] is None
        assert any("NO SANDBOX" in w for w in report["warnings"])
    ref = make_reference(tmp_path / "ref", CONFIG)
    EVALUATOR_MODULE.write_bytes(EVALUATOR_MODULE.read_bytes().replace(
        b"\n# planted by load_model\n", b""))
    # a later `score` process: refuses a failed run; unaffected by anything planted
    done = subprocess.run([*CLI, "score", "--reference", str(ref), "--predictions", str(pred),
                           "--output", str(tmp_path / "out")], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == (0 if abi is None else 1), done.stderr
    if abi is None:
        assert not (tmp_path / "pth_ran").exists()


# --- class 3: processes that outlive the run ---------------------------------------------------
DAEMON = '''
import os, sys, time
out = sys.argv[1]
while not os.path.exists(os.path.join(out, "ingestion.json")):
    time.sleep(0.05)
time.sleep(0.5)
try:
    open(os.path.join(out, "performance.parquet"), "wb").write(b"rewritten")
except OSError:
    pass
time.sleep(300)
'''
SETUP_DAEMON = SETUP_PY + '''
import json, os, subprocess, sys
T = json.load(open("targets.json"))
if os.fork() == 0:
    try:
        os.setsid()
    except OSError:
        pass
    if os.fork() == 0:  # a daemon: no stdio of the installer's (which would wait for it)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.execv(sys.executable, [sys.executable, "-c", T["daemon"], T["out"]])
    os._exit(0)
'''
CHAIN = '''
out = T["out"]
if os.fork() == 0:
    while True:  # fork and exit, in a new session each time: outrun a tree walk
        if os.fork():
            os._exit(0)
        try:
            os.setsid()
        except OSError:
            pass
        if os.path.exists(os.path.join(out, "ingestion.json")):
            try:
                open(os.path.join(out, "performance.parquet"), "wb").write(b"rewritten")
            except OSError:
                pass
'''


def test_no_daemon_or_fork_chain_outlives_the_run(tmp_path, input_data, env_cache, marker):
    pred = tmp_path / "pred"
    sub = submission(tmp_path, CHAIN, targets={"out": str(pred), "daemon": DAEMON},
                     setup=SETUP_DAEMON)
    report = ingest(sub, input_data, pred, cache_dir=env_cache, progress=False)
    assert survivors(marker) == []
    time.sleep(2)  # what would rewrite the files has had time to
    assert survivors(marker) == []
    assert report["status"] == "ok", report["errors"]
    for name, digest in report["manifest"].items():
        assert sha256(pred / name) == digest, name
    assert report["integrity"]["processes_killed"] >= 0


# --- class 4: signals --------------------------------------------------------------------------
SIGNALS = '''
ppid = os.getppid()  # in its own pid namespace: the namespace's init (pid 1), not ours
for sig in (signal.SIGSTOP, signal.SIGKILL):
    try:
        os.kill(ppid, sig)
        log("sent", sig.name)
    except OSError as e:
        log("refused", sig.name, e.errno)
'''


@pytest.mark.parametrize("abi", [None, "3"])
def test_child_cannot_stop_or_kill_the_ingestion(tmp_path, input_data, env_cache, abi):
    """Landlock's signal scoping (ABI >= 6) or, capped to ABI 3, the seccomp filter."""
    if abi is None and sandbox.kernel_abi() < 6:
        pytest.skip("no Landlock scoping")
    sub = submission(tmp_path, SIGNALS)
    pred = tmp_path / "pred"
    env = {**os.environ, **({sandbox.ABI_MAX_ENV: abi} if abi else {})}
    try:
        done = subprocess.run([*CLI, "ingest", "--submission", str(sub), "--input-data",
                               str(input_data), "--output", str(pred), "--env-cache",
                               str(env_cache), "--no-progress"], env=env, capture_output=True,
                              text=True, timeout=600)
    except subprocess.TimeoutExpired:
        pytest.fail("the ingestion never finished (stopped by the submission)")
    assert done.returncode == 0, done.stderr[-2000:]
    log = (pred / "submission_output.log").read_text()
    assert "ATTACK refused SIGSTOP 1" in log and "ATTACK refused SIGKILL 1" in log
    report = json.loads((pred / "ingestion.json").read_text())
    assert report["status"] == "ok"
    assert report["sandbox"]["landlock_abi"] == (int(abi) if abi else sandbox.kernel_abi())


# --- class 5: reading what it must not ---------------------------------------------------------
READS = '''
global CHEAT
CHEAT = False
for what in ("reference", "input"):
    try:
        found = os.listdir(T[what]) if what == "input" else Path(T[what]).read_bytes()
        log("read", what, len(found))
        CHEAT = True
    except OSError as e:
        log("refused", what, e.errno)
'''


@needs_landlock
def test_child_cannot_read_reference_or_input_data_under_evaluate(tmp_path, env_cache,
                                                                   monkeypatch):
    from ingestion_helpers import make_input_data

    data = tmp_path / "DATA"
    make_input_data(data / "input_data")
    make_reference(data / "reference_data", CONFIG)
    body = READS
    comp_targets = {"reference": str(data / "reference_data" / "performance.parquet"),
                    "input": str(data / "input_data" / "performance" / "images")}
    sub = submission(tmp_path, body, targets=comp_targets)
    # a cheater answers KO everywhere: visible in the predictions
    comp = (sub / "challenge_solution" / "AIComponent.py").read_text().replace(
        'preds.append("KO" if r > g else "OK")',
        'preds.append("KO" if CHEAT or r > g else "OK")')
    (sub / "challenge_solution" / "AIComponent.py").write_text(comp)
    monkeypatch.setenv("XDG_CACHE_HOME", str(env_cache.parent.parent))
    out = tmp_path / "out"
    assert cli.main(["evaluate", "--submission", str(sub), "--data", str(data),
                     "--output", str(out), "--no-draws"]) == 0
    log = (out / "predictions" / "submission_output.log").read_text()
    # EACCES (Landlock) or ENOENT (a mount namespace where the folder is not even there)
    assert re.fullmatch(r"ATTACK refused reference (13|2)\nATTACK refused input (13|2)\n", log), log
    import pandas as pd

    got = pd.read_parquet(out / "predictions" / "performance.parquet")
    assert list(got["predicted_state"]) == expected("performance")[0]


# --- class 8: a fork storm ---------------------------------------------------------------------
STORM = '''
for _ in range(200):  # bounded, so that it cannot hurt a machine whatever the evaluator does
    try:
        if os.fork() == 0:
            time.sleep(120)
            os._exit(0)
    except OSError:
        break
time.sleep(120)
'''


def test_fork_storm_is_stopped_with_one_line(tmp_path, input_data, env_cache, marker):
    sub = submission(tmp_path, STORM)
    pred = tmp_path / "pred"
    t0 = time.monotonic()
    report = ingest(sub, input_data, pred, cache_dir=env_cache, progress=False,
                    max_processes=64, load_timeout=240)
    assert report["status"] == "failed"
    assert len(report["errors"]) == 1 and "fork storm" in report["errors"][0]
    assert "more than 64 processes" in report["errors"][0]
    assert survivors(marker) == []
    assert time.monotonic() - t0 < 200  # not the load time limit (240 s) that ended it


# --- the ABI cap: what runs where the kernel has less ------------------------------------------
def test_setup_py_builds_under_landlock_abi_1(tmp_path, input_data, env_cache, monkeypatch):
    """A 5.15 kernel (a Codabench worker's): Landlock ABI 1 denies every move of a file into
    another folder (EXDEV; REFER came with ABI 2). Before: setuptools' build_meta renaming the
    wheel out of its temp folder, then uv moving it into its cache, failed with "Invalid
    cross-device link": no submission with a setup.py installed. Now pip builds, with
    os.rename falling back to copy there; in a folder of the run, the move is still refused."""
    if sandbox.kernel_abi() < 1:
        pytest.skip("no Landlock")
    monkeypatch.setenv(sandbox.ABI_MAX_ENV, "1")
    mover = GOOD.replace("    def load_model(self, config_file=None):\n",
                         "    def load_model(self, config_file=None):\n"
                         "        import os, tempfile\n"
                         "        a = tempfile.mkdtemp(); os.mkdir(a + '/b')\n"
                         "        open(a + '/f', 'w').close()\n"
                         "        try:\n            os.rename(a + '/f', a + '/b/f'); print('MOVED')\n"
                         "        except OSError as e:\n            print('MOVE', e.errno)\n")
    assert mover != GOOD
    sub = make_submission(tmp_path / "sub", component=mover)
    report = ingest(sub, input_data, tmp_path / "pred", cache_dir=env_cache, progress=False)
    assert report["status"] == "ok", report["errors"]
    assert report["sandbox"]["landlock_abi"] == 1
    assert "MOVE 18" in (tmp_path / "pred" / "submission_output.log").read_text()


@pytest.mark.parametrize("abi", ["0", "3", None])
def test_good_submission_under_each_abi(tmp_path, input_data, env_cache, monkeypatch, abi):
    if abi:
        monkeypatch.setenv(sandbox.ABI_MAX_ENV, abi)
    sub = make_submission(tmp_path / "sub")
    report = ingest(sub, input_data, tmp_path / "pred", cache_dir=env_cache, progress=False)
    assert report["status"] == "ok", report["errors"]
    box = report["sandbox"]
    want = sandbox.kernel_abi() if abi is None else min(int(abi), sandbox.kernel_abi())
    assert box["landlock_abi"] == (want or None)
    run = box["run"]
    assert run["seccomp"] and run["rlimits"] == {"core": 0, "fsize": 2 << 30}
    # what it writes is bounded: its scratch a 2 GiB tmpfs of its own where one can be mounted
    assert run.get("scratch") == ({"tmpfs_bytes": 2 << 30} if layers.probe()["mount"] else None)
    if want == 0:
        assert run["fs"].startswith("not confined")
        # the mount namespace confines the files where the kernel lends one: no warning then
        lent = layers.probe()["mount"]
        assert sum("NO SANDBOX" in w for w in report["warnings"]) == (0 if lent else 1)
        assert box["layers"]["files_confined"] is lent
    else:
        assert str(input_data) in run["fs"]["denied"]
        assert run["scoping"] == ([] if want < 6 else ["signal", "abstract_unix_socket"])
        assert run["net"] == ("not confined (Landlock ABI < 4)" if want < 4
                              else "TCP bind and connect denied")
        assert not any("NO SANDBOX" in w for w in report["warnings"])


# load_model() says which user it is, inside and (through the map) outside, and tries to
# signal and pin every process of uid 0 it can name (outside its pid namespace it names none:
# /proc there is its own; the evaluator's pid comes from the test, through the environment)
WHO = GOOD.replace("    def load_model(self, config_file=None):\n",
                   "    def load_model(self, config_file=None):\n"
                   "        import os\n"
                   "        print('UID', os.getuid(), os.geteuid(), os.getgid(), os.getgroups())\n"
                   "        print('MAP', open('/proc/self/uid_map').read().split())\n"
                   "        print('CAPEFF', [l.split()[1] for l in open('/proc/self/status')\n"
                   "                         if l.startswith(('CapEff', 'CapBnd'))])\n")


@pytest.mark.skipif(os.geteuid() != 0 or not Path("/usr/bin/setpriv").exists(),
                    reason="needs root and setpriv")
def test_root_without_sys_admin_runs_in_a_user_namespace_as_a_user_of_its_own(
        tmp_path, input_data, env_cache):
    """`podman run` as root: CAP_SETUID held, CAP_SYS_ADMIN not, so the namespaces come from a
    user namespace. Before 29's first fix the child tried to become uid 64290 in a namespace
    that mapped uid 0 alone (setresuid EPERM: every submission ended with status 125 in the
    image built on python:3.12-slim); after it, the child stayed uid 0 there, with no
    capability, so the kernel's same-user checks did not keep it off the evaluator's
    processes (uid 0 outside too). Now a helper outside maps uid 64290 beside uid 0 and the
    child becomes it: inside and outside alike, no group, no capability."""
    if not layers.probe()["mount"]:
        pytest.skip("no namespace lent here")
    sub = make_submission(tmp_path / "sub", WHO)
    done = subprocess.run(["setpriv", "--bounding-set=-sys_admin", *CLI, "ingest",
                           "--submission", str(sub), "--input-data", str(input_data), "--output",
                           str(tmp_path / "pred"), "--env-cache", str(env_cache), "--no-progress"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    held = json.loads((tmp_path / "pred" / "ingestion.json").read_text())["sandbox"]["layers"]
    assert held["namespaces"][:2] == ["user", "mount"], held
    lo, hi, gid = layers.SANDBOX_UIDS.start, layers.SANDBOX_UIDS.stop - 1, layers.SANDBOX_GID
    leased = re.fullmatch(rf"uid (\d+) \(leased from {lo}\.\.{hi}\), gid {gid}, no groups "
                          r"\(install and run\)", held["user"])
    assert leased, held
    uid = int(leased.group(1))
    assert uid in layers.SANDBOX_UIDS
    assert held["capabilities"] == "none"
    log = (tmp_path / "pred" / "submission_output.log").read_text()
    assert f"UID {uid} {uid} {gid} []" in log, log
    # its namespace maps uid 0 and the leased uid, each to itself: the same uid outside too
    assert "MAP ['0', '0', '1', '" + str(uid) + "', '" + str(uid) + "', '1']" in log, log
    assert "CAPEFF ['0000000000000000', '0000000000000000']" in log, log


# --- organisers may refuse runs without a sandbox ----------------------------------------------
def test_score_refuses_a_run_without_sandbox_when_the_config_requires_one(
        tmp_path, input_data, env_cache, monkeypatch, capsys):
    import yaml

    monkeypatch.setenv(sandbox.ABI_MAX_ENV, "0")
    monkeypatch.setenv(layers.NAMESPACES_ENV, "0")  # no mount namespace either
    pred = tmp_path / "pred"
    report = ingest(make_submission(tmp_path / "sub"), input_data, pred, cache_dir=env_cache,
                    progress=False, unsafe_unconfined=True)
    assert report["status"] == "ok" and report["sandbox"]["landlock_abi"] is None
    assert report["sandbox"]["unsafe_unconfined"] is True
    ref = make_reference(tmp_path / "ref", CONFIG)
    args = ["score", "--reference", str(ref), "--predictions", str(pred), "--output"]
    assert cli.main(args + [str(tmp_path / "out1")]) == 0  # the default: scored, and said
    page = (tmp_path / "out1" / "detailed_results.html").read_text()
    assert "sandbox: UNSAFE, files not confined (--unsafe-unconfined)" in page
    config = yaml.safe_load((ref / "scoring.yaml").read_text())
    config["integrity"] = {"require_sandbox": True}
    (ref / "scoring.yaml").write_text(yaml.safe_dump(config))
    capsys.readouterr()
    assert cli.main(args + [str(tmp_path / "out2")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ran without a sandbox" in err[0], err
    assert not (tmp_path / "out2" / "scores.json").exists()


# --- file modes: a Codabench worker (uid 0, no capability, no namespace) -----------------------
MODE_ATTACK = '''
for path, mode in ((T["output"], 0o000), (T["output"], 0o777), (T["input_file"], 0o666)):
    try:
        os.chmod(path, mode)
        log("chmod", oct(mode), path, "ok, now", oct(os.stat(path).st_mode & 0o7777))
    except OSError as e:
        log("chmod", oct(mode), path, e.errno)
try:
    os.chown(T["input_file"], 0, 1)
    log("chown ok")
except OSError as e:
    log("chown", e.errno)
import shutil, tempfile
with tempfile.TemporaryDirectory() as tmp:  # an honest copy: shutil.copy calls chmod
    shutil.copy(__file__, os.path.join(tmp, "copy.py"))
    log("shutil.copy ok")
'''
SETUP_MODE_ATTACK = "import json, os\nT = json.load(open('targets.json'))\n" \
    "os.chmod(T['output'], 0o777)\nos.chmod(T['input_file'], 0o666)\n" + SETUP_PY


@pytest.mark.skipif(os.geteuid() != 0 or not Path("/usr/bin/setpriv").exists(),
                    reason="needs root and setpriv")
@pytest.mark.parametrize("abi_max", ["7", "1"])
def test_worker_child_cannot_change_modes_and_install_changes_are_undone(
        tmp_path, input_data, env_cache, abi_max):
    """As Codabench's worker runs us (uid 0, every capability dropped, no_new_privs, no
    namespace): the owner may chmod without CAP_FOWNER and Landlock has no right for modes.
    Before: predict's chmod of the output folder (0o000, 0o777) and of an input file went
    through (ok), and so did setup.py's. Now the child's chmod family is a no-op (modes
    unchanged), chown EPERM, shutil.copy still works; the install's changes are undone after
    the step and said in ingestion.json."""
    if sandbox.kernel_abi() < 1:
        pytest.skip("no Landlock")
    pred = tmp_path / "pred"
    pred.mkdir()
    victim = sorted(p for p in Path(input_data).rglob("*") if p.is_file())[0]
    modes = {p: p.stat().st_mode & 0o7777 for p in (pred, victim)}
    owner = (victim.stat().st_uid, victim.stat().st_gid)
    targets = {"output": str(pred), "input_file": str(victim)}
    sub = submission(tmp_path, MODE_ATTACK, targets=targets, setup=SETUP_MODE_ATTACK)
    env = {**os.environ, sandbox.ABI_MAX_ENV: abi_max, layers.NAMESPACES_ENV: "0"}
    try:
        done = subprocess.run(["setpriv", "--reuid=0", "--inh-caps=-all", "--bounding-set=-all",
                               "--no-new-privs", *CLI, "ingest", "--submission", str(sub),
                               "--input-data", str(input_data), "--output", str(pred),
                               "--env-cache", str(env_cache), "--no-progress"],
                              capture_output=True, text=True, timeout=600, env=env)
        log = (pred / "submission_output.log").read_text()
        report = json.loads((pred / "ingestion.json").read_text())
        got = {p: p.stat().st_mode & 0o7777 for p in modes}
    finally:
        for p, m in modes.items():
            os.chmod(p, m)
        os.chown(victim, *owner)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert got == modes
    for path, mode in ((pred, 0o0), (pred, 0o777), (victim, 0o666)):  # a no-op: success, unchanged
        assert f"ATTACK chmod {oct(mode)} {path} ok, now {oct(modes[path])}\n" in log, log
    assert (victim.stat().st_uid, victim.stat().st_gid) == owner
    assert "ATTACK chown 1\n" in log, log  # EPERM
    assert "ATTACK shutil.copy ok" in log
    changed = report["sandbox"]["modes_restored"]
    assert sorted(changed) == sorted([str(pred), str(victim)]), changed  # by setup.py
    said = [w for w in report["warnings"] if "changed the modes" in w]
    assert said == [f"the submission changed the modes of 2 of our files and folders "
                    f"(restored): {', '.join(changed)}"], report["warnings"]
    assert report["sandbox"]["layers"]["namespaces"] == []
    assert report["sandbox"]["run"]["seccomp"].endswith(
        "; chmod a no-op, chown and xattr writes refused")
    assert report["sandbox"]["layers"]["landlock_abi"] == int(abi_max)


# load_model() leaves a file in each of the machine's shared folders, a folder holding a file
# in /var/tmp, and a link in /tmp to a file of ours (its target must survive the clean-up)
LITTER = """
for top in ("/tmp", "/dev/shm"):
    open(f"{top}/{T['tag']}-file", "w").write("left")
os.makedirs(f"/var/tmp/{T['tag']}-dir/sub")
open(f"/var/tmp/{T['tag']}-dir/sub/f", "w").write("left")
os.symlink(T["ours"], f"/tmp/{T['tag']}-link")
log("LITTER left")
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a user of its own)")
def test_what_a_user_of_its_own_leaves_in_shared_folders_is_removed(tmp_path, input_data,
                                                                     env_cache, monkeypatch):
    """No mount namespace, no Landlock (ABI 0), as root: the child is a leased uid whose
    files are confined by the kernel's permission checks, and /tmp, /var/tmp and /dev/shm are
    the machine's. Before (main at 0702874): the run said nothing and left the four entries,
    owned by uid 64290, for good. Now every entry of those folders owned by the run's uid is
    removed once its processes are dead, said in one warning and in ingestion.json; the
    link goes, its target (ours) stays."""
    system_python = f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}"
    if not os.path.exists(system_python):
        pytest.skip(f"no {system_python}: pyenv's under /root is out of the sandbox's reach")
    monkeypatch.setenv(sandbox.ABI_MAX_ENV, "0")
    monkeypatch.setenv(layers.NAMESPACES_ENV, "0")
    tag = f"cw-litter-{uuid.uuid4().hex[:8]}"
    ours = tmp_path / "ours.txt"
    ours.write_text("ours")
    sub = submission(tmp_path, LITTER, targets={"tag": tag, "ours": str(ours)})
    # the environments where the sandbox's user may read them (tmp_path's parents are 0700)
    cache = Path(tempfile.mkdtemp(prefix="cw-litter-envs-", dir="/var/tmp"))
    cache.chmod(0o755)
    try:
        report = ingest(sub, input_data, tmp_path / "pred", cache_dir=cache, progress=False,
                        python=system_python)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    assert report["status"] == "ok", report["errors"]
    assert report["sandbox"]["layers"]["user"].startswith("uid "), report["sandbox"]["layers"]
    assert "ATTACK LITTER left" in (tmp_path / "pred" / "submission_output.log").read_text()
    left = [f"/tmp/{tag}-file", f"/dev/shm/{tag}-file", f"/var/tmp/{tag}-dir", f"/tmp/{tag}-link"]
    assert sorted(report["sandbox"]["litter_removed"]) == sorted(left)
    assert not any(os.path.lexists(p) for p in left)
    assert ours.read_text() == "ours"
    said = [w for w in report["warnings"] if "shared folders" in w]
    assert len(said) == 1 and said[0].startswith(
        "the submission left 4 file(s) or folder(s) in the machine's shared folders (removed): ")
