"""Attacks on the parent through the wire and the output folder (issue 17, classes 1, 6, 7, 8;
explainability transport of issue 20), each a real submission installed and run by the real
`ingest`. The hostile code finds the evaluator's channel the way a cheater would (walking
the garbage collector's objects) and writes bytes of its own choosing on it: under the old
protocol (multiprocessing.connection) it speaks pickle, under the new one raw frames.
Each attack test fails on the pickle-protocol ingestion (checked against main at 8f95ec2)."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from challenge_welding.commands import cli
from challenge_welding.contract.explanation_maps import read_explainability
from challenge_welding.ingestion.run.ingest import ingest

from ingestion_helpers import CONFIG, GOOD, SAMPLES, failed_with_one_line, make_reference, make_submission

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs Linux /proc")

# The cheater's toolbox, shipped in the submission: find the channel to the evaluator and
# write on it, whatever the protocol.
ATTACK = '''
import gc
import json
import socket
import struct


def channel():
    try:
        from multiprocessing.connection import Connection
    except ImportError:
        Connection = None
    for o in gc.get_objects():
        if Connection is not None and isinstance(o, Connection) and not o.closed:
            return "pickle", o
    for o in gc.get_objects():
        if isinstance(o, socket.socket) and o.fileno() >= 0 and o.family == socket.AF_UNIX:
            return "wire", o
    raise RuntimeError("no channel to the evaluator found")


def send_raw(pickle_bytes, wire_bytes):
    kind, ch = channel()
    if kind == "pickle":
        ch._send(pickle_bytes)
    else:
        ch.sendall(wire_bytes)


def frame(header):
    data = json.dumps(header).encode()
    return struct.pack("!Q", len(data)) + data


def send_message(header):
    """A well-formed message in whichever protocol the evaluator speaks."""
    kind, ch = channel()
    if kind == "pickle":
        ch.send(header)
    else:
        ch.sendall(frame(header))
'''

HEAD = '''
import os
import pickle
import struct
import threading
import time
import numpy as np
from challenge_welding.ai_component_interface import AbstractAIComponent
from challenge_solution.attack import channel, frame, send_message, send_raw


def answer(n):
    return {"predictions": ["OK"] * n, "probabilities": [[0.1, 0.9, 0.0]] * n,
            "OOD_scores": [0.0] * n}
'''


def run(tmp_path, data, env_cache, component, **opts):
    sub = make_submission(tmp_path / "sub", HEAD + component,
                          extra={"challenge_solution/attack.py": ATTACK})
    out = tmp_path / "pred"
    opts.setdefault("batch_size", 3)
    opts.setdefault("sets", ["performance"])
    report = ingest(sub, data, out, cache_dir=env_cache, progress=False, batch_timeout=60,
                    **opts)
    assert report == json.loads((out / "ingestion.json").read_text())
    return report, out


# --- class 1: a pickle with a payload is never unpickled --------------------------------------
def test_class1_a_pickled_payload_runs_no_code_in_the_evaluator(tmp_path, input_data, env_cache):
    marker = tmp_path / "unpickled-here"
    component = f'''
class Payload:
    def __reduce__(self):  # unpickling it calls os.mkdir(MARKER): code run by the reader
        return (os.mkdir, ({str(marker)!r},))


class MyAIComponent(AbstractAIComponent):
    def load_model(self, config_file=None):
        pass

    def predict(self, input_images, images_meta_informations, device="cuda"):
        p = pickle.dumps({{"op": "result", "payload": Payload()}})
        frame_ = struct.pack("!i", len(p)) + p  # multiprocessing.connection's frame
        send_raw(frame_, frame_)
        time.sleep(5)
        return answer(len(input_images))
'''
    report, out = run(tmp_path, input_data, env_cache, component)
    assert not marker.exists()  # on the pickle protocol the evaluator made this folder
    failed_with_one_line(report, out, "performance: the submission broke the message protocol "
                         "during ", "set performance, batch 1/3", "bytes was announced")


# --- class 6: nothing the submission leaves in the output survives; the scorer refuses extras --
STEAL = '''
import shutil


class MyAIComponent(AbstractAIComponent):
    def load_model(self, config_file=None):
        pass

    def predict(self, input_images, images_meta_informations, device="cuda"):
        # the evaluation images, copied where participants can download them
        shutil.copy("@IMAGE@", os.path.join("@OUT@", "per000.jpeg"))
        os.makedirs(os.path.join("@OUT@", "loot"), exist_ok=True)
        np.save(os.path.join("@OUT@", "loot", "batch.npy"), input_images[0])
        return answer(len(input_images))
'''


def test_class6_copied_images_are_removed_and_the_scorer_refuses_extras(tmp_path, input_data,
                                                                         env_cache, capsys,
                                                                         monkeypatch):
    # Without Landlock (ABI capped at 0) the child can reach both folders: the output's own
    # cleaning is then the line of defence (with Landlock the copy itself is refused:
    # test_sandbox.py, class 5).
    monkeypatch.setenv("CHALLENGE_WELDING_LANDLOCK_ABI_MAX", "0")
    monkeypatch.setenv("CHALLENGE_WELDING_NAMESPACES", "0")  # no mount namespace either
    out = tmp_path / "pred"
    image = input_data / "performance" / "images" / "per000.jpeg"
    component = STEAL.replace("@IMAGE@", str(image)).replace("@OUT@", str(out))
    report, out = run(tmp_path, input_data, env_cache, component, sets=None,
                      unsafe_unconfined=True)
    assert report["status"] == "ok", report["errors"]
    assert not (out / "per000.jpeg").exists() and not (out / "loot").exists()
    assert any("removed 2 entries the submission left in the output folder: loot, per000.jpeg"
               in w for w in report["warnings"]), report["warnings"]
    ref = make_reference(tmp_path / "ref", CONFIG)
    score = ["score", "--reference", str(ref), "--predictions", str(out)]
    assert cli.main(score + ["--output", str(tmp_path / "s1")]) == 0  # the clean folder scores
    shutil.copy(image, out / "leaked.jpeg")  # a file the ingestion did not write
    capsys.readouterr()
    assert cli.main(score + ["--output", str(tmp_path / "s2")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.splitlines()[-1] == (f"error: {out / 'leaked.jpeg'} is not in the manifest of "
                                    "ingestion.json: the ingestion did not write it"), err
    assert "Traceback" not in err


# --- class 7: malformed protocol ---------------------------------------------------------------
def _raw(pickle_bytes: str, wire_bytes: str) -> str:
    return f'''
class MyAIComponent(AbstractAIComponent):
    def load_model(self, config_file=None):
        pass

    def predict(self, input_images, images_meta_informations, device="cuda"):
        send_raw({pickle_bytes}, {wire_bytes})
        time.sleep(5)
        return answer(len(input_images))
'''


DEEP = '(b"[" * 100000 + b"]" * 100000)'
DEEP_SMALL = '(b"[" * 30000 + b"]" * 30000)'


@pytest.mark.parametrize("pickle_bytes, wire_bytes, message", [
    # a None message
    ('struct.pack("!i", len(pickle.dumps(None))) + pickle.dumps(None)', 'frame(None)',
     "a message that is not an object with an 'op' (None)"),
    # 100,000 levels of nesting: larger than any header may be
    (f'struct.pack("!i", len({DEEP})) + {DEEP}', f'struct.pack("!Q", len({DEEP})) + {DEEP}',
     "a message header of 200000 bytes was announced (at most 67072)"),
    # 30,000 levels within the size cap: refused before json.loads sees it
    (f'struct.pack("!i", len({DEEP_SMALL})) + {DEEP_SMALL}',
     f'struct.pack("!Q", len({DEEP_SMALL})) + {DEEP_SMALL}',
     "a message nested 30000 levels deep (at most 16)"),
    # a header announcing 2^60 bytes
    ('struct.pack("!i", -1) + struct.pack("!Q", 2 ** 60)', 'struct.pack("!Q", 2 ** 60)',
     "a message header of 1152921504606846976 bytes was announced (at most 67072)"),
], ids=["none", "nested-100000", "nested-30000", "size-2^60"])
def test_class7_malformed_messages_fail_the_run_in_one_line(tmp_path, input_data, env_cache,
                                                            pickle_bytes, wire_bytes, message):
    report, out = run(tmp_path, input_data, env_cache, _raw(pickle_bytes, wire_bytes))
    failed_with_one_line(report, out, "the submission broke the message protocol during ",
                         "set performance, batch 1/3", message)
    assert not (out / "performance.parquet").exists()


EARLY = '''
class MyAIComponent(AbstractAIComponent):
    def load_model(self, config_file=None):
        self.calls = 0

    def predict(self, input_images, images_meta_informations, device="cuda"):
        self.calls += 1
        n = len(input_images)
        if self.calls == 2:  # the warm-up, then batch 0: answer batch 1 before it is handed over
            def early():
                time.sleep(0.3)  # after this batch's answer and "idle"
                res = {"op": "result", "id": 1, "seconds": 0.0, "output": answer(n),
                       "ignored": [], "nonce": "0" * 16, "maps": False, "error": None}
                send_message(res)
                send_message({"op": "idle", "id": 1, "nonce": "0" * 16})
            threading.Thread(target=early).start()
        if self.calls == 3:
            time.sleep(2)  # batch 1: slow, so that the early answer arrives first
        return answer(n)
'''


def test_class7_an_answer_before_its_hand_over_fails_the_run(tmp_path, input_data, env_cache):
    report, out = run(tmp_path, input_data, env_cache, EARLY, decode_stock_mb=0)
    failed_with_one_line(report, out, "the submission broke the message protocol during set "
                         "performance, batch 2/3")
    assert ("sent a message before its batch was handed over" in report["errors"][0]
            or "not written for this hand-over" in report["errors"][0]), report["errors"][0]


PLANT = '''
class MyAIComponent(AbstractAIComponent):
    def load_model(self, config_file=None):
        pass

    def predict(self, input_images, images_meta_informations, device="cuda"):
        # folders at every temporary name a writer might use, and at the final names
        for name in (".performance.parquet.tmp", ".ingestion.json.tmp", "performance.parquet",
                     "ingestion.json.tmp", ".cw-publish-x", "ingestion.json"):
            os.makedirs(os.path.join("@OUT@", name, "sub"), exist_ok=True)
        return answer(len(input_images))
'''


def test_class7_folders_planted_at_temporary_names_do_not_matter(tmp_path, input_data,
                                                                  env_cache, monkeypatch):
    monkeypatch.setenv("CHALLENGE_WELDING_LANDLOCK_ABI_MAX", "0")  # no Landlock: it can plant
    monkeypatch.setenv("CHALLENGE_WELDING_NAMESPACES", "0")  # no mount namespace either
    out = tmp_path / "pred"
    report, out = run(tmp_path, input_data, env_cache, PLANT.replace("@OUT@", str(out)),
                      unsafe_unconfined=True)
    assert report["status"] == "ok", report["errors"]
    assert sorted(p.name for p in out.iterdir()) == [
        "ingestion.json", "ingestion.log", "performance.parquet", "submission_output.log"]
    assert (out / "performance.parquet").is_file()
    assert pd.read_parquet(out / "performance.parquet")["predicted_state"].eq("OK").all()
    assert any("removed 4 entries the submission left in the output folder: .cw-publish-x, "
               ".ingestion.json.tmp, .performance.parquet.tmp, ingestion.json.tmp" in w
               for w in report["warnings"]), report["warnings"]


# --- class 8: a 1 GB answer is refused without the evaluator holding it ------------------------
HUGE = '''
class MyAIComponent(AbstractAIComponent):
    def load_model(self, config_file=None):
        pass

    def predict(self, input_images, images_meta_informations, device="cuda"):
        size = 1 << 30
        try:  # announce 1 GiB, then stream it (1 MiB at a time: the child holds little)
            send_raw(struct.pack("!i", -1) + struct.pack("!Q", size),
                     struct.pack("!Q", size))
            chunk = b"\\0" * (1 << 20)
            kind, ch = channel()
            for _ in range(size >> 20):
                ch._send(chunk) if kind == "pickle" else ch.sendall(chunk)
        except OSError:
            pass  # the evaluator hung up
        time.sleep(5)
        return answer(len(input_images))
'''

# ru_maxrss of RUSAGE_SELF: the ingestion's own process, not the submission's
PEAK = """
import json, resource, sys
from challenge_welding.ingestion.run.ingest import ingest
try:
    r = ingest(sys.argv[1], sys.argv[2], sys.argv[3], cache_dir=sys.argv[4], progress=False,
               verbose=False, sets=["performance"], batch_size=3, batch_timeout=120)
