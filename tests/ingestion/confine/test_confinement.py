"""The layers beneath every outcome (issue 29): capabilities, namespaces, the files, the network.

Real submissions through the real `challenge-welding ingest` (a subprocess: an attack may
kill the ingestion), at forced Landlock ABI 0, 3, 5 and the kernel's, with the namespaces
the kernel lends or none (``CHALLENGE_WELDING_NAMESPACES=0``: what a Codabench worker lends),
as root and as an unprivileged user (``setpriv``). The submission's load_model() runs every
attack and prints one line per attack; each configuration's results go to
``$CW_CONFINE_RESULTS`` (default: tests/ingestion/confine/confinement_results/) as JSON, from which
``scripts/integrity_table.py`` writes the table in docs/integrity.md.

Proved live against main first (``CW_CONFINE_CODE=../main/challenge-welding`` runs main's
code and only records; Linux 6.18, root, Landlock ABI 7), then on this branch:

=====================  ====================================  ================================
attack                 main (before), root                   this branch (after)
=====================  ====================================  ================================
CapEff / CapBnd        1fffef7ffff / 1fffef7ffff             0 / 0 (root, or a user namespace)
sethostname            done (same name written back)         EPERM
adjtimex(ADJ_TICK)     done (same tick written back)         EPERM
reboot, wrong magic    EINVAL (capability check passed)      EPERM
mknod char device      done (in its scratch), every ABI      EPERM
read reference_data    read at ABI 0                         ENOENT (mount ns) or EACCES
write the output       written at ABI 0                      ENOENT (mount ns) or EACCES
F_SETOWN+SIGKILL       ingestion killed (-9) at ABI 0, 3, 5  ESRCH (pid ns); not delivered
                       (ABI 7: not delivered, scoped)        (a user of its own)
sched_setaffinity,     done on the ingestion's threads,      ESRCH (pid ns); EPERM (a user
setpriority            every ABI                             of its own, or uid 0 without
                                                             CAP_SYS_NICE on this kernel)
/proc/<ing.>/environ   read, every ABI                       ESRCH (pid ns) or EACCES
TCP 127.0.0.1          connected at ABI 0 and 3              refused (net ns; ABI >= 4;
                                                             seccomp's socket() rule)
UDP 127.0.0.1          datagram received at every ABI        refused (net ns; seccomp's
                                                             socket() rule), every ABI
Unix socket file       connected at ABI 0, 3, 5, 7           ENOENT (mount ns); connected
                                                             without namespaces
other processes        every process of the machine seen     its init and itself (pid ns)
=====================  ====================================  ================================

The same attacks run in setup.py at install (``install`` in the results). Against the code
before the user of its own at install (317e1dc; ``CW_CONFINE_LABEL=before-user``), root:
setup.py ran as uid 0 everywhere; without namespaces (the system's Python, ``-sys``) the
child was uid 0 too, and a root-owned 0600 socket in /tmp was connected at ABI 0, 3 and 7, at
install and at run; at ABI 0 (``--unsafe-unconfined``) setup.py and the component read
reference_data, wrote the output folder, uv's cache and the environments' cache. Now setup.py
and the child are a uid of their own (leased for the run from 64290..65289; gid 64290) wherever
root may change user and the interpreter is within that uid's reach (with a mount namespace always): root's socket EACCES, both caches refused at
every ABI, and at ABI 0 without namespaces the files confined by the kernel's permission
checks (an ACL entry denies the sandbox's group 64290 input, reference and output).

(Exact results, per configuration: the JSON files and docs/integrity.md's generated table.)
Where no namespace is lent (``CHALLENGE_WELDING_NAMESPACES=0``) the capabilities stay 0,
Landlock and seccomp hold what they hold, and at ABI 0 ``ingest`` refuses to start unless
``--unsafe-unconfined`` (tested).
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from challenge_welding.ingestion.confine import layers, sandbox

from ingestion_helpers import GOOD, SETUP_PY, make_reference, make_submission, make_input_data

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")
REPO = Path(__file__).resolve().parents[3]
CODE = Path(os.environ.get("CW_CONFINE_CODE") or REPO / "challenge-welding")
BASELINE = bool(os.environ.get("CW_CONFINE_CODE"))  # another tree's code: record, no assertion
LABEL = os.environ.get("CW_CONFINE_LABEL", "main")  # that tree's name in the results
RESULTS = Path(os.environ.get("CW_CONFINE_RESULTS")
               or Path(__file__).parent / "confinement_results")
KERNEL_ABI = sandbox.kernel_abi()
NOBODY = 65534
CONFIG = REPO / "challenge-welding" / "challenge_welding" / "scoring" / "default_scoring.yaml"

ATTACKS = r'''
import ctypes, errno, fcntl, json, os, signal, socket, struct, sys
from pathlib import Path
T = json.loads((Path(__file__).parent / "targets.json").read_text())
libc = ctypes.CDLL(None, use_errno=True)
R = {}


def res(name, fn):
    try:
        out = fn()
        R[name] = "done" if out is None else out
    except OSError as e:
        R[name] = "refused " + (errno.errorcode.get(e.errno, str(e.errno)))
    except Exception as e:  # any other failure: name it, go on
        R[name] = "error " + type(e).__name__


def sys_call(nr, *args):
    rc = libc.syscall(nr, *args)
    if rc < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return rc


def caps():
    st = dict(l.split(":\t") for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
    return {k: st[k].strip() for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")}


def adjtimex_same_tick():
    buf = ctypes.create_string_buffer(512)
    sys_call(159, buf)                      # read (modes 0)
    tick = struct.unpack_from("=q", buf, 88)[0]
    struct.pack_into("=I", buf, 0, 0x4000)  # ADJ_TICK, the same tick written back
    struct.pack_into("=q", buf, 88, tick)
    sys_call(159, buf)


def reboot_wrong_magic():  # never the right magic numbers: EPERM or EINVAL, nothing else
    sys_call(169, 0x1234, 0x5678, 0, None)


def target():  # the ingestion: the parent, or any process running `challenge_welding ingest`
    def ingestion(pid):
        try:
            return b"\0ingest\0" in open(f"/proc/{pid}/cmdline", "rb").read()
        except OSError:
            return False
    # in its own pid namespace, pid 1 is the namespace's init: a fork of the ingestion (same
    # command line) that only waits, in the namespace: not the ingestion
    init = 1 if os.getpid() == 2 else None
    for pid in [os.getppid()] + [int(p) for p in os.listdir("/proc") if p.isdigit()]:
        if pid and pid not in (os.getpid(), init) and ingestion(pid):
            return pid
    raise OSError(errno.ESRCH, "no ingestion in sight")


def threads():
    return [int(t) for t in os.listdir(f"/proc/{target()}/task")]


def affinity():
    for tid in threads():
        os.sched_setaffinity(tid, os.sched_getaffinity(tid))  # the same mask: harmless


def nice():
    for tid in threads():
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid))


def tcp():
    with socket.create_connection(("127.0.0.1", T["tcp"]), timeout=2) as s:
        try:
            s.sendall(b"leak")
        except OSError:
            pass  # connected: the listener may have closed already
        return "connected"


def udp():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(b"leak", ("127.0.0.1", T["udp"]))


def unix():
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(2)
        s.connect(T["unix"])
        try:
            s.sendall(b"leak")
        except OSError:
            pass
        return "connected"


def write_output():
    with open(os.path.join(T["output"], "planted.txt"), "w") as fh:
        fh.write("planted")


def unix_root():  # a root-owned 0600 socket file in /tmp (as Docker's, Podman's are)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(2)
        s.connect(T["unix_root"])
        return "connected"


def plant(folder):  # a file in a cache later runs trust (uv's wheels, the environments)
    def go():
        with open(os.path.join(folder, f"poison-{os.getpid()}"), "w") as fh:
            fh.write("poison")
    return go


def processes():
    pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    return {"count": len(pids), "sees_test": T["test_pid"] in pids}


def setown_probe():  # SIGURG (ignored by default): does fcntl let it aim at our pid?
    r, w = os.pipe()
    fcntl.fcntl(r, fcntl.F_SETOWN, target())
    return "set"


res("ids", lambda: [os.getuid(), os.getgid(), os.getgroups()])
res("caps", caps)
res("sethostname", lambda: socket.sethostname(socket.gethostname()))
res("adjtimex", adjtimex_same_tick)
res("reboot", reboot_wrong_magic)
res("mknod", lambda: os.mknod(os.path.join(os.environ["HOME"], "null2"), 0o20600, os.makedev(1, 3)))
res("read_reference", lambda: len(open(T["reference"], "rb").read()))
res("write_output", write_output)
res("kill0_ingestion", lambda: os.kill(target(), 0))
res("environ_ingestion", lambda: len(open(f"/proc/{target()}/environ", "rb").read()))
res("sched_setaffinity", affinity)
res("setpriority", nice)
res("tcp", tcp)
res("udp", udp)
res("unix", unix)
res("unix_root", unix_root)
res("write_uv_cache", plant(T["uv_cache"]))
res("write_env_cache", plant(T["env_cache"]))
res("processes", processes)
res("setown", setown_probe)
if T.get("lethal"):  # F_SETOWN + F_SETSIG(SIGKILL) + O_ASYNC: a write signals the owner
    def lethal():
        r, w = os.pipe()
        fcntl.fcntl(r, fcntl.F_SETOWN, target())
        fcntl.fcntl(r, 10, signal.SIGKILL)  # F_SETSIG
        fcntl.fcntl(r, fcntl.F_SETFL, fcntl.fcntl(r, fcntl.F_GETFL) | os.O_ASYNC)
        os.write(w, b"x")
    res("setown_sigkill", lethal)
if __name__ == "install":  # run by setup.py: kept beside the package, installed with it
    (Path(__file__).parent / "install_attacks.json").write_text(json.dumps(R))
else:
    inst = Path(__file__).parent / "install_attacks.json"
    R["install"] = json.loads(inst.read_text()) if inst.exists() else None
    print("ATTACKS " + json.dumps(R), flush=True)
'''
# setup.py runs the same attacks at install (the offline build, in the sandbox)
SETUP_ATTACKS = ('import runpy\n'
                 'runpy.run_path("challenge_solution/attacks.py", run_name="install")\n'
                 + SETUP_PY)


def component() -> str:
    return "from challenge_solution import attacks  # noqa: F401 (the attacks run at import)\n" \
        + GOOD.replace("        self.loaded = True", "        self.loaded = True  # attacks ran at import")


class Listeners:
    """A TCP listener, a UDP socket and a pathname Unix socket of the test's, on 127.0.0.1
    only; counts what reaches them."""

    def __init__(self, folder: Path):
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.udp.settimeout(0.2)
        self.path = str(folder / "evaluator.sock")
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind(self.path)
        os.chmod(self.path, 0o777)  # reachable by any user: only a layer may keep it out
        self.unix.listen()
        # root's own: 0600 in a folder of /tmp anyone may traverse (a Docker/Podman socket)
        self.root_dir = tempfile.mkdtemp(prefix="cw-confine-sock-")
        os.chmod(self.root_dir, 0o755)
        self.root_path = os.path.join(self.root_dir, "root.sock")
        self.unix_root = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix_root.bind(self.root_path)
        os.chmod(self.root_path, 0o600)
        self.unix_root.listen()
        self.got = {"tcp": 0, "udp": 0, "unix": 0, "unix_root": 0}
        self.stop = threading.Event()
        for name, sock in (("tcp", self.tcp), ("unix", self.unix), ("unix_root", self.unix_root)):
            sock.settimeout(0.2)
            threading.Thread(target=self._accept, args=(name, sock), daemon=True).start()
        threading.Thread(target=self._recv, daemon=True).start()

    def _accept(self, name, sock):
        while not self.stop.is_set():
            try:
                conn, _ = sock.accept()
                self.got[name] += 1
                conn.close()
            except OSError:
                pass

    def _recv(self):
        while not self.stop.is_set():
            try:
                self.udp.recv(64)
                self.got["udp"] += 1
            except OSError:
                pass

    def ports(self) -> dict:
        return {"tcp": self.tcp.getsockname()[1], "udp": self.udp.getsockname()[1],
                "unix": self.path, "unix_root": self.root_path}

    def close(self):
        self.stop.set()
        for s in (self.tcp, self.udp, self.unix, self.unix_root):
            s.close()
        shutil.rmtree(self.root_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def world():
    """A folder every user may traverse (the non-root runs): input data, reference data."""
    root = Path(tempfile.mkdtemp(prefix="cw-confine-"))
    os.chmod(root, 0o755)
    make_input_data(root / "input_data")
    make_reference(root / "reference_data", CONFIG)
    for dirpath, dirs, files in os.walk(root):
        for name in dirs:
            os.chmod(os.path.join(dirpath, name), 0o755)
        for name in files:
            os.chmod(os.path.join(dirpath, name), 0o644)  # world-readable, as organisers' are
    yield root
    shutil.rmtree(root, ignore_errors=True)


def run_ingest(world: Path, tag: str, abi: str | None, namespaces, user: int | None,
               lethal: bool = False, unsafe: bool = False, keep: bool = True) -> dict:
    """One real `ingest` of the attacking submission; {"exit", "attacks", "got", "report"}
    (``keep``: its results written for the table)."""
    case = world / tag
    shutil.rmtree(case, ignore_errors=True)
    case.mkdir(mode=0o777)
    os.chmod(case, 0o777)
    out = case / "pred"
    out.mkdir()
    listeners = Listeners(case)
    ref = next((world / "reference_data").glob("*.parquet"))
    # the caches later runs trust: uv's (the evaluator's uv downloads there) and the
    # environments'; made before the run, as the evaluator's user
    cache = world / f"cache-{user or 0}"
    for folder in (cache / "uv", cache / "challenge-welding" / "envs"):
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("poison-*"):  # an earlier run's (this one's are counted)
            old.unlink()
    targets = {**listeners.ports(), "reference": str(ref), "output": str(out),
               "test_pid": os.getpid(), "lethal": lethal, "uv_cache": str(cache / "uv"),
               "env_cache": str(cache / "challenge-welding" / "envs")}
    sub = make_submission(case / "sub", component(), setup=SETUP_ATTACKS,
                          manifest="include challenge_solution/targets.json\n"
                                   "include challenge_solution/install_attacks.json\n",
                          extra={"challenge_solution/targets.json": json.dumps(targets),
                                 "challenge_solution/attacks.py": ATTACKS})
    home = case / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHALLENGE_WELDING_", "PYTEST"))}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(cache), PYTHONPATH=str(CODE))
    if abi is not None:
        env[sandbox.ABI_MAX_ENV] = abi
    if namespaces is not True:  # False: none; a name: only that one ("mount")
        env[layers.NAMESPACES_ENV] = namespaces or "0"
    cmd = [sys.executable, "-m", "challenge_welding", "ingest", "--submission", str(sub),
           "--input-data", str(world / "input_data"), "--output", str(out), "--no-progress",
           "--sets", "performance"] + (["--unsafe-unconfined"] if unsafe else [])
    if user is not None or tag.endswith("-sys"):
        # this interpreter may live where another user cannot reach it (pyenv under /root):
        # the system's own of the same version, with this environment's packages
        cmd[0] = USER_PYTHON
        env["PYTHONPATH"] = os.pathsep.join([str(CODE), *SITE])
        env["PATH"] = os.pathsep.join([str(Path(sys.prefix) / "bin"), env.get("PATH", "")])
    if user is not None:
        for path in (case, home, out, *(p for p in cache.rglob("*") if p.is_dir()), cache):
            os.chown(path, user, user)
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups",
               "--inh-caps=-all", *cmd]
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900,
                              cwd=str(case))
    finally:
        listeners.close()
    log = out / "submission_output.log"
    text = log.read_text(errors="replace") if log.exists() else done.stdout + done.stderr
    line = [x for x in text.splitlines() if x.startswith("ATTACKS ")]
    attacks = json.loads(line[-1][8:]) if line else {}
    report = json.loads((out / "ingestion.json").read_text()) \
        if (out / "ingestion.json").exists() else None
    result = {"exit": done.returncode, "attacks": attacks, "got": dict(listeners.got),
              "planted": (out / "planted.txt").exists(), "report": report,
              "stderr": done.stderr[-3000:],
              "poisoned": sorted(p.name for p in (cache / "uv").glob("poison-*"))
              + sorted(p.name for p in (cache / "challenge-welding" / "envs").glob("poison-*")),
              "left_by_sandbox_user": left_behind(world),
              "acl_left": [str(p) for p in (world / "input_data", world / "reference_data", out)
                           if "system.posix_acl_access" in os.listxattr(p)]}
    if keep:
        record(tag, abi, namespaces, user, result)
    return result


def record(tag, abi, namespaces, user, result):
    RESULTS.mkdir(parents=True, exist_ok=True)
    layers_held = (result["report"] or {}).get("sandbox", {}).get("layers")
    data = {"tag": tag, "code": LABEL if BASELINE else "branch", "abi": abi or str(KERNEL_ABI),
            "namespaces": namespaces, "user": "root" if user is None else f"uid {user}",
            "exit": result["exit"], "attacks": result["attacks"], "received": result["got"],
            "output_planted": result["planted"], "layers": layers_held,
            "caches_poisoned": result["poisoned"],
            "stderr_tail": result["stderr"].splitlines()[-3:]}
    name = (f"{LABEL}-" if BASELINE else "") + tag + ".json"
    (RESULTS / name).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def left_behind(world: Path) -> list[str]:
    """Files the sandbox's user still owns after the run, in the test's folders (the run's
    own, the caches); the run's temporary folders are gone (removed by the ingestion)."""
    out = []
    for top in (world,):
        for dirpath, dirs, files in os.walk(top):
            for name in dirs + files:
                path = os.path.join(dirpath, name)
                try:
                    if os.lstat(path).st_uid in layers.SANDBOX_UIDS:
                        out.append(path)
                except OSError:
                    pass
    return out[:20]


