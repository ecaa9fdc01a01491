"""Attacks of a dishonest submission on the ingestion (issue 10), each a real planted
submission installed and run by the real `ingest`: a forged clock, set files rewritten by
predict() and by a double-forked daemon, images kept across batches of alternating sizes,
and peeking at the next batch before it is handed over."""

import hashlib
import json
import os
import time

import cv2
import numpy as np
import pandas as pd
import pytest

from challenge_welding.ingestion.run.decode import read_rgb
from challenge_welding.ingestion.run.ingest import ingest

from ingestion_helpers import GOOD, expected, make_input_data, make_submission


pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs Linux /proc")


def run(tmp_path, input_data, env_cache, component, **opts):
    sub = make_submission(tmp_path / "sub", component)
    out = tmp_path / "pred"
    opts.setdefault("batch_size", 3)
    report = ingest(sub, input_data, out, cache_dir=env_cache, progress=False, **opts)
    assert report == json.loads((out / "ingestion.json").read_text())
    return report, out


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- (a) forged clock ------------------------------------------------------------------------
FORGED_CLOCK = '''
import time
import numpy as np
from challenge_welding.ai_component_interface import AbstractAIComponent

_real = time.perf_counter
# every clock of the interpreter (the evaluator's child code included) says no time passes
time.perf_counter = time.monotonic = time.time = lambda: 0.0
time.perf_counter_ns = time.monotonic_ns = time.time_ns = lambda: 0


class MyAIComponent(AbstractAIComponent):
    def load_model(self, config_file=None):
        pass

    def predict(self, input_images, images_meta_informations, device="cuda"):
        n = len(input_images)
        end = _real() + 0.050 * n  # 50 ms per image: half asleep, half busy
        time.sleep(0.025 * n)
        while _real() < end:
            pass
        return {"predictions": ["OK"] * n, "probabilities": [[0.1, 0.9, 0.0]] * n,
                "OOD_scores": [0.0] * n}
'''


def test_a_forged_clock_does_not_change_the_measured_time(tmp_path, input_data, env_cache):
    report, out = run(tmp_path, input_data, env_cache, FORGED_CLOCK, sets=["performance"])
    assert report["status"] == "ok", report["errors"]
    t = pd.read_parquet(out / "performance.parquet")["compute_time"].to_numpy()
    assert len(t) == 7 and t.min() >= 0.045, t  # 50 ms per image, whatever the clocks say
    timing = report["timings"]["sets"]["performance"]
    assert timing["time_p95"] >= 0.045
    # the child's own clock was forged: it saw no time at all (kept as a diagnostic only)
    assert timing["child_predict_s"] == 0.0
    assert report["integrity"]["timing"].startswith("measured by the evaluator")


# --- (b) rewritten set files and a daemon ----------------------------------------------------
REWRITER = GOOD.replace("import numpy as np\n", '''import glob
import json
import os
import shutil
import time

import numpy as np

OUTPUT = "@OUTPUT@"
FORGED = "@FORGED@"  # what the participant brought: set files with compute_time 0
PIDFILE = "@PIDFILE@"


def forge():
    """Replace every set file (written or not yet) by a forged one; forge ingestion.json."""
    for path in glob.glob(os.path.join(FORGED, "*.parquet")):
        try:
            shutil.copy(path, os.path.join(OUTPUT, os.path.basename(path)))
        except OSError:
            pass
    with open(os.path.join(OUTPUT, "ingestion.json"), "w") as fh:
        json.dump({"status": "ok", "manifest": {}}, fh)


def daemon():
    """Double fork: a process in its own session, orphaned, forging files forever."""
    if os.fork():
        os.wait()
        return
    try:
        os.setsid()
    except OSError:  # refused by the sandbox's seccomp filter: it stays in the child's group
        pass
    if os.fork():
        os._exit(0)
    with open(PIDFILE, "w") as fh:
        fh.write(str(os.getpid()))
    while True:
        forge()
        time.sleep(0.01)
''', 1).replace("        assert self.loaded\n", '''        assert self.loaded
        forge()
        if not getattr(self, "started", False):
            self.started = True
            daemon()
''', 1)


def forged_files(folder):
    """Each set's expected answers with compute_time 0: the forgery a cheater would bring."""
    from challenge_welding.contract.names import PRED_COLUMNS, SET_NAMES

    folder.mkdir()
    for name in SET_NAMES:
        labels, probs, ood = expected(name)
        pd.DataFrame({"sample_id": [f"{name[:3]}{i:03d}" for i in range(len(labels))],
                      "predicted_state": labels, "scores KO": probs[:, 0],
                      "scores OK": probs[:, 1], "scores UNKNOWN": probs[:, 2],
                      "scores OOD": ood, "compute_time": 0.0})[list(PRED_COLUMNS)].to_parquet(
            folder / f"{name}.parquet", index=False)
    return folder


