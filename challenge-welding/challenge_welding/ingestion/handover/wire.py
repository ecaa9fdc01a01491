"""The parent's side of the wire: every byte from the child is hostile.

Frames are encoded by ``child.encode`` (docs/contracts.md, "Wire format"): an 8-byte
length, a JSON header, then the raw bytes of the arrays the header declares. Here:

* :class:`Channel` reads a frame only after checking its announced length against the
  cap for the message expected (``child.header_cap``), with a deadline and a liveness
  check on every wait: a child that sends nothing, trickles bytes, dies or closes the
  socket ends the wait with :class:`Timeout` or :class:`Closed`, never a hang;
* :func:`parse_header` refuses a header nested deeper than ``MAX_DEPTH`` *before*
  ``json.loads`` sees it (no recursion error, no quadratic work: the nesting is counted
  with one regular expression and numpy over at most the cap's bytes);
* the ``check_*`` functions hold each message to its schema and to the batch that was
  handed over (op, id, nonce, declared arrays' names, dtypes and exact shapes);
* :meth:`Channel.read_arrays` then reads each declared array straight into an array of
  the checked shape: the parent never holds more than a legal answer.

Every violation is a :class:`WireError` whose text is one line for the log. Nothing
is unpickled, ever.
"""

from __future__ import annotations

import json
import math
import select
import socket
import time
from typing import Callable

import numpy as np

from challenge_welding.contract.checked import nesting
from challenge_welding.contract.explanation_maps import reduced_shape
from challenge_welding.ingestion.handover import child


CHUNK = 64 << 10  # the most one read brings beyond what was asked for


class WireError(Exception):
    """The child broke the protocol; the message is one line naming what."""


class Timeout(Exception):
    pass


class Closed(Exception):
    pass


def parse_header(data: bytes) -> dict:
    """A header's bytes as a dict with a string "op"; WireError otherwise."""
    depth = nesting(data)
    if depth > child.MAX_DEPTH:
        raise WireError(f"a message nested {depth} levels deep (at most {child.MAX_DEPTH})")
    try:
        header = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise WireError(f"a message that is not JSON ({type(exc).__name__})") from None
    if not isinstance(header, dict) or not isinstance(header.get("op"), str):
        raise WireError(f"a message that is not an object with an 'op' ({_short(header)})")
    return header


def one_line(text: str, cap: int = 300) -> str:
    """A child's text as one printable line of at most ``cap`` characters (it goes to the log)."""
    flat = " ".join("".join(c if c.isprintable() else " " for c in str(text)[:4 * cap]).split())
    return flat if len(flat) <= cap else flat[:cap - 3] + "..."


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _field(header: dict, key: str, kinds, what: str):
    value = header.get(key)
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise WireError(f"'{key}' of a {what} message is {_short(value)}")
    return value


def _text_list(header: dict, key: str, what: str, most: int = 50) -> list:
    value = _field(header, key, list, what)
    if len(value) > most or not all(isinstance(v, str) for v in value):
        raise WireError(f"'{key}' of a {what} message is not a short list of strings")
    return [one_line(v, 100) for v in value]


def check_op(header: dict, expected: tuple, what: str) -> None:
    if header["op"] not in expected:
        raise WireError(f"sent {_short(header['op'])} while {what} was awaited")


def check_tag(header: dict, ident: int, nonce: str) -> None:
    """The answer must name the batch handed over, with that hand-over's nonce."""
    got = header.get("id")
    if got != ident or isinstance(got, bool):
        raise WireError(f"answered batch {_short(got)} while batch {ident} was handed over")
    if header.get("nonce") != nonce:
        raise WireError(f"an answer to batch {ident} not written for this hand-over (an early, "
                        "late or repeated answer)")


def check_ready(header: dict) -> dict:
    check_op(header, (child.OP_READY,), "the ready message")
    for key in ("python", "numpy"):
        if len(_field(header, key, str, "ready")) > 100:
            raise WireError(f"'{key}' of the ready message is too long")
    if header.get("module_file") is not None:
        _field(header, "module_file", str, "ready")
    _field(header, "accepts_device", bool, "ready")
    load_s = _field(header, "load_s", (int, float), "ready")
    return {**header, "load_s": float(load_s) if math.isfinite(load_s) else 0.0}


def check_error(header: dict) -> dict:
    stage = _field(header, "stage", str, "error")
    if stage not in ("import", "init", "load_model", "predict"):
        raise WireError(f"an error message from an unknown stage {_short(stage)}")
    return {"stage": stage, "message": one_line(_field(header, "message", str, "error")),
            "traceback": _field(header, "traceback", str, "error")}


def declared(header: dict, allowed: Callable[[int, str], tuple | None], what: str) -> list:
    """The header's arrays as (name, dtype, shape), each checked by ``allowed(i, name)``
    (the (dtype, shape) that array must have, None when it may not be sent)."""
    arrays = _field(header, "arrays", list, what)
    out, seen = [], set()
    for i, spec in enumerate(arrays):
        if not isinstance(spec, dict) or set(spec) != {"name", "dtype", "shape"}:
            raise WireError(f"array {i} of a {what} message is declared as {_short(spec)}")
        name, dtype, shape = spec["name"], spec["dtype"], spec["shape"]
        rule = allowed(i, name) if isinstance(name, str) else None
        if rule is None or (name in seen and name != "explainability"):
            raise WireError(f"a {what} message declares an unexpected array {_short(name)}")
        seen.add(name)
        if dtype != rule[0] or shape != list(rule[1]):
            raise WireError(f"array {name!r} of a {what} message is {_short(dtype)} "
                            f"{_short(shape)}, expected {rule[0]} {list(rule[1])}")
        out.append((name, np.dtype(dtype), tuple(rule[1])))
    return out


