"""Our own faults, made for real on a real `ingest` of a real submission (issue 24).

* the output cannot be written (a full tmpfs, a read-only mount, a file where the folder
  goes): one `error:` line naming the path and what was needed, exit status 3, nothing
  half-written in the output, and (when the disk fills at the end) the run's files kept
  elsewhere, named in the line;
* SIGINT / SIGTERM: the sets finished and the log are in the output with status
  "interrupted" (exit 130 / 143), `score` refuses the folder naming the missing sets, a
  re-run says what it redoes;
* SIGKILL: the run's temporary folders are left, the next run removes them, never those of
  a run still alive;
* a corrupt JPEG in our own input data: said once.

Before these changes (noted live): a full output ended in `OSError: [Errno 28] No space left
on device` (a traceback, exit 1); Ctrl-C (exit 130) left PRED empty and the log in a
cw-ingest-out-* folder; SIGTERM (exit 143) left PRED empty, both cw-ingest-* folders and the
sleeping submission behind; the corrupt-JPEG line was printed twice.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fault_mounts import error_lines, tmpfs
import challenge_welding
from ingestion_helpers import GOOD, make_reference, make_submission

CONFIG_FILE = Path(challenge_welding.__file__).parent / "scoring" / "default_scoring.yaml"

# The component sleeps in its second predict() call (the robustness set, warm-up off): the
# performance set is finished, the run is busy; the signal's moment is deterministic.
SLEEPER = GOOD.replace('''        assert self.loaded
''', '''        assert self.loaded
        self.calls = getattr(self, "calls", 0) + 1
        if self.calls == 2:
            import time
            time.sleep(60)
''')
SETS = ["performance", "robustness", "ood_real", "ood_synthetic", "generalization", "drift"]


def command(tmp_path: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "challenge_welding", *args]


def environ(tmp_path: Path) -> dict:
    """A temporary folder of the test's own: the runs' cw-ingest-* folders are counted there."""
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    return {**os.environ, "TMPDIR": str(tmp)}


def ingest_args(sub, input_data, out, env_cache, *more) -> list[str]:
    return ["ingest", "--submission", str(sub), "--input-data", str(input_data), "--output",
            str(out), "--env-cache", str(env_cache), "--no-warmup", "--no-progress", *more]


def run_ingest(tmp_path, *args, timeout=300):
    return subprocess.run(command(tmp_path, *args), capture_output=True, text=True,
                          env=environ(tmp_path), timeout=timeout)


def temporary(tmp_path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "tmp").iterdir())


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    return make_submission(tmp_path_factory.mktemp("good") / "sub")


@pytest.fixture(scope="module")
def sleeper(tmp_path_factory):
    return make_submission(tmp_path_factory.mktemp("sleeper") / "sub", SLEEPER)


# -- the output cannot be written ------------------------------------------------------------

def test_a_full_file_system_at_the_end_is_one_line_and_the_files_are_kept_elsewhere(
        tmp_path, good, input_data, env_cache):
    with tmpfs(tmp_path / "small", "16k") as small:
        out = small / "pred"
        done = run_ingest(tmp_path, *ingest_args(good, input_data, out, env_cache))
        assert done.returncode == 3, done.stderr
        [line] = error_lines(done.stderr)
        assert line.startswith(f"error: no space left on device writing the predictions to {out} (")
        needed = re.search(r"\(([\d.]+) KiB needed, ([\d.]+) KiB free", line)
        assert needed and float(needed[1]) > float(needed[2]), line
        assert os.listdir(out) == []  # nothing half-written, no staging folder left
    kept = Path(re.search(r"are kept in (\S+)\)$", line)[1])
    assert kept.parent == tmp_path / "tmp"
    report = json.loads((kept / "ingestion.json").read_text())
    assert report["status"] == "ok" and sorted(report["manifest"]) == sorted(
        f"{name}.parquet" for name in SETS)
    for name, digest in report["manifest"].items():
        assert sha256(kept / name) == digest
    assert (kept / "ingestion.log").read_text().count("drift: 5 images") == 1
    assert not (kept / ".cw-owner").exists()  # kept for the user: never swept as stale


@pytest.mark.parametrize("case", ["output is a file", "parent is a file", "read-only parent",
                                  "read-only output"])
def test_an_unwritable_output_is_one_line_before_the_submission_runs(
        case, tmp_path, good, input_data, env_cache):
    files = {"pred": None} if case == "read-only output" else {}
    with tmpfs(tmp_path / "mnt", "1m", read_only=case.startswith("read-only"), files=files) as mnt:
        if case == "output is a file":
            (mnt / "pred").write_bytes(b"not a folder")
        if case == "parent is a file":
            (mnt / "taken").write_bytes(b"not a folder")
        out = mnt / "taken" / "pred" if case == "parent is a file" else mnt / "pred"
        before = sorted(os.listdir(mnt))
        done = run_ingest(tmp_path, *ingest_args(good, input_data, out, env_cache))
        assert done.returncode == 3, done.stderr
        [line] = error_lines(done.stderr)
        expected = {
            "output is a file": f"error: {out} is a file where a folder is needed for the "
                                "prediction folder: ",
            "parent is a file": f"error: {mnt / 'taken'} is a file where a folder is needed for "
                                f"the prediction folder ({out}): ",
            "read-only parent": f"error: read-only file system at {out}: a writable folder is "
                                "needed for the prediction folder",
            "read-only output": f"error: read-only file system at {out}: a writable folder is "
                                "needed for the prediction folder",
        }[case]
        assert line.startswith(expected), line
        assert "device:" not in done.stderr  # refused before the install and the child
        assert sorted(os.listdir(mnt)) == before
    assert temporary(tmp_path) == []  # nothing left in the temporary folder either


def test_a_full_temporary_folder_is_our_fault_not_the_submissions(tmp_path, good, input_data,
                                                                  env_cache):
    """Before: "the evaluator failed while running the submission (Error: [...No space left
    on device...])", status failed, exit 1: the submission's failure."""
    with tmpfs(tmp_path / "tmp", "8k"):
        done = run_ingest(tmp_path, *ingest_args(good, input_data, tmp_path / "pred", env_cache))
        assert done.returncode == 3, done.stderr
        [line] = error_lines(done.stderr)
        assert re.fullmatch(r"error: no space left on device writing the submission's copy in the "
                            rf"temporary folder to {tmp_path / 'tmp'}/cw-ingest-\w+ \([\d.]+ "
                            r"(bytes|KiB) free on that file system\): free space there or point "
                            r"TMPDIR elsewhere", line), line
        assert "device:" not in done.stderr  # nothing of the submission ran
        assert temporary(tmp_path) == []


