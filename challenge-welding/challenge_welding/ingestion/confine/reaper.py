"""Keep every process the submission starts within reach, and end them all.

On Linux the ingestion makes itself a child subreaper (``prctl``): a process the
submission double-forks (a daemon that escapes its session with ``setsid``) is
re-parented to the ingestion when its parent exits, instead of to init. On
Codabench the ingestion is the container's PID 1, which gets orphans anyway.
:func:`kill_tree` then finds the submission's processes as the descendants of
the processes started since the child (a /proc walk), and SIGKILLs them round
after round until none is left: a process forking while it is killed is caught
in the next round.

The ingestion also makes itself non-dumpable while the submission runs, so a
process of the same user cannot read its memory or open its descriptors through
/proc (the next batch's images live there). This does not stop a process with
CAP_SYS_PTRACE (root in a container that grants it), so the child drops that
capability from its bounding set before it execs (:func:`drop_ptrace`; root keeps
the others) and the parent checks it is gone (:func:`can_ptrace`).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from contextlib import contextmanager

PR_SET_DUMPABLE, PR_GET_DUMPABLE = 4, 3
PR_SET_CHILD_SUBREAPER, PR_GET_CHILD_SUBREAPER = 36, 37
PR_CAPBSET_DROP, CAP_SYS_PTRACE, PR_SET_NO_NEW_PRIVS = 24, 19, 38
# each grants reading another process's /proc/<pid>/environ and maps (PTRACE_MODE_READ) even
# when it is non-dumpable and the reader lacks CAP_SYS_PTRACE (measured on Linux 6.18, root)
CAP_SYS_ADMIN, CAP_PERFMON = 21, 38


def _prctl():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl
    except (OSError, AttributeError):
        return None


@contextmanager
def guarded():
    """While inside: subreaper and non-dumpable (Linux); both restored on exit.

    Yields whether the subreaper could be set (False off Linux)."""
    prctl = _prctl()
    if prctl is None:
        yield False
        return
    was = ctypes.c_int(0)
    prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(was), 0, 0, 0)
    dumpable = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0)
    ok = prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    try:
        yield ok
    finally:
        prctl(PR_SET_CHILD_SUBREAPER, was.value, 0, 0, 0)
        if dumpable > 0:
            prctl(PR_SET_DUMPABLE, dumpable, 0, 0, 0)


def drop_ptrace() -> None:
    """In a forked child before exec: drop CAP_SYS_PTRACE (and CAP_SYS_ADMIN, CAP_PERFMON:
    either opens the ingestion's environ and maps) from the bounding set (needs
    CAP_SETPCAP, which root has), so that nothing the exec'd program or a descendant runs
    holds it, even as root; and set no_new_privs, so that a non-root process cannot gain it
    by executing a setuid or file-capability program."""
    prctl = _prctl()
    if prctl is not None:
        for cap in (CAP_SYS_PTRACE, CAP_SYS_ADMIN, CAP_PERFMON):
            prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)


def can_ptrace(pid: int) -> bool:
    """Whether ``pid`` holds CAP_SYS_PTRACE (effective or permitted set) or may gain it (in
    its bounding set without no_new_privs: root's exec, or a setuid program); True when
    /proc cannot tell (the safe answer)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            st = {k: int(v, 16) for k, _, v in (line.partition(":\t") for line in fh)
                  if k in ("CapEff", "CapPrm", "CapBnd", "NoNewPrivs")}
    except (OSError, ValueError):
        return True
    if len(st) < 4:
        return True
    holds = (st["CapEff"] | st["CapPrm"]) >> CAP_SYS_PTRACE & 1
    return bool(holds or (st["CapBnd"] >> CAP_SYS_PTRACE & 1 and not st["NoNewPrivs"]))


def _fields(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (state first), None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            text = fh.read().decode(errors="replace")
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()  # the command name may hold spaces


def _stat(pid: int) -> tuple[int, str, int] | None:
    """(parent pid, state letter, start time in clock ticks) from /proc/<pid>/stat."""
    fields = _fields(pid)
    return None if fields is None else (int(fields[1]), fields[0], int(fields[19]))


def _pids() -> list[int]:
    """Every visible pid (none without /proc)."""
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []


def process_table() -> dict[int, tuple[int, str, int]]:
    """{pid: (ppid, state, start ticks)} of every visible process (empty without /proc)."""
    return {pid: info for pid in _pids() if (info := _stat(pid)) is not None}


def start_ticks(pid: int) -> int:
    info = _stat(pid)
    return info[2] if info else 0


def submission_processes(child_pid: int, since: int, before: set[int],
                         table: dict | None = None) -> set[int]:
    """Live processes of the submission: the child's subtree, and the subtree of any direct
    child of ours that is new (not in ``before``, started at or after ``since``): orphans the
    submission left behind, re-parented to us as the subreaper."""
    table = process_table() if table is None else table
    me = os.getpid()
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _state, _start) in table.items():
        kids.setdefault(ppid, []).append(pid)
    # the child itself only while it is the process we started (a reaped pid can be reused)
    roots = [child_pid] if child_pid in table and table[child_pid][2] == since else []
    roots += [pid for pid in kids.get(me, []) if pid != child_pid and pid not in before
              and table[pid][2] >= since]
    found, stack = set(), roots
    while stack:
        pid = stack.pop()
        if pid not in found:
            found.add(pid)
            stack.extend(kids.get(pid, []))
    return found


def _children(pid: int) -> list[int]:
    """Direct children from /proc/<pid>/task/*/children (every thread: an orphan is given to
    one of the subreaper's threads). Raises OSError where the kernel lacks that file."""
    kids = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                kids += [int(k) for k in fh.read().split()]
        except FileNotFoundError:
            if not os.path.exists(f"/proc/{pid}/task/{tid}"):
                continue  # the thread ended meanwhile
            raise
    return kids


def submission_pids(child_pid: int, since: int, before: set[int]) -> set[int]:
    """:func:`submission_processes` walking down from the child and from us through the
    ``children`` files: a few reads instead of one per process of the machine (it runs
    after every batch). Falls back to the full table without those files."""
    try:
        me = os.getpid()
        roots = [child_pid] if start_ticks(child_pid) == since else []
        roots += [p for p in _children(me) if p != child_pid and p not in before
                  and start_ticks(p) >= since]
        found, stack = set(), roots
        while stack:
            pid = stack.pop()
            if pid not in found:
                found.add(pid)
                try:
                    stack.extend(_children(pid))
                except FileNotFoundError:
                    pass  # it ended meanwhile
        return found
    except OSError:
        return submission_processes(child_pid, since, before)


def kill_tree(child_pid: int, since: int, before: set[int], group: bool = True,
              timeout: float = 10.0) -> int:
    """SIGKILL the child's process group and every submission process; reap ours.

    Returns how many processes were killed one by one (the child excluded). Rounds
    repeat until a scan finds none left, zombies included, or ``timeout`` passes."""
    if group:  # only while the child is not reaped: its pid, hence its group id, is still its own
        try:
            os.killpg(child_pid, signal.SIGKILL)  # the child made its own session (setsid)
        except (ProcessLookupError, PermissionError, OSError):
            pass
    killed: set[int] = set()
    deadline = time.monotonic() + timeout
    me = os.getpid()
    while True:
        table = process_table()
        procs = submission_processes(child_pid, since, before, table)
        live = [p for p in procs if table[p][1] != "Z"]
        for pid in live:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except (ProcessLookupError, PermissionError):
                pass
        for pid in procs:  # reap the zombies that are ours (not the child: Popen reaps it)
            if pid != child_pid and table[pid][0] == me:
                try:
                    os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    pass
        # done when nothing is left but the child's own zombie (Popen reaps that one)
        if all(p == child_pid and table[p][1] == "Z" for p in procs) \
                or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    killed.discard(child_pid)
    return len(killed)


# -- the submission's process group ---------------------------------------------------------
# The sandbox's preexec makes the submission's first process a group leader and its seccomp
# filter refuses setsid/setpgid, so every process the submission ever starts (install or
# run) is in that group, orphans included: one killpg reaches them all, atomically.

def group_members(pgid: int) -> dict[int, tuple[int, str]]:
    """{pid: (ppid, state)} of the live processes and zombies in process group ``pgid``."""
    found = ((pid, _fields(pid)) for pid in _pids())
    return {pid: (int(f[1]), f[0]) for pid, f in found if f is not None and int(f[2]) == pgid}


def end_group(pgid: int, timeout: float = 10.0, skip: int | None = None) -> int:
    """SIGKILL process group ``pgid`` until it is empty; reap its zombies that are ours (not
    ``skip``: Popen reaps its own child). Returns how many processes were still alive after
    ``timeout`` (0: the kill finished)."""
    me = os.getpid()
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        members = group_members(pgid)
        for pid, (ppid, state) in members.items():
            if state == "Z" and ppid == me and pid != skip:
                try:
                    os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    pass
        live = [p for p, (ppid, state) in members.items() if state != "Z"]
        if not live or time.monotonic() > deadline:
            return len(live)
        time.sleep(0.01)


class Watchdog:
    """Caps the number of processes in the submission's group (a fork storm).

    RLIMIT_NPROC does not bind root (the kernel exempts it), and Codabench runs as root.
    Every ``interval`` seconds the total number of tasks (/proc/loadavg, one read) is
    compared with its level at the start; only past ``limit`` more is the group counted
    (a /proc scan), and past ``limit`` processes the group is killed: :attr:`line` says so.
    """

    def __init__(self, pgid: int, limit: int, interval: float = 0.1):
        self.pgid, self.limit, self.interval = pgid, limit, interval
        self.line: str | None = None
        self.base = _tasks()
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="fork-watchdog", daemon=True)
        self.thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(self.interval):
            tasks = _tasks()
            if tasks - self.base <= self.limit:
                continue
            n = self._live()
            if n <= self.limit:  # others' processes grew (a busy machine): scan only on new growth
                self.base = tasks - n
                continue
            if n > self.limit:
                self.line = (f"the submission started more than {self.limit} processes at once "
                             f"({n} counted): a fork storm, stopped")
                end_group(self.pgid, timeout=30.0, skip=self.pgid)
                return

    def _live(self) -> int:
        """The group's live processes; its zombies that are ours (orphans of a fork-and-exit
        chain, re-parented to us as the subreaper) are reaped here, not counted: a chain of
        short-lived processes is not a storm, and unreaped it would exhaust the pid space."""
        me, live = os.getpid(), 0
        for pid, (ppid, state) in group_members(self.pgid).items():
            if state != "Z":
                live += 1
            elif ppid == me and pid != self.pgid:  # the child itself is Popen's to reap
                try:
                    os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    pass
        return live

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(5.0)


def _tasks() -> int:
    """Tasks (processes and threads) on the machine, from /proc/loadavg's 4th field."""
    try:
        with open("/proc/loadavg") as fh:
            return int(fh.read().split()[3].split("/")[1])
    except (OSError, ValueError, IndexError):
        return 0


def still_alive(child_pid: int, since: int, before: set[int]) -> int:
    """How many processes of the submission (tree and orphans) are alive, zombies aside."""
    table = process_table()
    return sum(1 for p in submission_processes(child_pid, since, before, table)
               if table[p][1] != "Z")
