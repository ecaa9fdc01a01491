"""The worker that runs INSIDE the submission's environment.

Started by the parent as ``<env python> child.py`` (a script path, not ``-m``):
the submission's environment holds only the submission, its requirements and
the interface shim, never our package. So this file imports only the standard
library at the top and numpy once running; the parent imports it too, for the
message names, caps and the frame encoder below.

Wire format (docs/contracts.md, "Wire format"): no code in it, nothing pickled.
A message is a frame: an 8-byte big-endian length, a UTF-8 JSON header of that
length (an object; at most ``header_cap(n)`` bytes and MAX_DEPTH levels of
nesting), then the raw bytes of the arrays the header declares in its
``arrays`` list ({"name", "dtype", "shape"}, C order), one after another. It
travels over a Unix socket pair whose child end is descriptor ENV_FD; a batch's
memory file descriptor rides on the batch message's first byte (SCM_RIGHTS).

  child -> parent  {"op": "ready", "python", "numpy", "module_file", "accepts_device", "load_s"}
  parent -> child  {"op": "batch"|"ping", "id", "nonce", "size", "images": [[offset, h, w]],
                    "meta": [dict], "device"} + the batch's descriptor
  child -> parent  {"op": "result", "id", "nonce", "seconds", "ignored": [str], "error": null|str,
                    "output": {key: plain value}, "maps": bool, "arrays": [...]}
                    arrays: "probabilities" float64 (n, 3), "OOD_scores" float64 (n,) when
                    they are numbers of the right shape; otherwise the plain value goes in
                    "output" for the parent's validation to name the problem
  child -> parent  {"op": "maps", "id", "nonce", "error": null|str, "arrays": [...]}
                    only when "maps" was true: n "explainability" uint8 arrays, image i's
                    of shape reduced_shape(h_i, w_i); sent after the timed answer
  child -> parent  {"op": "idle", "id", "nonce"}   (after dropping its references to the batch)
  child -> parent  {"op": "error", "stage", "message", "traceback"}
  parent -> child  {"op": "stop"}

The parent trusts none of it: it checks every header against the batch it handed
over (ingestion/handover/wire.py). "nonce" is fresh per hand-over, so an answer written
before its batch was handed over cannot carry it.

Images arrive in a nameless memory file written by the parent (RGB uint8 HxWx3),
one per batch, sealed or read-only, that the parent never writes again (buffers.py);
the child maps it copy-on-write (MAP_PRIVATE: a component may modify its input arrays in
place, in its own copy of the pages it touches) and wraps the images in numpy views, no
copy. A mapping is never closed here: it lives as long as a view on it does, and its
bytes never change, so images the submission keeps stay valid. "ping" runs the same
path without calling predict(): the parent times it to state the hand-over's own cost.
"seconds" is
the child's own clock, a diagnostic only: the scored time is measured by the
parent, out of the submission's reach.
"""

import json
import os
import socket
import struct
import sys

OP_READY = "ready"
OP_BATCH = "batch"
OP_RESULT = "result"
OP_MAPS = "maps"
OP_IDLE = "idle"
OP_PING = "ping"
OP_ERROR = "error"
OP_STOP = "stop"
ENV_FD = "CHALLENGE_WELDING_CHILD_FD"
ENV_MODULE = "CHALLENGE_WELDING_COMPONENT_MODULE"
DEFAULT_MODULE = "challenge_solution.AIComponent"
CLASS_NAME = "MyAIComponent"
# The keys the evaluation reads; others are named in "ignored" and dropped here.
OUTPUT_KEYS = ("predictions", "probabilities", "OOD_scores", "explainability")
# A copy of contract.explanation_maps.MAP_SCALE (this file cannot import our package;
# tests/ingestion/handover/test_wire.py keeps them equal).
MAP_SCALE = 4

PREFIX = struct.Struct("!Q")  # the header's length
HEADER_BASE = 64 << 10  # header cap: 64 KiB, plus per image of the batch ...
HEADER_PER_IMAGE = 512  # ... room for its label and a plain-value row
MAX_DEPTH = 16  # nesting of a header (message, output, key, list, row: 5 used)
MAX_TEXT = 200  # characters of a string kept by to_plain
MAX_TRACEBACK = 16 << 10