def test_b_rewritten_set_files_and_a_daemon_do_not_survive(tmp_path, env_cache, monkeypatch):
    from challenge_welding.contract.names import SET_NAMES

    # these defences must hold without Landlock too (with it the writes are refused outright,
    # and the component could not write its pid file: tests/ingestion/confine/test_sandbox.py)
    monkeypatch.setenv("CHALLENGE_WELDING_LANDLOCK_ABI_MAX", "0")
    monkeypatch.setenv("CHALLENGE_WELDING_NAMESPACES", "0")  # nor the namespaces' layers

    # drift is absent from the input (skipped): a forged drift.parquet must not stay either
    data = make_input_data(tmp_path / "data", sets=[s for s in SET_NAMES if s != "drift"])
    out, pidfile = tmp_path / "pred", tmp_path / "daemon.pid"
    forged = forged_files(tmp_path / "forged")
    component = REWRITER.replace("@OUTPUT@", str(out)).replace("@FORGED@", str(forged)) \
        .replace("@PIDFILE@", str(pidfile))
    report, out = run(tmp_path, data, env_cache, component, unsafe_unconfined=True)
    assert report["status"] == "ok", report["errors"]
    assert report["sets"]["drift"]["status"] == "skipped"
    assert not (out / "drift.parquet").exists()
    pid = int(pidfile.read_text())
    # the daemon was found (re-parented to the ingestion) and killed before the files were written
    assert not os.path.exists(f"/proc/{pid}"), open(f"/proc/{pid}/stat").read()
    assert report["integrity"]["processes_killed"] >= 1
    names = sorted(p.name for p in out.glob("*.parquet"))
    assert sorted(report["manifest"]) == names and len(names) == 5
    time.sleep(0.3)  # had anything survived, it would rewrite the files now
    for name, digest in report["manifest"].items():
        assert sha256(out / name) == digest, name
        df = pd.read_parquet(out / name)
        labels, probs, ood = expected(name[:-len(".parquet")])
        assert df["predicted_state"].tolist() == labels
        np.testing.assert_allclose(df["scores OOD"], ood, atol=0.02)
        assert (df["compute_time"] > 0).all(), name  # the forged zeros are gone
    assert json.loads((out / "ingestion.json").read_text())["manifest"] == report["manifest"]


# --- (c) images kept across batches, sets and resolutions ------------------------------------
KEEPER = '''
import numpy as np
from challenge_welding.ai_component_interface import AbstractAIComponent


class MyAIComponent(AbstractAIComponent):
    def load_model(self, config_file=None):
        self.kept = []  # (image, its checksum when received)

    def predict(self, input_images, images_meta_informations, device="cuda"):
        for img, first in self.kept:  # every earlier image, read again at every call
            now = int(img.sum(dtype=np.uint64))
            if now != first:
                raise RuntimeError(f"a kept image changed: {first} -> {now}")
        means = []
        for img in input_images:
            self.kept.append((img, int(img.sum(dtype=np.uint64))))
            means.append(float(img.mean(dtype=np.float64)) / 255.0)
        n = len(input_images)
        return {"predictions": ["OK"] * n, "probabilities": [[0.0, 1.0, 0.0]] * n,
                "OOD_scores": means}
'''