def test_a_corrupt_image_in_our_input_data_is_said_once(tmp_path, good, input_data, env_cache):
    import shutil

    bad = tmp_path / "input"
    shutil.copytree(input_data, bad)
    image = bad / "performance" / "images" / "per002.jpeg"
    image.write_bytes(image.read_bytes()[:300])
    done = run_ingest(tmp_path, *ingest_args(good, bad, tmp_path / "pred", env_cache,
                                             "--sets", "performance"))
    assert done.returncode == 2
    assert error_lines(done.stderr) == [f"error: cannot decode image {image} (not a readable "
                                        "JPEG/PNG file)"]
    log = (tmp_path / "pred" / "ingestion.log").read_text()
    assert log.count("cannot decode image") == 1  # and the log keeps it


# -- interrupted runs ------------------------------------------------------------------------

def start(tmp_path, sub, input_data, out, env_cache) -> tuple[subprocess.Popen, str]:
    """A real `ingest` in its own process and what it said so far; returns once the
    performance set is finished and the sleeper is inside its robustness call."""
    proc = subprocess.Popen(command(tmp_path, *ingest_args(sub, input_data, out, env_cache)),
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                            env=environ(tmp_path))
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if line.startswith("performance: 7 images"):
            time.sleep(0.5)  # into the robustness call
            return proc, "".join(seen)
    proc.wait()
    raise AssertionError("".join(seen))


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_run_keeps_the_sets_finished_and_its_log(
        sig, tmp_path, sleeper, good, input_data, env_cache):
    out = tmp_path / "pred"
    proc, _said = start(tmp_path, sleeper, input_data, out, env_cache)
    t0 = time.monotonic()
    proc.send_signal(sig)
    rest = proc.stderr.read()
    assert proc.wait(30) == 128 + sig
    assert time.monotonic() - t0 < 10  # the sleeping call (60 s) is killed, not awaited
    name = signal.Signals(sig).name
    [line] = error_lines(rest)
    assert line == (f"error: interrupted by {name} during set robustness: the sets finished are "
                    "written (performance); not finished: robustness, ood_real, ood_synthetic, "
                    "generalization, drift; a re-run redoes every set")
    assert sorted(os.listdir(out)) == ["ingestion.json", "ingestion.log", "performance.parquet",
                                       "submission_output.log"]
    report = json.loads((out / "ingestion.json").read_text())
    assert report["status"] == "interrupted"
    assert report["interrupted"] == {"signal": name, "finished": ["performance"],
                                     "cut": ["robustness"], "not_finished": SETS[1:]}
    assert {n: s["status"] for n, s in report["sets"].items()} == {
        "performance": "ok", "robustness": "interrupted", **{n: "not run" for n in SETS[2:]}}
    assert report["manifest"] == {"performance.parquet": sha256(out / "performance.parquet")}
    assert line[len("error: "):] in (out / "ingestion.log").read_text()
    assert temporary(tmp_path) == []  # the work folder and the logs' folder went

    # score refuses the folder in one line naming the sets missing (not the submission's fault)
    ref = make_reference(tmp_path / "ref", CONFIG_FILE)
    scored = subprocess.run(command(tmp_path, "score", "--reference", str(ref), "--predictions",
                                    str(out), "--output", str(tmp_path / "scored")),
                            capture_output=True, text=True, timeout=120)
    assert scored.returncode == 2
    assert error_lines(scored.stderr) == [
        f"error: {out / 'ingestion.json'}: the ingestion was interrupted before it finished the "
        "set(s) drift, generalization, ood_real, ood_synthetic, robustness; nothing is scored: "
        "run ingest again (it redoes every set)"]
    assert not (tmp_path / "scored" / "scores.json").exists()

    # a re-run says what it redoes, then does it
    again = run_ingest(tmp_path, *ingest_args(good, input_data, out, env_cache))
    assert again.returncode == 0, again.stderr
    assert (f"note: {out} holds an earlier run with status 'interrupted' (finished: performance; "
            "not finished: robustness, ood_real, ood_synthetic, generalization, drift): this run "
            "redoes every set (" + ", ".join(SETS) + ") and replaces its files") in again.stderr
    assert json.loads((out / "ingestion.json").read_text())["status"] == "ok"


