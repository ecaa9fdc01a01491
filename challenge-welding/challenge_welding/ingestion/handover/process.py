"""The child process seen from the parent: start, hand batches over, time them, end it.

Whatever the submission does (raise, segfault, ``os._exit``, get OOM-killed,
hang, flood its output), only the child ends; the parent turns it into one
:class:`ChildFault` line plus the submission's traceback or the tail of its output.

The scored time of a batch is measured here, in the parent, out of the
submission's reach: from just before the hand-over message is sent to just after
the answer is received (:meth:`Child.handover`), on the raw monotonic clock that
neither NTP nor ``adjtimex`` adjusts (clock.py). Every message from the child is
read through wire.py (bounded, schema-checked, nothing unpickled); anything that
goes wrong while the child is handled is one ChildFault line (:meth:`Child._guard`). Ending the child ends every
process the submission started (reaper.py). Whatever text of the child leaves here (its
error message, traceback, the tail of its output) is made inert first (contract/text.py).
"""

from __future__ import annotations

import collections
import contextlib
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from challenge_welding.contract.errors import ChallengeError
from challenge_welding.contract.text import inert
from challenge_welding.ingestion.handover import child
from challenge_welding.ingestion.handover import clock, wire
from challenge_welding.ingestion.confine import layers, reaper
from challenge_welding.ingestion.confine.variables import participant_env
from challenge_welding.ingestion.handover.buffers import BatchBuffer

CHILD_SCRIPT = Path(child.__file__).resolve()
TAIL_BYTES = 16 * 1024
KILL_TIMEOUT_ENV = "CHALLENGE_WELDING_KILL_TIMEOUT"  # seconds a kill may take (tests: 0)


class ChildFault(ChallengeError):
    """The submission failed; ``line`` is the one-line summary, ``details`` its traceback/output.
    Both hold the child's text: made inert here, before any console, log or page sees them."""

    def __init__(self, line: str, details: str = "", stage: str = ""):
        line, details = inert(line), inert(details)
        super().__init__(line)
        self.line = line
        self.details = details
        self.stage = stage


