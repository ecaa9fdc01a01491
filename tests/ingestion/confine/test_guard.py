"""The last lines of defence (issue 29): the seccomp rules, /proc, inert child text, the clock,
and two runs on one machine.

Every attack is a real submission installed and run by the real `ingest` command in a
subprocess (an attack that works kills the ingestion), at each Landlock ABI the tests can
force (CHALLENGE_WELDING_LANDLOCK_ABI_MAX 0, 3, 5 and the kernel's own). Each was first run
against main at ca5213d (the seccomp filter of signal calls and a snapshot of protected
pids); what it got there is written beside it.
"""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from challenge_welding.ingestion.confine import layers, sandbox

from ingestion_helpers import GOOD, make_submission
from test_sandbox import CLI, submission

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")
KERNEL = sandbox.kernel_abi()
# numbers of the calls the attacks make through ctypes (x86_64, aarch64)
NR = {"x86_64": {"tgkill": 234, "ioprio_set": 251, "process_vm_readv": 310},
      "aarch64": {"tgkill": 131, "ioprio_set": 30, "process_vm_readv": 270}}.get(
          __import__("platform").machine(), {})
ABIS = [a for a in ("0", "3", "5", str(KERNEL)) if int(a) <= KERNEL] or ["0"]


def ingest_cli(sub, input_data, pred, env_cache, abi, timeout=600, extra=()):
    """``ingest`` where no namespace is lent (what a Codabench worker lends): these are the last
    lines, behind the pid and network namespaces (tests/ingestion/confine/test_confinement.py), where
    the ingestion's pids are not even names. At ABI 0 nothing then confines files, so the run
    needs --unsafe-unconfined to start."""
    env = {**os.environ, sandbox.ABI_MAX_ENV: abi, layers.NAMESPACES_ENV: "0"}
    unsafe = ("--unsafe-unconfined",) if abi == "0" else ()
    try:
        return subprocess.run([*CLI, "ingest", "--submission", str(sub), "--input-data",
                               str(input_data), "--output", str(pred), "--env-cache",
                               str(env_cache), "--no-progress", *unsafe, *extra], env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail("the ingestion never finished (stopped by the submission)")


def attack_lines(pred) -> list[str]:
    log = Path(pred) / "submission_output.log"
    return [line[7:] for line in log.read_text().splitlines() if line.startswith("ATTACK ")]


def assert_ran_ok(done, pred, abi):
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])
    report = json.loads((Path(pred) / "ingestion.json").read_text())
    assert report["status"] == "ok", report["errors"]
    assert report["sandbox"]["landlock_abi"] == (int(abi) or None)
    return report


# Each step logs "<name> ok" or "<name> <errno>".
STEP = '''
def step(name, fn):
    try:
        fn()
        log(name, "ok")
    except OSError as e:
        log(name, e.errno)
'''

# main: the ingestion was killed (exit -9, no ingestion.json) at ABI 0, 3 and 5: F_SETOWN on a
# pipe with the ingestion's pid, F_SETSIG SIGKILL, O_ASYNC, one byte written. At ABI 7
# Landlock's signal scoping kept the SIGIO from it (the fcntl calls succeeded).
SIGIO = STEP + '''
import fcntl, socket, struct
ppid = os.getppid()
r, w = os.pipe()
step("F_SETOWN_EX", lambda: fcntl.fcntl(r, 15, struct.pack("ii", 1, ppid)))
step("F_SETOWN", lambda: fcntl.fcntl(r, fcntl.F_SETOWN, ppid))
step("F_SETSIG", lambda: fcntl.fcntl(r, 10, signal.SIGKILL))
step("O_ASYNC", lambda: fcntl.fcntl(r, fcntl.F_SETFL, fcntl.fcntl(r, fcntl.F_GETFL) | os.O_ASYNC))
os.write(w, b"x")
a, b = socket.socketpair()
step("FIOSETOWN", lambda: fcntl.ioctl(a, 0x8901, struct.pack("i", ppid)))
step("SIOCSPGRP", lambda: fcntl.ioctl(a, 0x8902, struct.pack("i", ppid)))
step("F_SETSIG", lambda: fcntl.fcntl(a, 10, signal.SIGKILL))
step("O_ASYNC", lambda: fcntl.fcntl(a, fcntl.F_SETFL, fcntl.fcntl(a, fcntl.F_GETFL) | os.O_ASYNC))
b.send(b"x")
time.sleep(0.5)
step("F_SETOWN own group", lambda: fcntl.fcntl(r, fcntl.F_SETOWN, -os.getpgid(0)))
step("F_SETOWN self", lambda: fcntl.fcntl(r, fcntl.F_SETOWN, os.getpid()))
log("still here")
'''


