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
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from challenge_welding.ingestion import sandbox

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
    env = {**os.environ, sandbox.ABI_MAX_ENV: abi}
    try:
        return subprocess.run([*CLI, "ingest", "--submission", str(sub), "--input-data",
                               str(input_data), "--output", str(pred), "--env-cache",
                               str(env_cache), "--no-progress", *extra], env=env,
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
    from challenge_welding.ingestion import clock

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
    from challenge_welding.ingestion import clock

    a = clock.read()
    time.sleep(0.2)
    b = clock.read()
    assert b.raw - a.raw == pytest.approx(0.2, abs=0.1)
    assert a.tick == b.tick and a.tick > 0  # adjtimex(modes=0): read only
    assert abs(clock.verdict(a, b)["monotonic_vs_raw_ppm"]) < 1000