def header_cap(n_images: int = 0) -> int:
    """Largest header either side accepts for a message about a batch of ``n_images``."""
    return HEADER_BASE + HEADER_PER_IMAGE * max(0, int(n_images))


def encode(header: dict, arrays=()) -> list:
    """A frame as buffers to send in order: prefix + JSON header, then each array's bytes.

    ``arrays``: (name, numpy array) pairs, declared in the header's "arrays" list."""
    header = dict(header, arrays=[{"name": name, "dtype": a.dtype.str, "shape": list(a.shape)}
                                  for name, a in arrays])
    data = json.dumps(header, separators=(",", ":")).encode()
    return [PREFIX.pack(len(data)) + data] + [memoryview(a).cast("B") for _n, a in arrays]


def send(sock, header: dict, arrays=()) -> None:
    send_frame(sock, encode(header, arrays))


def send_frame(sock, frame: list) -> None:
    """One system call for a small frame (the usual answer), one per buffer otherwise."""
    if sum(len(b) for b in frame) <= 1 << 20:
        sock.sendall(b"".join(frame))
    else:
        for buf in frame:
            sock.sendall(buf)


class Reader:
    """The child's side of reading frames from the parent (trusted), collecting descriptors."""

    def __init__(self, sock):
        self.sock, self.buf, self.fds = sock, bytearray(), []

    def _exact(self, n: int) -> bytes:
        while len(self.buf) < n:
            data, fds, _flags, _addr = socket.recv_fds(self.sock, max(65536, n - len(self.buf)), 4)
            self.fds += fds
            if not data:
                raise EOFError
            self.buf += data
        out, self.buf = bytes(self.buf[:n]), self.buf[n:]
        return out

    def frame(self) -> dict:
        (n,) = PREFIX.unpack(self._exact(PREFIX.size))
        return json.loads(self._exact(n))