class CappedLog:
    """Drain a pipe into a file, keeping the first ``cap`` bytes and an in-memory tail.

    The drain never stops reading, so a child flooding its output is not blocked
    on a full pipe and the disk does not fill; dropped bytes are counted.
    """

    def __init__(self, stream, path: Path, cap: int):
        self.stream, self.path, self.cap = stream, path, cap
        self.written = 0
        self.total = 0
        self.tail: collections.deque[bytes] = collections.deque()
        self._tail_size = 0
        self.fault: OSError | None = None  # the log file could not be written (a full disk)
        self.thread = threading.Thread(target=self._drain, name="child-output", daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        fh = None
        try:
            fh = open(self.path, "ab")
        except OSError as exc:
            self.fault = exc
        while True:
            chunk = self.stream.read1(65536) if hasattr(self.stream, "read1") \
                else self.stream.read(65536)
            if not chunk:
                break
            self.total += len(chunk)
            room = self.cap - self.written
            if room > 0 and fh is not None:
                try:
                    fh.write(chunk[:room])
                    fh.flush()
                except OSError as exc:  # a full disk: keep draining (the tail is kept)
                    self.fault, fh = exc, _closed(fh)
                else:
                    self.written += min(room, len(chunk))
            self.tail.append(chunk)
            self._tail_size += len(chunk)
            while self._tail_size - len(self.tail[0]) >= TAIL_BYTES:
                self._tail_size -= len(self.tail.popleft())
        if fh is None:
            return
        try:
            if self.dropped:
                fh.write(f"\n[... {self.dropped} bytes of output dropped (cap {self.cap} bytes);"
                         f" last {min(TAIL_BYTES, self.total)} bytes follow ...]\n".encode())
                fh.write(self.tail_bytes())
            fh.close()
        except OSError as exc:
            self.fault = exc
            _closed(fh)

    @property
    def dropped(self) -> int:
        return max(0, self.total - self.written)

    def tail_bytes(self) -> bytes:
        return b"".join(self.tail)[-TAIL_BYTES:]

    def tail_text(self, lines: int = 30) -> str:
        return inert("\n".join(self.tail_bytes().decode(errors="replace").splitlines()[-lines:]))

    def join(self, timeout: float = 5.0) -> None:
        self.thread.join(timeout)


def _closed(fh) -> None:
    try:
        fh.close()
    except OSError:  # its buffered bytes cannot be written either
        pass


def describe_exit(code: int | None) -> str:
    if code is None:
        return "stopped answering"
    if code < 0:
        sig = -code
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        if sig == signal.SIGSEGV:
            return f"crashed with a segmentation fault ({name})"
        if sig == signal.SIGKILL:
            return f"was killed ({name}), most likely by the out-of-memory killer"
        return f"was killed by signal {name}"
    return f"exited with status {code} (os._exit or sys.exit outside predict)"


_MISSING = re.compile(r"No such file or directory: '([^']*)'")


def hint(message: str) -> str:
    """A fix for the usual causes of a submission's exception, appended to its error line."""
    if "No module named 'challenge_welding." in message:
        return (" (the evaluator provides only the interface modules "
                "challenge_welding.ai_component_interface and .AIComponent_interface)")
    missing = _MISSING.search(message)
    if not missing or not message.startswith("FileNotFoundError"):
        return ""
    path = missing.group(1)
    if not os.path.isabs(path):
        return (f" (the relative path {path!r} is resolved against the evaluator's working "
                "folder: build it from ROOT_PATH = Path(__file__).parent.resolve())")
    if "challenge_solution" in Path(path).parts:
        return (" (this file of your package was not installed: list it in MANIFEST.in, e.g. "
                f"'include challenge_solution/{Path(path).name}', and keep "
                "include_package_data=True in setup.py)")
    return (f" ({path} exists only on your machine: put the file in challenge_solution/, list "
            "it in MANIFEST.in and open it through ROOT_PATH)")


def _raise_oom_score() -> None:  # runs in the child before exec
    try:  # if memory runs out, the kernel kills the child, never the evaluator
        with open("/proc/self/oom_score_adj", "w") as fh:
            fh.write("1000")
    except OSError:
        pass
    os.setsid()  # own process group: a kill also ends processes the submission spawned
    reaper.drop_ptrace()  # no_new_privs; then no capability at all, even as root
    layers.drop_capabilities()


class Child:
    def __init__(self, python: str, pythonpath: list[str], cwd: Path, log_path: Path,
                 max_log_bytes: int = 20 << 20, module: str | None = None,
                 extra_env: dict | None = None, confine=None, max_processes: int = 0):
        """``confine``: the sandbox's preexec (sandbox.Confinement; None: own session and OOM
        score only); ``max_processes``: the fork-storm cap of its group (0: none)."""
        # a socket pair, no name and no key: the child's end is passed as a descriptor
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        extra = extra_env or {}  # nothing of the caller's environment: its documented list
        env = participant_env(extra.get("HOME", str(cwd)), extra.get("TMPDIR", str(cwd)))
        env.update({child.ENV_FD: str(theirs.fileno()),
                    "PYTHONPATH": os.pathsep.join(pythonpath), "PYTHONUNBUFFERED": "1",
                    "PYTHONNOUSERSITE": "1", "PYTHONFAULTHANDLER": "1"})
        if module:
            env[child.ENV_MODULE] = module
        env.update(extra_env or {})
        table = reaper.process_table()
        self._before = {pid for pid, (ppid, _s, _t) in table.items() if ppid == os.getpid()}
        try:
            self.proc = subprocess.Popen(
                [python, str(CHILD_SCRIPT)], cwd=str(cwd), env=env, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, pass_fds=(theirs.fileno(),),
                preexec_fn=(confine or _raise_oom_score) if sys.platform.startswith("linux")
                else None,
                start_new_session=not sys.platform.startswith("linux") and os.name == "posix")
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self._since = reaper.start_ticks(self.proc.pid)
        self.output = CappedLog(self.proc.stdout, log_path, max_log_bytes)
        self.channel = wire.Channel(ours)
        self._what = ""  # the call under way, for the child's error line
        self.killed_processes = 0  # processes of the submission still alive when it ended
        self.survivors = 0  # processes of the submission the kill could not end (run failed)
        self.watchdog = reaper.Watchdog(self.proc.pid, max_processes) \
            if max_processes and sys.platform.startswith("linux") else None

    # -- messages ---------------------------------------------------------------------------
    def _fault(self, stage: str, line: str, details: str | None = None):
        self.kill()
        if self.watchdog is not None and self.watchdog.line:
            line = self.watchdog.line  # the real cause of the child's death
        if details is None:
            self.output.join()
            details = self.output.tail_text()
        raise ChildFault(line, details, stage)

    def _alive(self) -> bool:
        return self.proc.poll() is None

    @contextlib.contextmanager
    def _guard(self, what: str, stage: str, timeout: float | None, limit: str):
        """Whatever goes wrong while the child is handled becomes one ChildFault line."""
        try:
            yield
        except ChildFault:
            raise
        except wire.Timeout:
            self._fault(stage, f"the submission timed out: no answer after {timeout:g} s "
                               f"during {what} ({limit}); the child was stopped")
        except wire.Closed:
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
            self._pending_error()  # its own error report, when it sent one before closing
            self._fault(stage, f"the submission {describe_exit(self.proc.poll())} during {what}")
        except wire.WireError as exc:
            self._fault(stage, f"the submission broke the message protocol during {what}: {exc}; "
                               "the child was stopped")
        except Exception as exc:  # any failure on our side is the run's end, not a traceback
            self._fault(stage, f"the evaluator could not handle the submission's message during "
                               f"{what} ({type(exc).__name__}: {str(exc)[:200]})")

    def _pending_error(self) -> None:
        """Raise the child's error report if one is complete on the socket: a child that
        reports an exception and exits may close its end while we were sending or waiting,
        and its own message says more than its exit status."""
        try:
            header = self.channel.read_header(child.header_cap(0), time.monotonic() + 0.5,
                                              lambda: False)
        except Exception:  # nothing usable waiting: the exit status it is
            return
        if header.get("op") == child.OP_ERROR:
            try:
                err = wire.check_error(header)
            except wire.WireError:
                return
            self.kill()
            raise self._reported(err)

    def _header(self, cap: int, deadline: float | None) -> dict:
        """The next header; the child's own error report becomes its ChildFault."""
        header = self.channel.read_header(cap, deadline, self._alive)
        if header["op"] == child.OP_ERROR:
            raise self._reported(wire.check_error(header))
        return header

    def _reported(self, err: dict) -> ChildFault:
        """The child's own error report as its ChildFault."""
        self.output.join(1.0)
        where = {"import": "importing the component", "init": f"{child.CLASS_NAME}()",
                 "load_model": "load_model()", "predict": "predict()"}[err["stage"]]
        return ChildFault(f"the submission raised {err['message']} in {where}"
                          + ("" if err["stage"] != "predict" else f" ({self._what})")
                          + hint(err["message"]), err["traceback"], err["stage"])

    # -- lifecycle --------------------------------------------------------------------------
    def start(self, timeout: float) -> dict:
        """Wait for the child to import the component and run load_model()."""
        what = self._what = "import and load_model()"
        with self._guard(what, "load_model", timeout, "the load time limit"):
            try:
                return wire.check_ready(self._header(child.header_cap(0),
                                                     time.monotonic() + timeout))
            except ChildFault as fault:
                self.kill()
                raise fault

    def handover(self, msg: dict, buffer: BatchBuffer, timeout: float | None, what: str,
                 limit: str = "the per-batch time limit") -> tuple[dict, float]:
        """Hand a batch over and wait for the answer; return it and the seconds it took.

        The clock runs from just before the message leaves to just after the answer
        (header and arrays) arrives: the child's own clock plays no part. The maps follow
        the answer, outside the clock. Returns once the child said it dropped its own
        references ("idle"); the buffer stays the caller's (predict.handover closes it).
        The answer: {"output": dict with the arrays, "seconds", "ignored", "error", "maps",
        "maps_error"}.
        """
        self._what = what
        ident, nonce = msg["id"], secrets.token_hex(8)  # fresh per hand-over: no early answer
        shapes = [(h, w) for _off, h, w in msg["images"]]
        cap = child.header_cap(len(shapes))
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._guard(what, "predict", timeout, limit):
            try:
                self.channel.check_quiet()
                t0 = clock.now()
                self.channel.send({**msg, "nonce": nonce}, buffer.fd, timeout)
                header = self._header(cap, deadline)
                arrays = wire.check_result(header, ident, nonce, len(shapes))
                values = self.channel.read_arrays(arrays, deadline, self._alive)
                seconds = clock.now() - t0
                maps = maps_error = None
                if header["maps"]:
                    head = self._header(cap, deadline)
                    maps = self.channel.read_arrays(
                        wire.check_maps(head, ident, nonce, shapes), deadline, self._alive)
                    maps_error = head.get("error")
                idle = self._header(child.header_cap(0), deadline)
                wire.check_op(idle, (child.OP_IDLE,), f"the end of batch {ident}")
                wire.check_tag(idle, ident, nonce)
                output = header.get("output")
                if isinstance(output, dict):
                    output = {**output, **{name: v for (name, _d, _s), v in zip(arrays, values)}}
                answer = {"output": output, "seconds": float(header["seconds"]),
                          "ignored": [wire.one_line(k, 100) for k in header["ignored"]],
                          "error": header.get("error") and wire.one_line(header["error"]),
                          "maps": maps, "maps_error": maps_error and wire.one_line(maps_error)}
            except ChildFault as fault:
                self.kill()
                raise fault
        return answer, seconds

    def can_ptrace(self) -> bool:
        """Whether the child could read the evaluator's memory and descriptors (CAP_SYS_PTRACE
        kept): then nothing may be decoded ahead of its hand-over."""
        return not sys.platform.startswith("linux") or reaper.can_ptrace(self.proc.pid)

    def stop(self, timeout: float = 10.0) -> None:
        """Ask the child to exit, then end it and every process the submission started."""
        if self.proc.poll() is None:
            try:
                self.channel.send({"op": child.OP_STOP}, None, 1.0)
                self.proc.wait(timeout)
            except (wire.Timeout, wire.Closed, OSError, subprocess.TimeoutExpired):
                pass
        self.kill()

    def kill(self) -> None:
        """SIGKILL the child, its group and every descendant (double-forked daemons too)."""
        if sys.platform.startswith("linux"):
            # the sandbox keeps every process in the child's group: it must end empty
            timeout = float(os.environ.get(KILL_TIMEOUT_ENV, 10))
            self.killed_processes += sum(  # what the group kill ends, the child aside
                1 for pid, (_ppid, state) in reaper.group_members(self.proc.pid).items()
                if pid != self.proc.pid and state != "Z")
            self.survivors = reaper.end_group(self.proc.pid, timeout, skip=self.proc.pid)
            self.killed_processes += reaper.kill_tree(self.proc.pid, self._since, self._before,
                                                      group=self.proc.returncode is None,
                                                      timeout=timeout)
            self.survivors += reaper.still_alive(self.proc.pid, self._since, self._before)
            if self.watchdog is not None:
                self.watchdog.stop()
        elif self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError, AttributeError):
                self.proc.kill()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        try:
            self.channel.close()
        except OSError:
            pass
        self.output.join()