except Exception as exc:  # the old protocol raised here: the peak is still what is measured
    r = {"status": "raised", "errors": [repr(exc)[:300]]}
print(json.dumps({"status": r["status"], "errors": r["errors"],
                  "peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def _peak(tmp_path, name, component, data, env_cache):
    sub = make_submission(tmp_path / name, component,
                          extra={"challenge_solution/attack.py": ATTACK})
    proc = subprocess.run([sys.executable, "-c", PEAK, str(sub), str(data),
                           str(tmp_path / f"pred-{name}"), str(env_cache)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_class8_a_1gb_answer_is_refused_and_the_evaluator_stays_small(tmp_path, input_data,
                                                                     env_cache):
    good = _peak(tmp_path, "good", GOOD, input_data, env_cache)
    huge = _peak(tmp_path, "huge", HEAD + HUGE, input_data, env_cache)
    print(f"peak RSS of the ingestion: good run {good['peak_kb'] / 1024:.0f} MiB, "
          f"1 GiB answer {huge['peak_kb'] / 1024:.0f} MiB")
    assert good["status"] == "ok"
    # the ingestion's own peak is the good run's, give or take 100 MB: reading the answer
    # would have added at least 1 GB (the pickle protocol: +2 GB, then a traceback)
    assert huge["peak_kb"] - good["peak_kb"] < 100 * 1024, (good, huge)
    assert huge["status"] == "failed" and len(huge["errors"]) == 1, huge
    assert "a message header of 1073741824 bytes was announced" in huge["errors"][0]


# --- explainability maps (issue 20) -------------------------------------------------------------
MAPS = '''
class MyAIComponent(AbstractAIComponent):
    def load_model(self, config_file=None):
        pass

    def predict(self, input_images, images_meta_informations, device="cuda"):
        maps = []
        for i, img in enumerate(input_images):
            h, w = img.shape[:2]
            y, x = np.mgrid[:h, :w]
            maps.append(((y // 4 + x // 4) % 2).astype(np.float32))  # 4x4 checkerboard
        if @TRANSPOSE@ and len(maps) > 1:
            maps[1] = maps[1].T
        return {**answer(len(input_images)), "explainability": maps}
'''


def _expected_map(h, w):
    """By hand: 4x4 blocks of the checkerboard average to 0 or 1 (0 or 255); when h % 4 == 2
    the last block row also takes the 2 leftover rows (the next block row's parity): a mean
    of 4 rows of p and 2 of 1 - p, i.e. 4/6 (170) when p = 1, 2/6 (85) when p = 0."""
    rows, cols = max(1, h // 4), max(1, w // 4)
    out = np.empty((rows, cols), dtype=np.uint8)
    for i in range(rows):
        for j in range(cols):
            p = (i + j) % 2
            if i == rows - 1 and h % 4 == 2:
                out[i, j] = 170 if p else 85
            else:
                out[i, j] = 255 * p
    return out


def test_maps_are_kept_at_a_quarter_as_uint8(tmp_path, input_data, env_cache):
    report, out = run(tmp_path, input_data, env_cache, MAPS.replace("@TRANSPOSE@", "False"))
    assert report["status"] == "ok", report["errors"]
    assert report["sets"]["performance"]["explainability"] == "performance.explainability.parquet"
    maps = read_explainability(out, "performance")
    assert sorted(maps) == [f"per{i:03d}" for i in range(len(SAMPLES["performance"]))]
    for i, (_rgb, (w, h)) in enumerate(SAMPLES["performance"]):
        got = maps[f"per{i:03d}"]
        assert got.dtype == np.uint8 and got.shape == (h // 4, w // 4)
        np.testing.assert_array_equal(got, _expected_map(h, w))
    assert (_expected_map(18, 32)[-1] == [170, 85] * 4).all()  # the 18-row case is exercised
    assert read_explainability(out, "robustness") is None  # no maps, no file


def test_a_map_of_the_wrong_shape_fails_the_run_naming_the_image(tmp_path, input_data,
                                                                 env_cache):
    report, out = run(tmp_path, input_data, env_cache, MAPS.replace("@TRANSPOSE@", "True"))
    failed_with_one_line(
        report, out, "performance: invalid output of predict() on set performance, batch 1/3 "
        "(samples per000 .. per002): explainability of image 1 has shape (64, 36), expected "
        "(36, 64) (the image's height and width) (sample per001)")
    assert not (out / "performance.explainability.parquet").exists()


# --- class 6 on Codabench: the worker copies the submission into the output before the run ----
INSIDE = '''
import shutil


class MyAIComponent(AbstractAIComponent):
    def load_model(self, config_file=None):
        pass

    def predict(self, input_images, images_meta_informations, device="cuda"):
        # hidden inside a folder that was there before the run (the submission's own copy)
        shutil.copy("@IMAGE@", os.path.join("@OUT@", "challenge_solution", "per000.jpeg"))
        if @CHANGE@:
            with open(os.path.join("@OUT@", "requirements.txt"), "ab") as fh:
                fh.write(open("@IMAGE@", "rb").read())
        return answer(len(input_images))
'''


@pytest.mark.parametrize("change", [False, True], ids=["planted-inside", "changed"])
def test_class6_in_a_codabench_output_holding_the_submissions_copy(tmp_path, input_data,
                                                                   env_cache, change, monkeypatch):
    monkeypatch.setenv("CHALLENGE_WELDING_LANDLOCK_ABI_MAX", "0")  # as above: no Landlock
    monkeypatch.setenv("CHALLENGE_WELDING_NAMESPACES", "0")  # no mount namespace either
    from challenge_welding.contract.errors import SubmissionFailed
    from challenge_welding.scoring.provenance import read_report

    image = input_data / "performance" / "images" / "per000.jpeg"
    out = tmp_path / "pred"
    component = INSIDE.replace("@IMAGE@", str(image)).replace("@OUT@", str(out)) \
        .replace("@CHANGE@", str(change))
    sub = make_submission(tmp_path / "sub", HEAD + component,
                          extra={"challenge_solution/attack.py": ATTACK})
    shutil.copytree(sub, out)  # what Codabench's worker does with a submission
    report = ingest(sub, input_data, out, cache_dir=env_cache, progress=False,
                    sets=["performance"], batch_size=3, unsafe_unconfined=True)
    assert not (out / "challenge_solution" / "per000.jpeg").exists()
    assert report["preexisting"] == ["challenge_solution", "requirements.txt", "setup.py"]
    if not change:
        assert report["status"] == "ok", report["errors"]
        assert any("challenge_solution/per000.jpeg" in w for w in report["warnings"])
        read_report(out)  # the scorer accepts the submission's copy beside the predictions
        shutil.copy(image, out / "late.jpeg")
        with pytest.raises(SubmissionFailed, match="late.jpeg is not in the manifest"):
            read_report(out)
    else:
        failed_with_one_line(report, out, "the submission changed 1 file(s) that were in the "
                             "output folder before the run: requirements.txt")


CLOSE = '''
class MyAIComponent(AbstractAIComponent):
    def load_model(self, config_file=None):
        pass

    def predict(self, input_images, images_meta_informations, device="cuda"):
        channel()[1].close()  # hang up on the evaluator, then carry on as if nothing happened
        time.sleep(2)
        return answer(len(input_images))
'''


def test_class7_a_closed_socket_is_one_line(tmp_path, input_data, env_cache):
    report, out = run(tmp_path, input_data, env_cache, CLOSE)
    assert report["status"] == "failed" and len(report["errors"]) == 1, report["errors"]
    line = report["errors"][0]
    assert line.startswith("performance: the submission exited with status 1") and \
        "during the warm-up call before set performance, batch 1/3" in line, line
    assert report["fault"]["stage"] == "predict"