@pytest.mark.parametrize("abi", ABIS)
def test_sigio_cannot_kill_the_ingestion(tmp_path, input_data, env_cache, abi):
    pred = tmp_path / "pred"
    done = ingest_cli(submission(tmp_path, SIGIO), input_data, pred, env_cache, abi)
    assert_ran_ok(done, pred, abi)
    got = attack_lines(pred)
    for name in ("F_SETOWN_EX", "F_SETOWN", "F_SETSIG", "FIOSETOWN", "SIOCSPGRP"):
        assert f"{name} 1" in got and f"{name} ok" not in got, (name, got)  # EPERM, each time
    # its own group and itself stay allowed (what O_ASYNC users need)
    assert "F_SETOWN own group ok" in got and "F_SETOWN self ok" in got, got


# main: at ABI 0, 3 and 5 kill() on the id of the ingestion's output-drain or watchdog thread
# (started after the child, not in the snapshot of protected ids) killed the ingestion (exit
# -9); at ABI 7 scoping refused it (EPERM).
THREADS = STEP + '''
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
ppid = os.getppid()
tids = sorted(int(t) for t in os.listdir(f"/proc/{ppid}/task") if int(t) != ppid)
log("threads", len(tids))


def tgkill(tgid, tid, sig):
    if libc.syscall(sandbox_nr["tgkill"], tgid, tid, sig) != 0:
        raise OSError(ctypes.get_errno(), "tgkill")


for tid in tids:
    step("tgkill", lambda: tgkill(ppid, tid, signal.SIGSTOP))
    step("kill", lambda: os.kill(tid, signal.SIGKILL))
step("kill self", lambda: os.kill(os.getpid(), 0))
step("kill own group", lambda: os.kill(0, 0))
signal.signal(signal.SIGUSR1, lambda *a: log("handled SIGUSR1"))
step("raise", lambda: signal.raise_signal(signal.SIGUSR1))  # tgkill(self, own thread)
'''


def _with_nr(body: str) -> str:
    return f"sandbox_nr = {NR!r}\n" + body


@pytest.mark.parametrize("abi", ABIS)
def test_no_thread_of_the_ingestion_can_be_signalled(tmp_path, input_data, env_cache, abi):
    pred = tmp_path / "pred"
    done = ingest_cli(submission(tmp_path, _with_nr(THREADS)), input_data, pred, env_cache, abi)
    assert_ran_ok(done, pred, abi)
    got = attack_lines(pred)
    n = int(next(line for line in got if line.startswith("threads")).split()[1])
    assert n >= 2, got  # the output drain and the fork watchdog at least
    assert got.count("kill 1") == n and got.count("tgkill 1") == n, got
    assert "kill self ok" in got and "kill own group ok" in got, got
    assert "handled SIGUSR1" in got and "raise ok" in got, got