ZERO = "0000000000000000"
CONFIGS = [  # (tag, abi cap, namespaces lent (True: all, False: none, "mount"), user)
    ("root-abi0-ns", "0", True, None), ("root-abi3-ns", "3", True, None),
    ("root-abi5-ns", "5", True, None), ("root-abiK-ns", None, True, None),
    ("root-abi0-mount", "0", "mount", None), ("root-abi5-mount", "5", "mount", None),
    ("root-abi3-nons", "3", False, None), ("root-abiK-nons", None, False, None),
    ("user-abi0-ns", "0", True, NOBODY), ("user-abiK-ns", None, True, NOBODY),
    ("user-abiK-nons", None, False, NOBODY),
    # root without namespaces, the system's Python (another user can reach it): a user of its
    # own where the kernel's permission checks alone keep our folders (ABI 0: --unsafe-unconfined
    # given, the run must say the files are confined all the same)
    ("root-abi0-nons-sys", "0", False, None), ("root-abi3-nons-sys", "3", False, None),
    ("root-abiK-nons-sys", None, False, None),
]


USER_PYTHON = f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}"
SITE = [p for p in sys.path if p.endswith("site-packages") and p.startswith(sys.prefix)]


def _can_run_as(uid: int) -> bool:
    if os.geteuid() != 0 or not shutil.which("setpriv") or not os.path.exists(USER_PYTHON):
        return False
    probe = subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                            USER_PYTHON, "-c", "import challenge_welding.ingestion.run.ingest"],
                           env={**os.environ, "PYTHONPATH": os.pathsep.join([str(CODE), *SITE])},
                           capture_output=True, cwd="/")
    return probe.returncode == 0