def _kill_leftovers(tmp: Path) -> None:
    """The submission's processes of a SIGKILLed ingestion (their cwd is in its work folder)."""
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if os.readlink(f"/proc/{pid}/cwd").startswith(str(tmp)):
                    os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass


def test_a_killed_runs_temporary_folders_go_at_the_next_run_a_live_runs_stay(
        tmp_path, sleeper, good, input_data, env_cache):
    tmp = tmp_path / "tmp"
    killed, _said = start(tmp_path, sleeper, input_data, tmp_path / "killed", env_cache)
    killed.kill()
    killed.wait()
    _kill_leftovers(tmp)
    left = temporary(tmp_path)
    assert len(left) == 2 and all(n.startswith("cw-ingest-") for n in left)  # work + logs
    # the next run removes them, and says so
    alive, said = start(tmp_path, sleeper, input_data, tmp_path / "alive", env_cache)
    try:
        assert f"note: removed 2 temporary folder(s) that killed runs left: {tmp / left[0]}" in said
        theirs = temporary(tmp_path)
        assert len(theirs) == 2 and not set(theirs) & set(left)
        # a run beside a live one leaves the live one's folders alone
        done = run_ingest(tmp_path, *ingest_args(good, input_data, tmp_path / "next", env_cache))
        assert done.returncode == 0, done.stderr
        assert "temporary folder(s)" not in done.stderr
        assert temporary(tmp_path) == theirs
    finally:
        alive.send_signal(signal.SIGINT)  # Ctrl-C
        alive.stderr.read()
        assert alive.wait(30) == 130
    assert temporary(tmp_path) == []


# -- a disk filled by the submission ----------------------------------------------------------

