"""The child process seen from the parent: start, hand batches over, time them, end it.

Whatever the submission does (raise, segfault, ``os._exit``, get OOM-killed,
hang, flood its output), only the child ends; the parent turns it into one
:class:`ChildFault` line plus the submission's traceback or the tail of its output.

The scored time of a batch is measured here, in the parent, out of the
submission's reach: from just before the hand-over message is sent to just after
the answer is received (:meth:`Child.handover`). Ending the child ends every
process the submission started (reaper.py).
"""

from __future__ import annotations

import collections
import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Listener
from multiprocessing.reduction import send_handle
from pathlib import Path

from challenge_welding.contract.errors import ChallengeError
from challenge_welding.ingestion import child as proto
from challenge_welding.ingestion import reaper
from challenge_welding.ingestion.protocol import BatchBuffer

CHILD_SCRIPT = Path(proto.__file__).resolve()
TAIL_BYTES = 16 * 1024


class ChildFault(ChallengeError):
    """The submission failed; ``line`` is the one-line summary, ``details`` its traceback/output."""

    def __init__(self, line: str, details: str = "", stage: str = ""):
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
        self.thread = threading.Thread(target=self._drain, name="child-output", daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        with open(self.path, "ab") as fh:
            while True:
                chunk = self.stream.read1(65536) if hasattr(self.stream, "read1") \
                    else self.stream.read(65536)
                if not chunk:
                    break
                self.total += len(chunk)
                room = self.cap - self.written
                if room > 0:
                    fh.write(chunk[:room])
                    fh.flush()
                    self.written += min(room, len(chunk))
                self.tail.append(chunk)
                self._tail_size += len(chunk)
                while self._tail_size - len(self.tail[0]) >= TAIL_BYTES:
                    self._tail_size -= len(self.tail.popleft())
            if self.dropped:
                fh.write(f"\n[... {self.dropped} bytes of output dropped (cap {self.cap} bytes);"
                         f" last {min(TAIL_BYTES, self.total)} bytes follow ...]\n".encode())
                fh.write(self.tail_bytes())

    @property
    def dropped(self) -> int:
        return max(0, self.total - self.written)

    def tail_bytes(self) -> bytes:
        return b"".join(self.tail)[-TAIL_BYTES:]

    def tail_text(self, lines: int = 30) -> str:
        return "\n".join(self.tail_bytes().decode(errors="replace").splitlines()[-lines:])

    def join(self, timeout: float = 5.0) -> None:
        self.thread.join(timeout)


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
    reaper.drop_ptrace()  # cannot read the evaluator's memory or descriptors, even as root


class Child:
    def __init__(self, python: str, pythonpath: list[str], cwd: Path, log_path: Path,
                 max_log_bytes: int = 20 << 20, module: str | None = None,
                 extra_env: dict | None = None):
        authkey = secrets.token_bytes(16)
        self.listener = Listener(authkey=authkey)  # a Unix socket (a named pipe on Windows)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONHOME", "PYTHONPATH")}
        env.update({proto.ENV_ADDRESS: self.listener.address, proto.ENV_AUTHKEY: authkey.hex(),
                    "PYTHONPATH": os.pathsep.join(pythonpath), "PYTHONUNBUFFERED": "1",
                    "PYTHONNOUSERSITE": "1", "PYTHONFAULTHANDLER": "1"})
        if module:
            env[proto.ENV_MODULE] = module
        env.update(extra_env or {})
        table = reaper.process_table()
        self._before = {pid for pid, (ppid, _s, _t) in table.items() if ppid == os.getpid()}
        self.proc = subprocess.Popen(
            [python, str(CHILD_SCRIPT)], cwd=str(cwd), env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            preexec_fn=_raise_oom_score if sys.platform.startswith("linux") else None,
            start_new_session=not sys.platform.startswith("linux") and os.name == "posix")
        self._since = reaper.start_ticks(self.proc.pid)
        self.output = CappedLog(self.proc.stdout, log_path, max_log_bytes)
        self.conn = None
        self.killed_processes = 0  # processes of the submission still alive when it ended

    # -- connection -------------------------------------------------------------------------
    def _accept(self, timeout: float) -> None:
        box = {}

        def accept():
            try:
                box["conn"] = self.listener.accept()
            except Exception as exc:  # noqa: BLE001
                box["error"] = exc

        t = threading.Thread(target=accept, daemon=True)
        t.start()
        deadline = time.monotonic() + timeout
        while t.is_alive():
            t.join(0.1)
            if self.proc.poll() is not None and t.is_alive():
                t.join(1.0)
                if t.is_alive():
                    self._fault("import", f"the child {describe_exit(self.proc.returncode)} "
                                "before starting")
            if time.monotonic() > deadline and t.is_alive():
                self.kill()
                self._fault("import", f"the child did not start within {timeout:.0f} s")
        if "conn" not in box:
            self._fault("import", f"the child could not connect: {box.get('error')}")
        self.conn = box["conn"]

    def _fault(self, stage: str, line: str, details: str | None = None):
        self.kill()
        if details is None:
            self.output.join()
            details = self.output.tail_text()
        raise ChildFault(line, details, stage)

    def receive(self, timeout: float | None, what: str, stage: str,
                limit: str = "the per-batch time limit") -> dict:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                if self.conn.poll(0.2):
                    msg = self.conn.recv()
                    break
            except (EOFError, ConnectionError, OSError):
                try:
                    self.proc.wait(5)
                except subprocess.TimeoutExpired:
                    pass
                self._fault(stage, f"the submission {describe_exit(self.proc.poll())} during {what}")
            if self.proc.poll() is not None and not self.conn.poll(0):
                self._fault(stage, f"the submission {describe_exit(self.proc.returncode)} "
                                   f"during {what}")
            if deadline is not None and time.monotonic() > deadline:
                self._fault(stage, f"the submission timed out: no answer after {timeout:g} s "
                                   f"during {what} ({limit}); the child was stopped")
        if msg.get("op") == proto.OP_ERROR:
            self.output.join(1.0)
            where = {"import": "importing the component", "init": f"{proto.CLASS_NAME}()",
                     "load_model": "load_model()", "predict": "predict()"}.get(msg["stage"],
                                                                                msg["stage"])
            self._fault(msg["stage"], f"the submission raised {msg['message']} in {where}"
                        + ("" if msg["stage"] != "predict" else f" ({what})")
                        + hint(msg["message"]), msg.get("traceback", ""))
        return msg

    # -- lifecycle --------------------------------------------------------------------------
    def start(self, timeout: float) -> dict:
        """Wait for the child to import the component and run load_model()."""
        self._accept(timeout=min(timeout, 120.0))
        return self.receive(timeout, "import and load_model()", "load_model",
                            "the load time limit")

    def handover(self, msg: dict, buffer: BatchBuffer, timeout: float | None, what: str,
                 limit: str = "the per-batch time limit") -> tuple[dict, float]:
        """Hand a batch over and wait for the answer; return it and the seconds it took.

        The clock runs from just before the message leaves to just after the answer
        arrives: the child's own clock plays no part. Returns once the child said it
        dropped its own references ("idle"); the buffer stays the caller's (see holds)."""
        t0 = time.perf_counter()
        try:
            self.conn.send(msg)
            send_handle(self.conn, buffer.fd, self.proc.pid)
        except (OSError, ValueError):
            self._fault("predict", f"the submission {describe_exit(self.proc.poll())} "
                                   "before receiving a batch")
        res = self.receive(timeout, what, "predict", limit)
        seconds = time.perf_counter() - t0
        self.receive(timeout, what, "predict", limit)  # "idle"
        return res, seconds

    def holds(self, buffer: BatchBuffer) -> bool:
        """Whether a process of the submission still maps the buffer or holds its descriptor."""
        return buffer.ident in self.held([buffer.ident])

    def held(self, idents) -> set:
        """Which of the buffers ``idents`` a process of the submission still maps or holds a
        descriptor of (one /proc pass for all)."""
        if not sys.platform.startswith("linux"):
            return set(idents)  # cannot tell: never reuse them
        return reaper.held(idents, reaper.submission_pids(self.proc.pid, self._since,
                                                          self._before))

    def can_ptrace(self) -> bool:
        """Whether the child could read the evaluator's memory and descriptors (CAP_SYS_PTRACE
        kept): then nothing may be decoded ahead of its hand-over."""
        return not sys.platform.startswith("linux") or reaper.can_ptrace(self.proc.pid)

    def stop(self, timeout: float = 10.0) -> None:
        """Ask the child to exit, then end it and every process the submission started."""
        if self.conn is not None and self.proc.poll() is None:
            try:
                self.conn.send({"op": proto.OP_STOP})
                self.proc.wait(timeout)
            except (OSError, ValueError, subprocess.TimeoutExpired):
                pass
        self.kill()

    def kill(self) -> None:
        """SIGKILL the child, its group and every descendant (double-forked daemons too)."""
        if sys.platform.startswith("linux"):
            self.killed_processes += reaper.kill_tree(self.proc.pid, self._since, self._before,
                                                      group=self.proc.returncode is None)
        elif self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError, AttributeError):
                self.proc.kill()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for closable in (self.conn, self.listener):
            try:
                if closable is not None:
                    closable.close()
            except OSError:
                pass
        self.output.join()
