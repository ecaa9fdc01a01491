"""The child process seen from the parent: start, talk, time out, describe how it died.

Whatever the submission does (raise, segfault, ``os._exit``, get OOM-killed,
hang, flood its output), only the child ends; the parent turns it into one
:class:`ChildFault` line plus the submission's traceback or the tail of its output.
"""

from __future__ import annotations

import collections
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Listener
from pathlib import Path

from challenge_welding.errors import ChallengeError
from challenge_welding.ingestion import child as proto

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


def _raise_oom_score() -> None:  # runs in the child before exec
    try:  # if memory runs out, the kernel kills the child, never the evaluator
        with open("/proc/self/oom_score_adj", "w") as fh:
            fh.write("1000")
    except OSError:
        pass
    os.setsid()  # own process group: a kill also ends processes the submission spawned


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
        self.proc = subprocess.Popen(
            [python, str(CHILD_SCRIPT)], cwd=str(cwd), env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            preexec_fn=_raise_oom_score if sys.platform.startswith("linux") else None,
            start_new_session=not sys.platform.startswith("linux") and os.name == "posix")
        self.output = CappedLog(self.proc.stdout, log_path, max_log_bytes)
        self.conn = None

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
            hint = ""
            if "No module named 'challenge_welding." in msg["message"]:
                hint = (" (the evaluator provides only the interface modules "
                        "challenge_welding.ai_component_interface and .AIComponent_interface)")
            self._fault(msg["stage"], f"the submission raised {msg['message']} in {where}"
                        + ("" if msg["stage"] != "predict" else f" ({what})") + hint,
                        msg.get("traceback", ""))
        return msg

    # -- lifecycle --------------------------------------------------------------------------
    def start(self, timeout: float) -> dict:
        """Wait for the child to import the component and run load_model()."""
        self._accept(timeout=min(timeout, 120.0))
        return self.receive(timeout, "import and load_model()", "load_model",
                            "the load time limit")

    def send(self, msg: dict) -> None:
        try:
            self.conn.send(msg)
        except (OSError, ValueError):
            self._fault("predict", f"the submission {describe_exit(self.proc.poll())} "
                                   "before receiving a batch")

    def stop(self, timeout: float = 10.0) -> None:
        if self.conn is not None and self.proc.poll() is None:
            try:
                self.conn.send({"op": proto.OP_STOP})
                self.proc.wait(timeout)
            except (OSError, ValueError, subprocess.TimeoutExpired):
                pass
        self.kill()

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError, AttributeError):
                self.proc.kill()
            self.proc.wait()
        for closable in (self.conn, self.listener):
            try:
                if closable is not None:
                    closable.close()
            except OSError:
                pass
        self.output.join()