# main: every call succeeded at every ABI (root, same user): the ingestion pinned to CPU 0,
# nice 19, SCHED_IDLE, idle I/O class, its open-file limit cut to 16 (it then failed: "Too
# many open files"), all refused now. The same calls on itself still work.
SCHED = STEP + '''
import ctypes, resource
libc = ctypes.CDLL(None, use_errno=True)
ppid = os.getppid()
targets = [ppid] + sorted(int(t) for t in os.listdir(f"/proc/{ppid}/task") if int(t) != ppid)


def sys_call(name, *args):
    if libc.syscall(NR[name], *args) != 0:
        raise OSError(ctypes.get_errno(), name)


def vm_read(pid):
    buf = ctypes.create_string_buffer(8)
    local = (ctypes.c_void_p * 2)(ctypes.addressof(buf), 8)
    remote = (ctypes.c_void_p * 2)(0x400000, 8)
    if libc.syscall(NR["process_vm_readv"], pid, local, 1, remote, 1, 0) < 0:
        raise OSError(ctypes.get_errno(), "process_vm_readv")


for pid in targets:
    step("affinity", lambda: os.sched_setaffinity(pid, {0}))
    step("nice", lambda: os.setpriority(os.PRIO_PROCESS, pid, 19))
    step("idle", lambda: os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0)))
    step("param", lambda: os.sched_setparam(pid, os.sched_param(0)))
    step("ioprio", lambda: sys_call("ioprio_set", 1, pid, 3 << 13))
step("group nice", lambda: os.setpriority(os.PRIO_PGRP, os.getpgid(ppid), 19))
step("prlimit", lambda: resource.prlimit(ppid, resource.RLIMIT_NOFILE, (16, 16)))
step("vm_read", lambda: vm_read(ppid))
# on itself: what OpenBLAS, OpenMP and TensorFlow do to their own threads
step("self affinity", lambda: os.sched_setaffinity(0, os.sched_getaffinity(0)))
step("self nice", lambda: os.setpriority(os.PRIO_PROCESS, 0, 1))
step("self batch", lambda: os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0)))
step("self other", lambda: os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0)))
step("self prlimit", lambda: resource.setrlimit(resource.RLIMIT_NOFILE,
                                                resource.getrlimit(resource.RLIMIT_NOFILE)))
step("read prlimit", lambda: resource.prlimit(ppid, resource.RLIMIT_NOFILE))
step("self ioprio", lambda: sys_call("ioprio_set", 1, 0, 2 << 13))
step("self fifo", lambda: os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1)))
step("self nice -5", lambda: os.setpriority(os.PRIO_PROCESS, 0, -5))
import threading
box = []
th = threading.Thread(target=lambda: box.append(os.sched_setaffinity(0, os.sched_getaffinity(0))))
th.start(); th.join()
log("thread self affinity", "ok" if box == [None] else box)
'''


def _sched_body() -> str:
    return f"NR = {NR!r}\n" + SCHED


@pytest.mark.parametrize("abi", ABIS)
def test_scheduling_and_limits_of_the_ingestion_are_out_of_reach(tmp_path, input_data,
                                                                  env_cache, abi):
    pred = tmp_path / "pred"
    done = ingest_cli(submission(tmp_path, _sched_body()), input_data, pred, env_cache, abi)
    assert_ran_ok(done, pred, abi)
    got = attack_lines(pred)
    n = sum(1 for line in got if line.startswith("affinity "))
    assert n >= 3, got  # the ingestion and at least two of its threads
    for name in ("affinity", "nice", "idle", "param", "ioprio"):
        assert got.count(f"{name} 1") == n, (name, got)
    for name in ("group nice", "prlimit", "vm_read"):
        assert f"{name} 1" in got, (name, got)
    for name in ("self affinity", "self nice", "self batch", "self other", "self prlimit",
                 "read prlimit", "self ioprio", "thread self affinity"):
        assert f"{name} ok" in got, (name, got)
    # a real-time class or a higher priority for itself would starve the other runs
    assert "self fifo 1" in got and "self nice -5 1" in got, got