# load_model writes one file as large as it can, removes it, then 1 MiB files into its temp
# folder (its scratch) until a write fails, and prints what it got, then 64 KiB more (a log
# that goes on: its file needs new blocks).
FILLER = GOOD.replace("        self.loaded = True", '''        import os
        tmp = os.environ["TMPDIR"]
        n = 0
        try:
            with open(os.path.join(tmp, "big"), "wb") as f:
                for _ in range(1000):
                    f.write(b"x" * (1 << 20))
                    n += 1 << 20
        except OSError as e:
            print("BIG", n, e.errno, flush=True)
        os.remove(os.path.join(tmp, "big"))
        n = 0
        try:
            for i in range(100000):
                with open(os.path.join(tmp, f"fill{i}"), "wb") as f:
                    f.write(b"x" * (1 << 20))
                n += 1 << 20
        except OSError as e:
            print("FILLED", n, e.errno, flush=True)
        print(("." * 1023 + "\\n") * 64, flush=True)
        self.loaded = True''')


def _fill_run(tmp_path, sub, input_data, env_cache, namespaces: bool):
    """``ingest`` with its temporary folder (the work folder, the scratch, the logs) and the
    output on one 64 MiB tmpfs; the scratch bounded at 8 MiB."""
    with tmpfs(tmp_path / "small", "64m") as small:
        (small / "tmp").mkdir()
        env = {**os.environ, "TMPDIR": str(small / "tmp"), "CHALLENGE_WELDING_SCRATCH_MB": "8"}
        if not namespaces:
            env["CHALLENGE_WELDING_NAMESPACES"] = "0"
        done = subprocess.run(command(tmp_path, *ingest_args(sub, input_data, small / "pred",
                                                             env_cache, "--sets", "performance")),
                              capture_output=True, text=True, env=env, timeout=300)
        said = (small / "pred" / "submission_output.log").read_text()
        report = json.loads((small / "pred" / "ingestion.json").read_text())
        assert os.listdir(small / "tmp") == []
    return done, said, report


def test_a_submission_filling_its_scratch_meets_its_own_bound(tmp_path, input_data, env_cache):
    """Where a mount namespace is lent, the scratch is a tmpfs of its own (8 MiB here): the
    submission meets ENOSPC there, ours never fills. Before (main at 317e1dc, the same run):
    the submission wrote 60+ MiB into the evaluator's temporary file system, the thread that
    keeps its log died with a traceback (OSError: [Errno 28] No space left on device) and
    submission_output.log was empty; the run said ok."""
    from challenge_welding.ingestion.confine import layers

    if not layers.probe()["mount"]:
        pytest.skip("no mount namespace is lent here")
    sub = make_submission(tmp_path / "sub", FILLER)
    done, said, report = _fill_run(tmp_path, sub, input_data, env_cache, namespaces=True)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "BIG 8388608 27" in said  # RLIMIT_FSIZE: EFBIG at the bound, not a SIGXFSZ death
    # 8 MiB of tmpfs: its tmp/ folder's inode and the 1 MiB files; ENOSPC in its own folder
    filled = re.search(r"FILLED (\d+) 28", said)
    assert filled and 6 << 20 <= int(filled[1]) <= 8 << 20, said
    assert report["status"] == "ok" and said.count("." * 1023) == 64  # the log is whole
    assert report["sandbox"]["run"]["scratch"] == {"tmpfs_bytes": 8 << 20}
    assert report["sandbox"]["run"]["rlimits"]["fsize"] == 8 << 20


def test_a_disk_filled_by_the_submission_is_its_fault_in_one_line(tmp_path, input_data,
                                                                  env_cache):
    """Where no namespace is lent (a Codabench worker) the scratch lives on our file system:
    RLIMIT_FSIZE still bounds each file, but many files fill it; the write of the
    submission's log fails, and the line says whose fault it is (exit status 1, the
    submission's). Before (main at 317e1dc): a traceback of the log's thread, the log empty,
    status ok."""
    sub = make_submission(tmp_path / "sub", FILLER)
    done, said, report = _fill_run(tmp_path, sub, input_data, env_cache, namespaces=False)
    assert done.returncode == 1, done.stderr
    [line] = error_lines(done.stderr)
    got = re.fullmatch(r"error: the submission filled the file system: it wrote ([\d.]+) MiB "
                       rf"into its scratch folder {tmp_path / 'small' / 'tmp'}/cw-ingest-\w+/"
                       r"scratch \(([\d.]+ (bytes|KiB)) left free there\), so the submission's "
                       r"log could not be written: write less there \(a run's scratch is for "
                       r"small temporary files\)", line)
    assert got and float(got[1]) > 40, line  # most of the 64 MiB; the rest is our run's
    assert "BIG 8388608 27" in said  # the bound of one file holds here too
    assert report["status"] == "failed" and report["errors"] == [line[len("error: "):]]