def make_alternating_data(root, sets=("performance", "drift"), n=6):
    """Noisy JPEGs alternating 1920x1080 and 960x540 (non-trivial checksums)."""
    rng = np.random.default_rng(7)
    for name in sets:
        (root / name / "images").mkdir(parents=True)
        rows = []
        for i in range(n):
            w, h = (1920, 1080) if i % 2 == 0 else (960, 540)
            small = rng.integers(0, 256, (h // 8, w // 8, 3), dtype=np.uint8)
            img = cv2.resize(small, (w, h), interpolation=cv2.INTER_LINEAR)
            rel = f"images/{name[:3]}{i:03d}.jpeg"
            cv2.imwrite(str(root / name / rel), img, [cv2.IMWRITE_JPEG_QUALITY, 85])
            rows.append({"sample_id": f"{name[:3]}{i:03d}", "path": rel, "welding-seams": "c20",
                         "resolution": [w, h]})
        pd.DataFrame(rows).to_parquet(root / name / "metadata.parquet", index=False)
    return root


def test_c_images_kept_across_batches_and_sizes_keep_their_pixels(tmp_path, env_cache):
    data = make_alternating_data(tmp_path / "data")
    # batches of 1: every call changes the resolution (1920x1080, 960x540, ...), and the
    # drift set comes after performance, so kept images cross sets too
    report, out = run(tmp_path, data, env_cache, KEEPER, batch_size=1,
                      sets=["performance", "drift"])
    assert report["status"] == "ok", report["errors"]
    for name in ("performance", "drift"):
        paths = sorted((data / name / "images").glob("*.jpeg"))
        want = [float(read_rgb(p).mean(dtype=np.float64)) / 255.0 for p in paths]
        got = pd.read_parquet(out / f"{name}.parquet")["scores OOD"].tolist()
        assert got == pytest.approx(want, abs=1e-12)


# --- (d) no peeking at the next batch --------------------------------------------------------
PEEKER = '''
import os
import stat
import tempfile
import numpy as np
from challenge_welding.ai_component_interface import AbstractAIComponent

COLOURS = {colours!r}  # the decoded RGB of each performance image, in order
REPORT = {report!r}


def candidates():
    """Every place where a later batch could already be: files in /dev/shm and the temporary
    folder, our own descriptors, the evaluator's descriptors (/proc/<parent>/fd)."""
    paths = []
    for folder in ("/dev/shm", tempfile.gettempdir()):
        try:
            paths += [os.path.join(folder, f) for f in os.listdir(folder)]
        except OSError:
            pass
    for pid in ("self", str(os.getppid())):
        try:
            paths += [f"/proc/{{pid}}/fd/{{fd}}" for fd in os.listdir(f"/proc/{{pid}}/fd")]
        except OSError:
            pass
    return paths


def read(path):
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return b""
        with open(path, "rb") as fh:
            return fh.read(256 << 20)
    except OSError:
        return b""


def found(data, rgb):
    return bytes(rgb) * 16 in data  # a run of 16 pixels of that flat colour


class MyAIComponent(AbstractAIComponent):
    def load_model(self, config_file=None):
        pass

    def predict(self, input_images, images_meta_informations, device="cuda"):
        mine = input_images[0].tobytes()
        # which image is this? (the search works: it finds an image it has)
        k = next((i for i, c in enumerate(COLOURS) if found(mine, c)), None)
        if k is None:  # the warm-up call: noise
            return {{"predictions": ["UNKNOWN"], "OOD_scores": [0.5]}}
        readable = [p for p in candidates() if read(p)]
        peeked = k + 1 < len(COLOURS) and any(found(read(p), COLOURS[k + 1]) for p in readable)
        with open(REPORT, "a") as fh:
            fh.write(f"{{k}} {{len(readable)}} {{int(peeked)}}\\n")
        return {{"predictions": ["OK"], "OOD_scores": [1.0 if peeked else 0.0]}}
'''


def test_d_the_next_batch_cannot_be_seen_before_its_hand_over(tmp_path, env_cache, monkeypatch):
    # without Landlock (which would refuse the log file this component reports in): the
    # decode-ahead must stay out of reach by itself
    monkeypatch.setenv("CHALLENGE_WELDING_LANDLOCK_ABI_MAX", "0")
    monkeypatch.setenv("CHALLENGE_WELDING_NAMESPACES", "0")  # nor the namespaces' layers
    data = tmp_path / "data"
    (data / "performance" / "images").mkdir(parents=True)
    rows, colours = [], []
    for i in range(6):
        bgr = np.empty((540, 960, 3), np.uint8)
        bgr[:] = (90 + 17 * i, 200 - 25 * i, 20 + 30 * i)
        rel = f"images/p{i}.jpeg"
        cv2.imwrite(str(data / "performance" / rel), bgr)
        colours.append(read_rgb(data / "performance" / rel)[270, 480].tolist())
        rows.append({"sample_id": f"p{i}", "path": rel, "welding-seams": "c20",
                     "resolution": [960, 540]})
    pd.DataFrame(rows).to_parquet(data / "performance" / "metadata.parquet", index=False)
    assert len({tuple(c) for c in colours}) == 6
    log = tmp_path / "peek.txt"
    component = PEEKER.format(colours=colours, report=str(log))
    report, out = run(tmp_path, data, env_cache, component, batch_size=1, sets=["performance"],
                      unsafe_unconfined=True)
    assert report["status"] == "ok", report["errors"]
    # the later batches were decoded ahead (in the ingestion's memory) while predict() ran
    assert report["integrity"]["decode_ahead"] is True
    df = pd.read_parquet(out / "performance.parquet")
    lines = [line.split() for line in log.read_text().splitlines()]
    assert sorted({int(k) for k, _n, _p in lines}) == list(range(6))
    assert all(int(n) > 0 for _k, n, _p in lines)  # the scan did read files and descriptors
    assert df["predicted_state"].tolist() == ["OK"] * 6  # it recognised each image it had
    assert df["scores OOD"].tolist() == [0.0] * 6  # and never saw the next one early