@pytest.mark.parametrize("tag,abi,namespaces,user", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_attacks_per_layer(world, tag, abi, namespaces, user):
    if abi is not None and int(abi) > KERNEL_ABI:
        pytest.skip(f"kernel has Landlock ABI {KERNEL_ABI}")
    if user is not None and not _can_run_as(user):
        pytest.skip("cannot run as another user here (needs root and setpriv)")
    if user is None and os.geteuid() != 0:
        pytest.skip("the root configurations need root")
    r = run_ingest(world, tag, abi, namespaces, user, unsafe=tag == "root-abi0-nons-sys")
    if BASELINE:
        return
    a = r["attacks"]
    assert r["exit"] == 0, r["stderr"]
    assert r["report"]["status"] == "ok"
    # capabilities: none, ever; privileged calls refused by the capability check itself
    for key in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
        assert a["caps"][key] == ZERO, a["caps"]
    if user is None or namespaces:  # a non-root process without a user namespace cannot
        assert a["caps"]["CapBnd"] == ZERO, a["caps"]  # empty it (inert: no_new_privs)
    for name in ("sethostname", "adjtimex", "reboot", "mknod"):
        assert a[name] == "refused EPERM", (name, a[name])
    # files: reference data unread, output unwritten, at every ABI
    assert a["read_reference"].startswith("refused"), a["read_reference"]
    assert a["write_output"].startswith("refused") and not r["planted"]
    # nothing reached the test's sockets on 127.0.0.1
    # TCP and UDP: held at every ABI, with or without namespaces (a network namespace, Landlock
    # ABI >= 4 for TCP, and the seccomp filter's socket() rule for both); a socket file of
    # ours: only a mount namespace (no Landlock ABI governs connect(2) on a path)
    mount = namespaces in (True, "mount") and layers.probe()["mount"]
    assert r["got"]["tcp"] == 0 and r["got"]["udp"] == 0, r["got"]
    # the socket open to all (0777): reached at install (setup.py) and run where no mount ns
    assert (r["got"]["unix"] == 0) is mount, r["got"]
    assert a["tcp"].startswith("refused") and a["unix"].startswith("refused") is mount
    held = r["report"]["sandbox"]["layers"]
    assert held["capabilities"].startswith("none") and held["landlock_abi"] == int(abi or KERNEL_ABI)
    may_switch = user is None and layers.sandbox_user(True)[0] is not None
    # a user of its own at install and run: with a mount namespace, or without one where the
    # kernel's permission checks give it the interpreter and nothing of ours (-sys: the
    # system's Python; pyenv's, under /root (0700), is out of its reach: the evaluator's user)
    own_user = may_switch and (bool(namespaces) or tag.endswith("-sys"))
    inst = a["install"]
    assert inst is not None, "setup.py's attacks did not run"
    for key in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
        assert inst["caps"][key] == ZERO, inst["caps"]
    for name in ("sethostname", "adjtimex", "reboot", "mknod"):
        assert inst[name] == "refused EPERM", (name, inst[name])
    # a user of its own: the uid the run leased (the same at install and run), the shared gid
    uid = a["ids"][0] if own_user else (0 if user is None else user)
    gid = layers.SANDBOX_GID if own_user else uid
    assert not own_user or uid in layers.SANDBOX_UIDS, a["ids"]
    for seen in (a, inst):  # the user of import/load_model/predict, and of setup.py
        assert seen["ids"] == [uid, gid, []], (seen["ids"], held["user"])
        assert seen["read_reference"].startswith("refused"), seen["read_reference"]
        assert seen["write_output"].startswith("refused"), seen["write_output"]
        # the caches later runs trust (uv's wheels, the environments): never written
        assert seen["write_uv_cache"].startswith("refused"), seen["write_uv_cache"]
        assert seen["write_env_cache"].startswith("refused"), seen["write_env_cache"]
        # root's 0600 socket in /tmp: hidden (mount ns) or refused (another user), else reached
        assert seen["unix_root"].startswith("refused") is (mount or uid != 0), seen["unix_root"]
    assert (r["got"]["unix_root"] == 0) is (mount or uid != 0), r["got"]
    assert r["poisoned"] == [] and r["left_by_sandbox_user"] == []
    assert r["acl_left"] == []  # the entries made for the run are taken back
    if own_user:  # a user of its own: the kernel's same-user checks refuse by themselves
        assert held["user"].startswith(f"uid {uid} (leased from 64290..65289), gid 64290, "
                                       "no groups (install and run"), held["user"]
        assert r["report"]["sandbox"]["install"]["user"].startswith(f"uid {uid}, gid 64290")
    elif may_switch:
        assert held["user"].startswith("same user") and "out of reach of uid" in held["user"]
    if own_user and not namespaces:  # no namespace: the kernel's permission checks alone
        assert held["files_confined"] and not r["report"]["sandbox"]["unsafe_unconfined"]
        for seen in (a, inst):
            for name in ("kill0_ingestion", "sched_setaffinity", "setpriority", "setown"):
                assert seen[name] == "refused EPERM", (name, seen[name])
            for name in ("environ_ingestion", "read_reference", "write_output", "unix_root"):
                assert seen[name] == "refused EACCES", (name, seen[name])
    if own_user and namespaces == "mount":  # the pid namespace off: our pids are names there
        assert a["processes"]["sees_test"] is True
        for name in ("kill0_ingestion", "sched_setaffinity", "setpriority"):
            assert a[name] == "refused EPERM", (name, a[name])
        assert a["environ_ingestion"] == "refused EACCES"
    if namespaces is True and layers.probe()["pid"]:
        assert a["processes"] == {"count": 2, "sees_test": False}  # its init and itself
        for name in ("kill0_ingestion", "environ_ingestion", "sched_setaffinity", "setpriority",
                     "setown"):
            assert a[name] == "refused ESRCH", (name, a[name])
        assert a["udp"].startswith("refused") or r["got"]["udp"] == 0
        assert set(held["namespaces"]) >= {"mount", "ipc", "net", "pid"}
    if user is not None and namespaces is False:  # a non-root evaluator, no namespace: the
        # child is the evaluator's user; only the seccomp filter (guard) may refuse these
        assert a["environ_ingestion"] == "refused EACCES"  # the ingestion is non-dumpable


SETOWN = [("0", True), ("3", True), ("5", True), (None, True), ("0", "mount"), ("5", "mount")]


@pytest.mark.parametrize("abi,namespaces", SETOWN)
def test_setown_sigkill_cannot_kill_the_ingestion(world, abi, namespaces):
    """F_SETOWN(ingestion) + F_SETSIG(SIGKILL) + O_ASYNC: on main it killed the ingestion (-9,
    no ingestion.json) at ABI 0, 3, 5 and 7. Here the child has no pid of ours to aim at (pid
    namespace) or, the pid namespace off, is another user: the kernel does not deliver SIGIO
    across users (sigio_perm), whatever the seccomp filter says."""
    if abi is not None and int(abi) > KERNEL_ABI:
        pytest.skip(f"kernel has Landlock ABI {KERNEL_ABI}")
    if os.geteuid() != 0:
        pytest.skip("root configuration")
    tag = f"root-abi{abi or 'K'}-{'ns' if namespaces is True else namespaces}-setown"
    r = run_ingest(world, tag, abi, namespaces, None, lethal=True)
    if BASELINE:
        return
    assert r["exit"] == 0, r["stderr"]
    assert r["report"]["status"] == "ok"
    if namespaces is True and layers.probe()["pid"]:
        assert r["attacks"]["setown_sigkill"] == "refused ESRCH"


def test_refuses_to_run_unconfined_without_the_unsafe_option(world):
    """ABI 0 and no namespace (a Codabench worker on a kernel without Landlock): one line,
    exit 2, no ingestion.json; with --unsafe-unconfined it runs and ingestion.json says so."""
    if BASELINE or os.geteuid() != 0:
        pytest.skip("this branch's option; root configuration")
    r = run_ingest(world, "root-abi0-nons-refused", "0", False, None)
    assert r["exit"] == 2 and r["report"] is None
    err = [x for x in r["stderr"].splitlines() if x.strip()]
    assert len(err) == 1 and "--unsafe-unconfined" in err[0] and "no layer confines" in err[0], err
    assert r["attacks"] == {}  # nothing of the submission ran
    r = run_ingest(world, "root-abi0-nons-unsafe", "0", False, None, unsafe=True)
    assert r["exit"] == 0 and r["report"]["sandbox"]["unsafe_unconfined"] is True
    assert r["report"]["sandbox"]["layers"]["files_confined"] is False
    # the capabilities are still gone; the files are not confined (that is what it says)
    assert r["attacks"]["caps"]["CapEff"] == ZERO and r["attacks"]["reboot"] == "refused EPERM"


def test_two_ingests_at_once_are_two_users(world):
    """Two real `ingest` runs at once on the same input and reference data, as root at forced
    ABI 0 without namespaces (``docker run`` of the image as root: CAP_SETUID, no mount
    namespace), the system's Python: each a uid of its own, leased from the range (before,
    73c7db0: both 64290), the gid 64290 they share; each refused the reference data and the
    output folder for its whole run (the deny entry one run's end would wipe: test_runs_apart),
    and no ACL left once both are done."""
    if BASELINE or os.geteuid() != 0 or not os.path.exists(USER_PYTHON):
        pytest.skip("this branch's lease; root configuration, the system's Python")
    if layers.sandbox_user(True)[0] is None:
        pytest.skip("root may not change user here")
    out = {}
    runs = [threading.Thread(target=lambda t=t: out.setdefault(t, run_ingest(
        world, f"root-abi0-nons-{t}-sys", "0", False, None, keep=False))) for t in "ab"]
    for t in runs:
        t.start()
    for t in runs:
        t.join()
    a, b = out["a"], out["b"]
    for r in (a, b):
        assert r["exit"] == 0 and r["report"]["status"] == "ok", r["stderr"]
        assert r["report"]["sandbox"]["layers"]["files_confined"]
        for seen in (r["attacks"], r["attacks"]["install"]):
            assert seen["read_reference"] == "refused EACCES"
            assert seen["write_output"] == "refused EACCES"
        assert r["attacks"]["ids"] == r["attacks"]["install"]["ids"]
    ua, ub = a["attacks"]["ids"][0], b["attacks"]["ids"][0]
    assert ua != ub and {ua, ub} <= set(layers.SANDBOX_UIDS), (ua, ub)
    assert a["attacks"]["ids"][1:] == b["attacks"]["ids"][1:] == [layers.SANDBOX_GID, []]
    for folder in (world / "input_data", world / "reference_data"):
        assert layers.ACL_XATTR not in os.listxattr(folder)
