"""The worker that runs INSIDE the submission's environment.

Started by the parent as ``<env python> child.py`` (a script path, not ``-m``):
the submission's environment holds only the submission, its requirements and
the interface shim, never our package. So this file imports only the standard
library at the top and numpy once running; the parent imports it too, for the
message names below.

Protocol (``multiprocessing.connection`` over a local socket, pickled plain
Python objects only, so that the two sides' numpy versions never meet):

  child -> parent  {"op": "ready", versions..., "accepts_device": bool, "load_s": float}
  parent -> child  {"op": "batch"|"ping", "id": int, "size": int, "images": [(offset, h, w)],
                    "meta": [dict], "device": str|None}, then the batch's file descriptor
  child -> parent  {"op": "result", "id": int, "seconds": float, "output": plain,
                    "ignored": [keys of the output dict not in OUTPUT_KEYS]}
  child -> parent  {"op": "idle", "id": int}   (after dropping its own references to the batch)
  child -> parent  {"op": "error", "stage": "import"|"init"|"load_model"|"predict", "message": str,
                    "traceback": str}
  parent -> child  {"op": "stop"}

Images arrive in a nameless memory file written by the parent (RGB uint8 HxWx3),
one per batch, whose descriptor comes with the message; the child maps it and
wraps the images in numpy views, no copy. A mapping is never closed here: it
lives as long as a view on it does, so images the submission keeps stay valid.
"ping" runs the same path without calling predict(): the parent times it to
state the hand-over's own cost. "seconds" is the child's own clock, a diagnostic
only: the scored time is measured by the parent, out of the submission's reach.
"""

import os
import sys

OP_READY = "ready"
OP_BATCH = "batch"
OP_RESULT = "result"
OP_IDLE = "idle"
OP_PING = "ping"
OP_ERROR = "error"
OP_STOP = "stop"
ENV_ADDRESS = "CHALLENGE_WELDING_CHILD_ADDRESS"
ENV_AUTHKEY = "CHALLENGE_WELDING_CHILD_AUTHKEY"
ENV_MODULE = "CHALLENGE_WELDING_COMPONENT_MODULE"
DEFAULT_MODULE = "challenge_solution.AIComponent"
CLASS_NAME = "MyAIComponent"
# The keys the evaluation reads. Others (e.g. the starter kit's optional per-pixel
# "explainability" maps) are dropped here, before any conversion: sending them
# would cost more than the prediction itself.
OUTPUT_KEYS = ("predictions", "probabilities", "OOD_scores")


def to_plain(value, depth=0):
    """Turn numpy arrays/scalars, tuples and lists into plain Python lists, floats, ints, strs.

    Anything else becomes ``{"__unsupported__": repr}`` so the parent's
    validation can name it instead of failing to unpickle a foreign type.
    """
    if depth > 6:
        return {"__unsupported__": "nested too deeply"}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    tolist = getattr(value, "tolist", None)
    if tolist is not None and hasattr(value, "dtype"):  # numpy array or numpy scalar
        try:
            return to_plain(tolist(), depth + 1)
        except Exception:  # noqa: BLE001 - an exotic dtype: report it, do not crash
            return {"__unsupported__": repr(value)[:200]}
    if isinstance(value, (list, tuple)):
        return [to_plain(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {str(k): to_plain(v, depth + 1) for k, v in value.items()}
    return {"__unsupported__": f"{type(value).__name__}: {repr(value)[:200]}"}


def _map_batch(conn, msg):
    """Receive the batch's descriptor and map it; the mapping outlives the descriptor."""
    import mmap
    from multiprocessing.reduction import recv_handle

    fd = recv_handle(conn)
    try:
        return mmap.mmap(fd, msg["size"])
    finally:
        os.close(fd)


def _error(conn, stage, exc):
    import traceback

    tb = traceback.format_exc()
    sys.stderr.write(tb)
    sys.stderr.flush()
    conn.send({"op": OP_ERROR, "stage": stage, "message": f"{type(exc).__name__}: {exc}",
               "traceback": tb})


def main():
    # Running a script puts its folder first on sys.path; that folder is our
    # package's, not the submission's: drop it so nothing there shadows theirs.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    import faulthandler
    import inspect
    import time
    from multiprocessing.connection import Client

    faulthandler.enable()  # a segfault in the submission prints its Python stack to the log
    conn = Client(os.environ[ENV_ADDRESS], authkey=bytes.fromhex(os.environ[ENV_AUTHKEY]))
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
    except BaseException as exc:  # noqa: BLE001 - report any failure, SystemExit included
        _error(conn, stage, exc)
        return 1
    conn.send({"op": OP_READY, "python": sys.version.split()[0], "numpy": np.__version__,
               "module_file": getattr(module, "__file__", None), "accepts_device": accepts_device,
               "load_s": load_s})
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return 0
        if msg["op"] == OP_STOP:
            break
        mm = _map_batch(conn, msg)
        # views keep the mapping alive (their base); nothing here ever closes it
        images = [np.ndarray((h, w, 3), dtype=np.uint8, buffer=mm, offset=off)
                  for off, h, w in msg["images"]]
        if msg["op"] == OP_PING:
            conn.send({"op": OP_RESULT, "id": msg["id"], "seconds": 0.0, "output": None,
                       "ignored": []})
        else:
            kwargs = {"device": msg["device"]} if accepts_device and msg.get("device") else {}
            try:
                t0 = time.perf_counter()
                out = component.predict(images, msg["meta"], **kwargs)
                seconds = time.perf_counter() - t0
                ignored = []
                if isinstance(out, dict):
                    ignored = sorted(str(k) for k in out if k not in OUTPUT_KEYS)
                    out = {k: out[k] for k in OUTPUT_KEYS if k in out}
                plain = to_plain(out)
            except BaseException as exc:  # noqa: BLE001
                _error(conn, "predict", exc)
                return 1
            conn.send({"op": OP_RESULT, "id": msg["id"], "seconds": seconds, "output": plain,
                       "ignored": ignored})
            del out, plain
        # Our references go after the answer and before "idle": if the submission keeps
        # none, the batch's memory is freed by the parent, outside any timed call.
        del images, mm
        conn.send({"op": OP_IDLE, "id": msg["id"]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