def to_plain(value, depth=0):
    """Turn numpy arrays/scalars, tuples and lists into plain Python lists, floats, ints, strs.

    Anything else becomes ``{"__unsupported__": repr}`` so the parent's validation can name
    it; strings longer than MAX_TEXT are cut (a label is never that long).
    """
    if depth > 6:
        return {"__unsupported__": "nested too deeply"}
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return value if len(value) <= MAX_TEXT else value[:MAX_TEXT] + "..."
    tolist = getattr(value, "tolist", None)
    if tolist is not None and hasattr(value, "dtype"):  # numpy array or numpy scalar
        try:
            return to_plain(tolist(), depth + 1)
        except Exception:  # an exotic dtype: report it, do not crash
            return {"__unsupported__": repr(value)[:MAX_TEXT]}
    if isinstance(value, (list, tuple)):
        return [to_plain(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {str(k)[:MAX_TEXT]: to_plain(v, depth + 1) for k, v in value.items()}
    return {"__unsupported__": f"{type(value).__name__}: {repr(value)[:MAX_TEXT]}"}


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_scalar(v, np) -> bool:
    """A real number, Python's or numpy's (not a bool, not a string)."""
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def _is_row(r, width, np) -> bool:
    if isinstance(r, np.ndarray):
        return r.shape == (width,) and r.dtype.kind in "iuf"
    return isinstance(r, (list, tuple)) and len(r) == width and all(_is_scalar(v, np) for v in r)


def numbers(value, n: int, width):
    """``value`` as float64 of shape (n, width) (or (n,) when width is None), or None when it
    is not that many real numbers (then the parent's validation names the problem)."""
    import numpy as np

    if isinstance(value, np.ndarray) and value.dtype.kind in "iuf":
        a = value.reshape(n) if width is None and value.shape == (n, 1) else value
        return a.astype(np.float64) if a.shape == ((n,) if width is None else (n, width)) \
            else None
    if isinstance(value, (list, tuple)) and len(value) == n:  # fast: no detour through lists
        if (all(_is_scalar(v, np) for v in value) if width is None
                else all(_is_row(r, width, np) for r in value)):
            return np.array(value, dtype=np.float64).reshape((n,) if width is None else (n, width))
    plain = to_plain(value)
    if not isinstance(plain, list) or len(plain) != n:
        return None
    if width is None:
        plain = [v[0] if isinstance(v, list) and len(v) == 1 else v for v in plain]
        return np.array(plain, dtype=np.float64) if all(map(_is_number, plain)) else None
    rows_ok = all(isinstance(r, list) and len(r) == width and all(map(_is_number, r))
                  for r in plain)
    return np.array(plain, dtype=np.float64).reshape(n, width) if rows_ok else None


def reduce_map(m):
    """Copy of contract.explanation_maps.reduce_map (see there): 4x4 area mean as uint8."""
    import numpy as np

    h, w = m.shape
    oh, ow = max(1, h // MAP_SCALE), max(1, w // MAP_SCALE)
    rows, cols = np.arange(oh) * MAP_SCALE, np.arange(ow) * MAP_SCALE
    sums = np.add.reduceat(np.add.reduceat(np.asarray(m, dtype=np.float64), rows, axis=0),
                           cols, axis=1)
    counts = np.outer(np.diff(np.append(rows, h)), np.diff(np.append(cols, w)))
    return np.rint(sums / counts * 255.0).clip(0, 255).astype(np.uint8)


def reduce_maps(maps, shapes):
    """(reduced uint8 maps, None) or (None, one line naming the image and the problem)."""
    import numpy as np

    n = len(shapes)
    if isinstance(maps, np.ndarray) and maps.ndim == 3:
        maps = list(maps)
    if not isinstance(maps, (list, tuple)):
        return None, f"'explainability' must be a list of one map per image, got {type(maps).__name__}"
    if len(maps) != n:
        return None, f"'explainability' has {len(maps)} maps for a batch of {n} images"
    out = []
    for i, (m, (h, w)) in enumerate(zip(maps, shapes)):
        try:
            a = np.asarray(m, dtype=np.float64)
        except (TypeError, ValueError):
            return None, f"explainability of image {i} is not an array of numbers ({type(m).__name__})"
        if a.shape != (h, w):
            return None, (f"explainability of image {i} has shape {tuple(a.shape)}, expected "
                          f"({h}, {w}) (the image's height and width)")
        if not np.isfinite(a).all():
            return None, f"explainability of image {i} contains NaN or infinity"
        if a.size and (a.min() < 0 or a.max() > 1):
            return None, (f"explainability of image {i} has values outside [0, 1] "
                          f"(min {a.min():.4g}, max {a.max():.4g})")
        out.append(reduce_map(a))
    return out, None


def pack_output(out, n: int):
    """The result's "output" (plain values), its arrays, the ignored keys and whether maps follow."""
    if not isinstance(out, dict):
        return {"output": to_plain(out), "ignored": [], "maps": False}, []
    ignored = sorted(str(k)[:MAX_TEXT] for k in out if k not in OUTPUT_KEYS)[:50]
    plain, arrays = {}, []
    if "predictions" in out:
        plain["predictions"] = to_plain(out["predictions"])
    for key, width in (("probabilities", 3), ("OOD_scores", None)):
        if out.get(key) is None:
            continue
        a = numbers(out[key], n, width)
        if a is None:
            plain[key] = to_plain(out[key])
        else:
            arrays.append((key, a))
    fields = {"output": plain, "ignored": ignored, "maps": out.get("explainability") is not None}
    return fields, arrays


def _error(sock, stage, exc):
    import traceback

    tb = traceback.format_exc()
    sys.stderr.write(tb)
    sys.stderr.flush()
    send(sock, {"op": OP_ERROR, "stage": stage, "message": f"{type(exc).__name__}: {exc}"[:2000],
                "traceback": tb[-MAX_TRACEBACK:]})


def _answer(sock, msg, component, images, accepts_device, time):
    """predict() on one batch; the answer, then its maps (outside the timed answer). Returns
    the exit status on failure, else None."""
    tag = {"id": msg["id"], "nonce": msg["nonce"]}
    n = len(images)
    kwargs = {"device": msg["device"]} if accepts_device and msg.get("device") else {}
    try:
        t0 = time.perf_counter()
        out = component.predict(images, msg["meta"], **kwargs)
        seconds = time.perf_counter() - t0
        fields, arrays = pack_output(out, n)
        frame = encode({"op": OP_RESULT, **tag, "seconds": seconds, "error": None, **fields},
                       arrays)
        size = len(frame[0]) - PREFIX.size
        if size > header_cap(n):  # e.g. a huge label: say so instead of sending it
            fields = {"output": None, "ignored": [], "maps": False}
            frame = encode({"op": OP_RESULT, **tag, "seconds": seconds, **fields,
                            "error": f"the answer is too large to send ({size} bytes of plain "
                                     f"values, at most {header_cap(n)} for {n} images)"})
    except BaseException as exc:  # report any failure of predict, SystemExit included
        _error(sock, "predict", exc)
        return 1
    send_frame(sock, frame)
    if fields["maps"]:
        try:
            maps, problem = reduce_maps(out["explainability"], [im.shape[:2] for im in images])
        except Exception as exc:  # an exotic object: name it, do not crash
            maps, problem = None, f"explainability could not be read ({type(exc).__name__}: {exc})"
        send(sock, {"op": OP_MAPS, **tag, "error": problem and problem[:2000]},
             [("explainability", m) for m in maps or []])
    return None


def main():  # over 60 lines: the child's whole life, in the order its messages go out
    # Running a script puts its folder first on sys.path; that folder is our
    # package's, not the submission's: drop it so nothing there shadows theirs.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    import faulthandler
    import inspect
    import mmap
    import time

    faulthandler.enable()  # a segfault in the submission prints its Python stack to the log
    sock = socket.socket(fileno=int(os.environ.pop(ENV_FD)))
    reader = Reader(sock)
    stage = "import"
    try:
        import importlib

        import numpy as np

        module = importlib.import_module(os.environ.get(ENV_MODULE, DEFAULT_MODULE))
        cls = getattr(module, CLASS_NAME)
        stage = "init"
        component = cls()
        stage = "load_model"
        t0 = time.perf_counter()
        component.load_model()
        load_s = time.perf_counter() - t0
        try:
            accepts_device = "device" in inspect.signature(component.predict).parameters
        except (TypeError, ValueError):
            accepts_device = False
    except BaseException as exc:  # report any failure, SystemExit included
        _error(sock, stage, exc)
        return 1
    module_file = getattr(module, "__file__", None)
    send(sock, {"op": OP_READY, "python": sys.version.split()[0], "numpy": np.__version__,
                "module_file": module_file if isinstance(module_file, str) else None,
                "accepts_device": accepts_device, "load_s": load_s})
    while True:
        try:
            msg = reader.frame()
        except (EOFError, OSError):
            return 0
        if msg["op"] == OP_STOP:
            break
        fd = reader.fds.pop(0)
        try:  # copy-on-write: a sealed, read-only buffer; in-place edits stay ours
            mm = mmap.mmap(fd, msg["size"], access=mmap.ACCESS_COPY)  # outlives the descriptor
        finally:
            os.close(fd)
        # views keep the mapping alive (their base); nothing here ever closes it
        images = [np.ndarray((h, w, 3), dtype=np.uint8, buffer=mm, offset=off)
                  for off, h, w in msg["images"]]
        if msg["op"] == OP_PING:
            send(sock, {"op": OP_RESULT, "id": msg["id"], "nonce": msg["nonce"], "seconds": 0.0,
                        "output": None, "ignored": [], "maps": False, "error": None})
        elif _answer(sock, msg, component, images, accepts_device, time) is not None:
            return 1
        # Our references go after the answer and before "idle": if the submission keeps
        # none, the batch's memory is freed here, outside any timed call.
        del images, mm
        send(sock, {"op": OP_IDLE, "id": msg["id"], "nonce": msg["nonce"]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
