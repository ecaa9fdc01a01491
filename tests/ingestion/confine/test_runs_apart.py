"""Two evaluations at once on one machine, as root, at Landlock ABI 0 without namespaces: each
run a uid of its own, and a deny entry no run takes from another (issue 29; layers.lease_uid,
layers.deny/release).

What `docker run` of the evaluator image as root gives (CAP_SETUID kept, no mount namespace):
the kernel's permission checks are the file layer, and the only thing between two runs' children
is that they are different users. Each test runs real processes: two runner processes (each an
ingestion's stand-in: a real :class:`Sandbox` made by ``Sandbox.for_run``, a real confined child
started with its ``Confinement``), whose children then try each other.
"""

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from challenge_welding.ingestion.confine import layers

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.geteuid() != 0 or not shutil.which("setpriv")
    or not os.path.exists(f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}"),
    reason="Linux, as root, setpriv and the system's Python")
REPO = Path(__file__).resolve().parents[3]
CODE = Path(os.environ.get("CW_RUNS_CODE") or REPO / "challenge-welding")
# an interpreter another uid can reach (pyenv's lives under /root, 0700)
USER_PYTHON = f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}"
SECRET = "cw-secret-of-run-"

# The confined child: says who it is, writes a secret in its scratch (as a model's cache
# would), waits for its peer's pid and scratch, tries the peer, says what it got, waits.
CHILD = r'''
import errno, json, os, sys
scratch = os.environ["HOME"]
with open(os.path.join(scratch, "secret.txt"), "w") as fh:
    fh.write(os.environ["CW_SECRET"])
print("READY " + json.dumps([os.getpid(), os.getuid(), os.getgid(), scratch]), flush=True)
peer, peer_scratch = json.loads(sys.stdin.readline())


def attempt(path, write=False):
    try:
        fd = os.open(path, os.O_RDWR if write else os.O_RDONLY)
    except OSError as e:
        return errno.errorcode[e.errno]
    try:
        return os.read(fd, 4096).decode(errors="replace") if not write else "opened"
    except OSError as e:
        return "opened, " + errno.errorcode[e.errno]
    finally:
        os.close(fd)


got = {"environ": attempt(f"/proc/{peer}/environ"), "mem": attempt(f"/proc/{peer}/mem", True),
       "scratch": attempt(os.path.join(peer_scratch, "secret.txt"))}
try:
    os.kill(peer, 0)
    got["kill0"] = "done"
except OSError as e:
    got["kill0"] = errno.errorcode[e.errno]
print("GOT " + json.dumps(got), flush=True)
sys.stdin.readline()
'''

# An ingestion's stand-in: the Sandbox of a run over ``base`` (input_data, reference_data,
# pred), its child confined as the run's would be; lines passed between the child and the test.
RUNNER = r'''
import json, os, subprocess, sys
from pathlib import Path
from challenge_welding.ingestion.confine.sandbox import Sandbox
base, py, child, secret = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
work = Path(sys.argv[5])
scratch = work / "scratch"
(scratch / "tmp").mkdir(parents=True)
box = Sandbox.for_run(base / "input_data", base / "pred", True, False, False, 64, [child],
                      reach=[py])
print("USER " + json.dumps([box.user, box.user_line]), flush=True)
conf = box.run("/usr", [child], [str(scratch)], scratch_dirs=("tmp",))
env = {**conf.env, "CW_SECRET": secret, "PATH": "/usr/bin:/bin"}
if "HOME" not in env:
    env["HOME"] = str(scratch)
p = subprocess.Popen([py, child], preexec_fn=conf, env=env, cwd="/", stdin=subprocess.PIPE,
                     stdout=subprocess.PIPE, text=True)
for line in sys.stdin:  # the test's lines to the child, the child's back
    if line.startswith("END"):
        break
    if line.strip():
        p.stdin.write(line)
        p.stdin.flush()
    out = p.stdout.readline()
    print(out.strip(), flush=True)
p.stdin.close()
p.wait()
box.release()
print("RELEASED", flush=True)
sys.stdin.readline()
'''