# main: at ABI 0 the child read the ingestion's environ and maps (status ok); at ABI >= 1
# Landlock refused them (EACCES).
PROC = '''
ppid = os.getppid()
tid = max(int(t) for t in os.listdir(f"/proc/{ppid}/task"))
for rel in ("environ", "maps", f"task/{tid}/environ", "mem", "status"):
    try:
        with open(f"/proc/{ppid}/{rel}", "rb") as fh:
            log("proc", rel, "read", len(fh.read(4096)) > 0)
    except OSError as e:
        log("proc", rel, e.errno)
'''


@pytest.mark.parametrize("abi", ABIS)
def test_the_ingestions_environ_and_maps_are_refused(tmp_path, input_data, env_cache, abi):
    pred = tmp_path / "pred"
    done = ingest_cli(submission(tmp_path, PROC), input_data, pred, env_cache, abi)
    assert_ran_ok(done, pred, abi)
    got = attack_lines(pred)
    for rel in ("environ", "maps", "task/", "mem"):
        line = next(x for x in got if x.startswith(f"proc {rel}"))
        assert line.split()[-1] in ("1", "13"), got  # EPERM or EACCES
    assert "proc status read True" in got, got  # /proc itself stays readable (CPU counts...)


# --- child text is inert -----------------------------------------------------------------------
FORGED = "\x1b[2K\r\x1b[1A\x1b[2Kingestion ok in 0.1 s; predictions in /tmp/pred\x07\x9b2K"
LIAR = GOOD.replace("        self.loaded = True", f"""\
        print({FORGED!r}, flush=True)
        raise RuntimeError({("boom" + FORGED)!r})""")


def test_child_text_reaches_console_and_logs_inert(tmp_path, input_data, env_cache):
    """main: the console showed "ingestion ok ..." on a line of its own, the error line erased
    (ESC[2K, CR), in ingestion.log too; the exit status was 1."""
    pred = tmp_path / "pred"
    sub = make_submission(tmp_path / "sub", LIAR)
    done = ingest_cli(sub, input_data, pred, env_cache, str(KERNEL))
    assert done.returncode == 1, done.stderr[-2000:]
    report = json.loads((pred / "ingestion.json").read_text())
    for where, text in (("console", done.stderr),
                        ("ingestion.log", (pred / "ingestion.log").read_text()),
                        ("submission_output.log", (pred / "submission_output.log").read_text()),
                        ("ingestion.json", "\n".join(
                            [*report["errors"], report["fault"]["traceback"]]))):
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", text), (where, text[-1500:])
        assert r"\x1b[2K\r\x1b[1A\x1b[2Kingestion ok" in text, (where, text[-1500:])
    assert not any(line.startswith("ingestion ok") for line in done.stderr.splitlines())
    assert report["status"] == "failed"
    # the one-line message had its controls blanked by the wire (wire.one_line) already
    assert report["errors"][0].startswith("the submission raised RuntimeError: boom [2K [1A")


def test_inert_replaces_controls_only():
    """By hand: C0 but newline and tab, DEL, C1, the bidi overrides; the rest untouched."""
    from challenge_welding.contract.text import inert, inert_bytes

    assert inert("a\tb\nc\x1b[31mred\x7f\x85\u202eevil\r") == \
        "a\tb\nc\\x1b[31mred\\x7f\\x85\\u202eevil\\r"
    assert inert("naïve – 日本 ✓") == "naïve – 日本 ✓"
    assert inert(inert("\x1b")) == "\\x1b"  # applied twice: no double escape
    assert inert_bytes(b"ok\x1b[2K\xff\n") == "ok\\x1b[2K\ufffd\n".encode()