def check_result(header: dict, ident: int, nonce: str, n: int) -> list:
    """The answer to the batch handed over (n images); returns its declared arrays."""
    check_op(header, (child.OP_RESULT,), f"the answer to batch {ident}")
    check_tag(header, ident, nonce)
    seconds = _field(header, "seconds", (int, float), "result")
    if not (math.isfinite(seconds) and seconds >= 0):  # it goes to ingestion.json: strict JSON, a real time
        raise WireError(f"'seconds' of a result message is {_short(seconds)}, not a finite time >= 0")
    _text_list(header, "ignored", "result")
    _field(header, "maps", bool, "result")
    if header.get("error") is not None:
        _field(header, "error", str, "result")
    rules = {"probabilities": ("<f8", (n, 3)), "OOD_scores": ("<f8", (n,))}
    arrays = declared(header, lambda _i, name: rules.get(name), "result")
    if arrays and not isinstance(header.get("output"), dict):
        raise WireError("a result message with arrays but no output object")
    return arrays


def check_maps(header: dict, ident: int, nonce: str, shapes: list[tuple[int, int]]) -> list:
    """The explainability maps of the batch: one uint8 array per image, of its reduced shape."""
    check_op(header, (child.OP_MAPS,), f"the maps of batch {ident}")
    check_tag(header, ident, nonce)
    if header.get("error") is not None:
        _field(header, "error", str, "maps")
        return declared(header, lambda _i, _n: None, "maps")
    arrays = declared(header, lambda i, name: ("|u1", reduced_shape(*shapes[i]))
                      if name == "explainability" and i < len(shapes) else None, "maps")
    if len(arrays) != len(shapes):
        raise WireError(f"{len(arrays)} explainability maps for a batch of {len(shapes)} images")
    return arrays


class Channel:
    """The parent's end of the socket pair: bounded, deadline-checked frames."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.sock.setblocking(True)
        self.buf = bytearray()  # read ahead: at most one recv's worth beyond the frame asked for
        self.poller = select.poll()  # poll, not select: descriptors above 1024 happen
        self.poller.register(sock, select.POLLIN)

    def _ready(self, seconds: float) -> bool:
        return bool(self.poller.poll(max(0, int(seconds * 1000))))

    def close(self) -> None:
        self.sock.close()

    def check_quiet(self) -> None:
        """Before a hand-over: nothing may be waiting. WireError when the child wrote a message
        nobody asked for (e.g. an answer before its batch), Closed when it closed its end."""
        if self.buf:
            raise WireError("sent a message before its batch was handed over")
        if not self._ready(0):
            return
        try:
            peek = self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        except OSError:
            raise Closed from None
        if not peek:
            raise Closed
        raise WireError("sent a message before its batch was handed over")

    def send(self, header: dict, fd: int | None, timeout: float | None) -> None:
        """Send a message (with ``fd`` on its first byte); Timeout when the child does not read."""
        data = child.encode(header)[0]
        self.sock.settimeout(timeout)
        try:
            sent = socket.send_fds(self.sock, [data], [fd]) if fd is not None else 0
            self.sock.sendall(data[sent:])
        except socket.timeout:
            raise Timeout from None
        except OSError:
            raise Closed from None
        finally:
            self.sock.settimeout(None)

    def _wait(self, deadline: float | None, alive: Callable[[], bool]) -> None:
        while True:
            left = 0.2 if deadline is None else min(0.2, deadline - time.monotonic())
            if left <= 0:
                raise Timeout
            if self._ready(left):
                return
            if not alive() and not self._ready(0):
                raise Closed

    def _fill(self, need: int, deadline: float | None, alive) -> None:
        """Buffer at least ``need`` bytes (at most 64 KiB more: what one recv brings)."""
        while len(self.buf) < need:
            self._wait(deadline, alive)
            try:
                data = self.sock.recv(max(need - len(self.buf), CHUNK), socket.MSG_DONTWAIT)
            except BlockingIOError:
                continue
            except OSError:
                raise Closed from None
            if not data:
                raise Closed
            self.buf += data

    def read_into(self, view: memoryview, deadline: float | None, alive) -> None:
        got = min(len(self.buf), len(view))
        view[:got] = self.buf[:got]
        del self.buf[:got]
        while got < len(view):
            self._wait(deadline, alive)
            try:
                k = self.sock.recv_into(view[got:], len(view) - got, socket.MSG_DONTWAIT)
            except BlockingIOError:
                continue
            except OSError:
                raise Closed from None
            if k == 0:
                raise Closed
            got += k

    def read_header(self, cap: int, deadline: float | None, alive) -> dict:
        """The next frame's header: its length is checked against ``cap`` before it is read."""
        size = child.PREFIX.size
        self._fill(size, deadline, alive)
        (length,) = child.PREFIX.unpack(self.buf[:size])
        if length > cap:
            raise WireError(f"a message header of {length} bytes was announced (at most {cap})")
        self._fill(size + length, deadline, alive)
        data = bytes(self.buf[size:size + length])
        del self.buf[:size + length]
        return parse_header(data)

    def read_arrays(self, arrays: list, deadline: float | None, alive) -> list[np.ndarray]:
        """The declared (and checked) arrays' bytes, read straight into arrays of that shape."""
        out = []
        for _name, dtype, shape in arrays:
            a = np.empty(shape, dtype=dtype)
            if a.nbytes:
                self.read_into(memoryview(a).cast("B"), deadline, alive)
            out.append(a)
        return out