@pytest.fixture()
def world():
    """input_data and reference_data world-readable (as organisers' are), the output folder,
    the child's script; everything under a folder every user may traverse."""
    root = Path(tempfile.mkdtemp(prefix="cw-runs-apart-"))
    os.chmod(root, 0o755)
    for name in ("input_data", "reference_data", "pred"):
        (root / name).mkdir(mode=0o755)
        os.chmod(root / name, 0o755)
    (root / "reference_data" / "labels.csv").write_text("sample,label\nx,OK\n")
    os.chmod(root / "reference_data" / "labels.csv", 0o644)
    (root / "child.py").write_text(CHILD)
    (root / "runner.py").write_text(RUNNER)
    for name in ("child.py", "runner.py"):
        os.chmod(root / name, 0o644)
    yield root
    shutil.rmtree(root, ignore_errors=True)


class Run:
    """One runner process (an ingestion's stand-in) and its confined child."""

    def __init__(self, world: Path, name: str):
        work = Path(tempfile.mkdtemp(prefix=f"cw-work-{name}-"))  # 0700, ours, as a run's
        work.rmdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith("CHALLENGE_WELDING_")}
        env.update(PYTHONPATH=str(CODE), CHALLENGE_WELDING_LANDLOCK_ABI_MAX="0",
                   CHALLENGE_WELDING_NAMESPACES="0")
        self.secret = SECRET + name
        self.proc = subprocess.Popen(
            [sys.executable, str(world / "runner.py"), str(world), USER_PYTHON,
             str(world / "child.py"), self.secret, str(work)],
            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.work = work
        self.user, self.user_line = json.loads(self._line("USER "))
        self.ready = None

    def _line(self, prefix: str) -> str:
        line = self.proc.stdout.readline()
        assert line.startswith(prefix), line
        return line[len(prefix):]

    def send(self, text: str) -> str:
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline()

    def start(self):
        """The child's [pid, uid, gid, scratch]."""
        out = self.send("")
        assert out.startswith("READY "), out
        self.ready = json.loads(out[6:])
        return self.ready

    def end(self):
        self.proc.stdin.write("END\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "RELEASED"

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.work, ignore_errors=True)


def _needs_user(run: Run) -> None:
    if run.user is None:
        pytest.skip(f"no user of its own here: {run.user_line}")


def test_two_runs_at_once_are_two_users_and_cannot_reach_each_other(world):
    """Two runs at once (two processes), ABI 0, no namespace: each child a leased uid of its
    own (different), the gid 64290 they share, and neither can read the other's
    /proc/<pid>/environ (the caller's variables), open its /proc/<pid>/mem (its memory: the
    model, the images it was handed), read a file of its scratch or signal it.

    Before (the code of 73c7db0, one uid 64290 for every run; measured on this machine, as
    root): both children uid/gid 64290; A read B's environ (its secret in it), opened B's
    /proc/<pid>/mem for writing, read B's scratch/secret.txt and kill(B, 0) succeeded."""
    a, b = Run(world, "a"), Run(world, "b")
    try:
        _needs_user(a)
        pa, ua, ga, scratch_a = a.start()
        pb, ub, gb, scratch_b = b.start()
        got_a = json.loads(a.send(json.dumps([pb, scratch_b]))[4:])
        got_b = json.loads(b.send(json.dumps([pa, scratch_a]))[4:])
        ids = (ua, ga, ub, gb)
        if os.environ.get("CW_RUNS_CODE"):  # another tree's code: record what it got
            print("BEFORE", ids, got_a, got_b)
            return
        assert ua != ub and {ua, ub} <= set(layers.SANDBOX_UIDS), ids
        assert ga == gb == layers.SANDBOX_GID, ids
        assert [a.user[0], b.user[0]] == [ua, ub]
        for got in (got_a, got_b):
            assert got["environ"] == "EACCES", got
            assert got["mem"] == "EACCES", got
            assert got["scratch"] == "EACCES", got
            assert got["kill0"] == "EPERM", got
        a.end()
        b.end()
    finally:
        a.close()
        b.close()


def test_a_process_left_under_a_leased_uid_dies_at_the_next_lease(world):
    """A process a killed run left behind under its uid (here: a sleeper started as that uid,
    its run gone) is SIGKILLed when a run leases that uid; at the end of the run, every process
    of the uid dies again (a second sleeper, started during the run). The lease is narrowed to
    one uid (CHALLENGE_WELDING_SANDBOX_UID, the same lock and kill as a uid of the range), one
    outside the range so that no other run of this machine holds it."""
    uid = layers.SANDBOX_UIDS.stop + 10
    marks = ["--bounding-set=-all", "--no-new-privs"]  # what every process of a run bears
    left = subprocess.Popen(["setpriv", f"--reuid={uid}", f"--regid={layers.SANDBOX_GID}",
                             "--clear-groups", *marks, "sleep", "300"], start_new_session=True)
    # the same uid by chance (a systemd DynamicUser= service, a rootless container's
    # subordinate uid): not the sandbox's marks, never killed
    stranger = subprocess.Popen(["setpriv", f"--reuid={uid}", f"--regid={uid}",
                                 "--clear-groups", "sleep", "300"], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while uid not in _uids(left.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert left.pid in layers.processes_of(uid)
        env = {k: v for k, v in os.environ.items() if not k.startswith("CHALLENGE_WELDING_")}
        env.update(PYTHONPATH=str(CODE), CHALLENGE_WELDING_SANDBOX_UID=str(uid))
        code = ("import os, subprocess, sys, time\n"
                "from challenge_welding.ingestion.confine import layers\n"
                "print(layers.lease_uid(int(os.environ['CHALLENGE_WELDING_SANDBOX_UID'])), "
                "flush=True)\n"
                f"p = subprocess.Popen(['setpriv', '--reuid={uid}', "
                f"'--regid={layers.SANDBOX_GID}', '--clear-groups', '--bounding-set=-all', "
                "'--no-new-privs', 'sleep', '300'])\n"
                "while not layers.processes_of(" + str(uid) + "): time.sleep(0.01)\n"
                f"layers.unlease_uid({uid})\n"
                "print(p.wait(), flush=True)\n")
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        lease, second = done.stdout.split("\n")[:2]
        assert lease == f"({uid}, 'CHALLENGE_WELDING_SANDBOX_UID={uid}')"
        assert left.wait(timeout=10) == -signal.SIGKILL  # the leftover, at the lease
        assert second == str(-signal.SIGKILL)  # the run's own, at its end
        assert stranger.poll() is None  # alive through the lease and the end
        assert stranger.pid not in layers.processes_of(uid)
    finally:
        for proc in (left, stranger):
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _uids(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/status") as fh:
            return [int(x) for x in next(line for line in fh if line.startswith("Uid:")).split()[1:4]]
    except (OSError, StopIteration):
        return []


def test_one_runs_end_leaves_the_other_denied(world):
    """Two runs' Sandboxes on the same folders (two processes, as two containers sharing
    them); run A ends first (its release) while B's child still runs: the kernel, asked as
    B's user, still refuses reference_data; B's end then leaves no ACL at all.

    Before (73c7db0: each run's ``release`` wrote back the ACL it had found): after A's
    release, B's user (uid 64290) got "r-x" on reference_data (the labels, world-readable)."""
    ref = str(world / "reference_data")
    a, b = Run(world, "a"), Run(world, "b")
    try:
        _needs_user(a)
        assert b.user is not None
        assert layers.access_as(b.user, [ref]) == {ref: "---"}
        a.end()
        after_a = layers.access_as(b.user, [ref, ref + "/labels.csv"])
        if os.environ.get("CW_RUNS_CODE"):
            print("BEFORE", b.user, after_a)
            return
        assert after_a == {ref: "---", ref + "/labels.csv": "---"}
        # the entry is the sandbox's group's: another leased uid is refused the same
        other = (layers.SANDBOX_UIDS[7], layers.SANDBOX_GID)
        assert layers.access_as(other, [ref]) == {ref: "---"}
        b.end()
        assert layers.ACL_XATTR not in os.listxattr(ref)  # the last run out took it out
        assert layers.access_as(b.user, [ref]) == {ref: "r-x"}
    finally:
        a.close()
        b.close()


def test_deny_and_release_keep_the_other_entries(world):
    """The ACL others made stays: a named-user entry of the organiser's (uid 1234, r-x) and
    the mode survive a deny and its release; without another holder the group's entry goes."""
    folder = world / "ref"
    folder.mkdir(mode=0o750)
    os.chmod(folder, 0o750)
    fd0 = os.open(folder, os.O_RDONLY)
    layers._set_acl(fd0, [(layers.ACL_USER_OBJ, 7, layers.ACL_UNDEFINED),
                          (layers.ACL_USER, 5, 1234),
                          (layers.ACL_GROUP_OBJ, 5, layers.ACL_UNDEFINED),
                          (layers.ACL_MASK, 5, layers.ACL_UNDEFINED),
                          (layers.ACL_OTHER, 0, layers.ACL_UNDEFINED)])
    before = sorted(layers._acl(fd0))
    fd = layers.deny(str(folder))
    assert (layers.ACL_GROUP, 0, layers.SANDBOX_GID) in layers._acl(fd0)
    assert layers.access_as((1234, 1234), [folder]) == {str(folder): "r-x"}
    layers.release([(str(folder), fd)])
    assert sorted(layers._acl(fd0)) == before
    assert os.stat(folder).st_mode & 0o7777 == 0o750
    os.close(fd0)
    with pytest.raises(OSError) as err:
        os.fstat(fd)  # closed by release: its lock is gone with it
    assert err.value.errno == errno.EBADF


def test_leases_live_only_in_a_folder_of_roots_alone(tmp_path):
    """A lease folder someone else could have made or can write could hand one uid to two
    runs: refused when not root's, writable by others, a link, or under a folder another user
    may write (the sticky /tmp excepted: no one renames a folder of root's there)."""
    good = tmp_path / "uids"
    good.mkdir(mode=0o700)
    assert layers.root_only(str(good))
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 1234, 1234)
    assert not layers.root_only(str(theirs))
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    assert not layers.root_only(str(shared))
    (tmp_path / "link").symlink_to(good)
    assert not layers.root_only(str(tmp_path / "link"))
    below = shared / "uids"
    below.mkdir(mode=0o700)
    assert not layers.root_only(str(below))  # its parent is anyone's to rename it in
    assert layers.root_only("/tmp") is False  # 1777 itself: writable by others


def test_one_lease_per_process_reused(world):
    """Runs of one process (tests run many ingests in one) share its lease: the same uid for
    two Sandboxes made one after the other, and for two alive at once; the lock file stays held
    (another process cannot lease that uid) until the process ends."""
    code = ("from challenge_welding.ingestion.confine import layers\n"
            "a = layers.lease_uid()[0]\n"
            "b = layers.lease_uid()[0]\n"
            "layers.unlease_uid(a)\n"
            "layers.unlease_uid(b)\n"
            "c = layers.lease_uid()[0]\n"
            "import fcntl, os\n"
            "fd = os.open(f'/run/challenge-welding/uids/{a}.lock', os.O_RDWR)\n"
            "try:\n"
            "    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
            "    held = False\n"
            "except BlockingIOError:\n"
            "    held = True\n"
            "print(a == b == c, a in layers.SANDBOX_UIDS, held)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHALLENGE_WELDING_")}
    env["PYTHONPATH"] = str(CODE)
    if layers.lease_folder() != "/run/challenge-welding/uids":
        pytest.skip("the leases are not in /run here")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.stdout.split() == ["True", "True", "True"], done.stderr