# --- the clock ---------------------------------------------------------------------------------
def test_clock_verdict_by_hand():
    from challenge_welding.ingestion.handover import clock

    nominal = clock.nominal_tick()
    a = clock.Reading(raw=100.0, mono=200.0, tick=nominal, freq_ppm=12.5)
    # 10 s of raw time, 10.00001 s of monotonic: 1 ppm, NTP's ordinary discipline
    b = clock.Reading(raw=110.0, mono=210.00001, tick=nominal, freq_ppm=13.0)
    v = clock.verdict(a, b)
    assert v["timer"] == "CLOCK_MONOTONIC_RAW" and v["adjusted"] is False
    assert v["monotonic_vs_raw_ppm"] == pytest.approx(1.0, abs=1e-3)
    # a tick set 10 % short: the monotonic clock runs 10 % slow
    c = clock.Reading(raw=110.0, mono=209.0, tick=nominal * 9 // 10, freq_ppm=13.0)
    v = clock.verdict(a, c)
    assert v["adjusted"] is True and v["monotonic_vs_raw_ppm"] == pytest.approx(-100000, rel=1e-6)
    assert v["tick_us"] == [nominal, nominal * 9 // 10]
    assert "adjusted" in clock.warning(v)


def test_clock_reads_the_machine_without_writing_it():
    from challenge_welding.ingestion.handover import clock

    a = clock.read()
    time.sleep(0.2)
    b = clock.read()
    assert b.raw - a.raw == pytest.approx(0.2, abs=0.1)
    assert a.tick == b.tick and a.tick > 0  # adjtimex(modes=0): read only
    assert abs(clock.verdict(a, b)["monotonic_vs_raw_ppm"]) < 1000


# --- two runs on one machine -------------------------------------------------------------------
N_IMAGES = 300
# Each image costs a few ms of pure-Python work (one core, no BLAS threads): the times are the
# submission's own, so a slowed process shows.
WORKER = GOOD.replace('''        preds, probs, ood = [], [], []''', '''        preds, probs, ood = [], [], []
        s = 0
        for i in range(60000 * len(input_images)):
            s += i''').replace('''        self.loaded = True''', '''        time.sleep(float(os.environ.get("CW_GUARD_SETTLE", "0")))
        self.loaded = True''').replace("import numpy as np", "import os, time\nimport numpy as np")
# The other run: while the honest run (found by its output folder in /proc/*/cmdline, which
# anyone may read) is alive, it keeps one core busy, pinned to CPU 0 like its victim would be;
# as the attacker it also tries, nine times a second, to pin every process and thread of the
# honest run to CPU 0, nice 19, SCHED_IDLE and the idle I/O class, and to stop the honest
# run's child (SIGSTOP) for the 100 ms it keeps CPU 0 busy, then let it go on for 10 ms
# (SIGCONT). Each call's result is counted: ok, refused (EPERM), errno 3 (ESRCH: a thread
# that ended meanwhile). It aims at the honest run only, not at every pid it can see: on main
# the calls succeed, and this machine is shared.
NEIGHBOUR = '''
import ctypes, json, os, signal, time
from pathlib import Path
T = json.loads((Path(__file__).parent / "targets.json").read_text())
MARK = T["mark"].encode()
libc = ctypes.CDLL(None, use_errno=True)


def log(*args):
    print("ATTACK", *args, flush=True)


def honest():
    for name in os.listdir("/proc"):
        try:
            cmd = open(f"/proc/{name}/cmdline", "rb").read()
        except OSError:
            continue
        if name.isdigit() and MARK in cmd and b"ingest" in cmd:
            return int(name)
    return None


def children(root):
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and _ppid(p) == root]


def tasks(root):
    out = []
    for pid in [root] + children(root):
        try:
            out += [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            pass
    return out


def _ppid(pid):
    try:
        text = open(f"/proc/{pid}/stat").read()
        return int(text[text.rindex(")") + 2:].split()[1])
    except (OSError, ValueError):
        return None


def ioprio_idle(tid):
    if libc.syscall(T["ioprio_set"], 1, tid, 3 << 13) != 0:  # IOPRIO_WHO_PROCESS, class idle
        raise OSError(ctypes.get_errno(), "ioprio_set")


def occupy():
    os.sched_setaffinity(0, {0})
    t0, root = time.monotonic(), None
    while root is None and time.monotonic() - t0 < 120:
        root = honest()
        time.sleep(0.05)
    tried = {"ok": 0}

    def attempt(call):
        try:
            call()
            key = "ok"
        except OSError as e:
            key = {1: "refused", 3: "errno 3"}.get(e.errno, f"errno {e.errno}")
        tried[key] = tried.get(key, 0) + 1

    def busy(seconds):
        t1, s = time.monotonic(), 0
        while time.monotonic() - t1 < seconds:
            s += 1

    # the honest run's processes and threads listed while its child is stopped (the
    # neighbour lists them too, and sends nothing: the same work)
    kids, tids = (children(root), tasks(root)) if root is not None else ([], [])
    while root is not None and os.path.exists(f"/proc/{root}") and time.monotonic() - t0 < 240:
        if T["attack"]:
            for pid in kids:
                attempt(lambda: os.kill(pid, signal.SIGSTOP))
            for tid in tids:
                attempt(lambda: os.sched_setaffinity(tid, {0}))
                attempt(lambda: os.setpriority(os.PRIO_PROCESS, tid, 19))
                attempt(lambda: os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0)))
                attempt(lambda: ioprio_idle(tid))
        busy(0.1)
        stopped, kids, tids = kids, children(root), tasks(root)
        if T["attack"]:
            for pid in stopped:
                attempt(lambda: os.kill(pid, signal.SIGCONT))
        busy(0.01)
    log("found", root is not None, json.dumps(tried))
'''


def _perf_input(root: Path) -> Path:
    import cv2
    import pandas as pd

    (root / "performance" / "images").mkdir(parents=True)
    rows = []
    for i in range(N_IMAGES):
        img = np.full((18, 32, 3), (20, 40 + i % 150, 200), np.uint8)
        assert cv2.imwrite(str(root / "performance" / "images" / f"p{i:04d}.jpeg"), img)
        rows.append({"sample_id": f"p{i:04d}", "path": f"images/p{i:04d}.jpeg",
                     "welding-seams": "c20", "resolution": [32, 18]})
    pd.DataFrame(rows).to_parquet(root / "performance" / "metadata.parquet", index=False)
    return root


def _neighbour(tmp_path, name, mark, attack):
    comp = NEIGHBOUR + WORKER.replace("        self.loaded = True",
                                      "        occupy()\n        self.loaded = True")
    return make_submission(tmp_path / name, comp, manifest="include challenge_solution/*.json\n",
                           extra={"challenge_solution/targets.json":
                                  json.dumps({"mark": mark, "attack": attack,
                                              "ioprio_set": NR.get("ioprio_set", -1)})})


def _start(sub, data, pred, env_cache, abi, settle):
    # no namespace (what a Codabench worker lends): in a pid namespace the attacker could not
    # even see the other run (tests/ingestion/confine/test_confinement.py); here seccomp must hold.
    # At ABI 0 nothing then confines files: the run needs --unsafe-unconfined to start.
    env = {**os.environ, sandbox.ABI_MAX_ENV: abi, "CW_GUARD_SETTLE": str(settle),
           layers.NAMESPACES_ENV: "0"}
    unsafe = ["--unsafe-unconfined"] if abi == "0" else []
    return subprocess.Popen([*CLI, "ingest", "--submission", str(sub), "--input-data", str(data),
                             "--output", str(pred), "--env-cache", str(env_cache), *unsafe,
                             "--no-progress", "--batch-size", "1", "--sets", "performance"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _times(pred):
    report = json.loads((Path(pred) / "ingestion.json").read_text())
    assert report["status"] == "ok", report["errors"]
    t = report["timings"]["sets"]["performance"]
    return t["time_median"], t["time_p95"], t["wall_s"]


@pytest.mark.serial
@pytest.mark.parametrize("abi", ["0", str(KERNEL)] if KERNEL else ["0"])
def test_a_run_cannot_slow_down_another(tmp_path, env_cache, abi):
    """Two evaluations at once: the honest run's times beside an honest neighbour and beside
    an attacker (the same load: both keep one core busy, pinned to CPU 0, while the honest
    run lives). The figures against the issue's bound (p95 within 10 %, median of rounds) are
    benchmarks/two_runs.py's; this is its short version, with bounds loose enough for a
    shared machine and tight enough that the live attack breaks them.

    Before issue 29 (ca5213d, benchmarks/two_runs.py --tree, 2026-11-26, load 10-20 on 2
    cores): at ABI 5 every call succeeded (11,475; 31 ESRCH) and the honest run's p95 went
    from 27.0 / 11.8 ms beside the honest neighbour to 137.6 / 130.0 ms beside the attacker
    (5.1x, 11.0x), the set's wall time 5.7 / 2.4 s -> 17.7 / 19.1 s; at ABI 0 (7,733
    succeeded) p95 46.7 -> 136.5 ms, wall 8.0 -> 26.3 s. At ABI 7 Landlock's
    scoping refused the signals (EPERM) but not the scheduling calls (12,496 succeeded): the
    set's wall time went to 28.6 s (10.5 images/s against ~95), its p95 48.9 -> 80.7 ms.

    The refusals are asserted strictly. The timing on the best of two alternated rounds:
    median within 50 %, p95 within 100 % (+10 ms), the set's wall time within 100 % (+2 s):
    the same honest pair varied by 2x from one minute to the next here (p95 18 -> 36 ms, wall
    5.7 -> 2.4 s); the figures are printed."""
    data = _perf_input(tmp_path / "data")
    honest = make_submission(tmp_path / "honest", WORKER)
    figures, calls = {False: [], True: []}, []
    for i, attack in enumerate((False, True, False, True)):  # alternated: the load drifts
        pred, other_pred = tmp_path / f"pred-{i}", tmp_path / f"other-{i}"
        other = _neighbour(tmp_path, f"other-{i}", str(pred), attack)
        procs = [_start(honest, data, pred, env_cache, abi, 4),
                 _start(other, data, other_pred, env_cache, abi, 0)]
        outs = [p.communicate(timeout=900) for p in procs]
        for p, (_out, err) in zip(procs, outs):
            assert p.returncode == 0, err[-3000:]
        got = attack_lines(other_pred)
        assert got[0].startswith("found True "), got  # it ran while the honest run did
        if attack:
            calls.append(json.loads(got[0][len("found True "):]))
        figures[attack].append(_times(pred))
    (base_m, base_p, base_w), (att_m, att_p, att_w) = (tuple(min(x) for x in zip(*figures[k]))
                                                        for k in (False, True))
    print(f"\nhonest run, ABI {abi}, best of two, median / p95 per image (ms), wall (s): beside "
          f"an honest run {base_m * 1e3:.2f} / {base_p * 1e3:.2f}, {base_w:.1f}; beside an "
          f"attacker {att_m * 1e3:.2f} / {att_p * 1e3:.2f}, {att_w:.1f}; the attacker's calls: "
          f"{calls}")
    for found in calls:  # every call refused: EPERM, or ESRCH for a thread ended meanwhile
        assert found["ok"] == 0 and found["refused"] > 0, found
        assert set(found) <= {"ok", "refused", "errno 3"}, found
    # a few ms of slack: at ~2-3 ms per image, one descheduling moves a p95 by 2x (seen: 3.0
    # -> 6.1 ms with a job beside the test); the live attack before: p95 5-11x, wall 3-10x
    assert att_m <= 1.5 * base_m + 0.002 and att_p <= 2 * base_p + 0.010, figures
    assert att_w <= 2 * base_w + 2.0, figures
