"""Our own write faults in `score`, `evaluate`, `leaderboard` and `build-sets`, made for real
(issue 24): a full tmpfs, a read-only mount, a file where a folder goes, a folder without
write permission (as a user that is not root: root ignores permissions). Each ends in one
`error:` line naming the path and what was needed, exit status 3, and leaves no half-written
output: `score` never leaves a scores.json without the page and details.json of its run.

Before (noted live on the code before this change): `score` on a 64 KiB tmpfs ended in a
traceback (`OSError: [Errno 28] No space left on device`, exit 1) with OUT/scores.json left
alone; `score --output FILE/out` in `NotADirectoryError` (exit 1).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from challenge_welding.scoring.virtual import make_virtual
from fault_mounts import error_lines, tmpfs


def cli(*args: str, user: int | None = None, env: dict | None = None):
    """The real command in its own process (``user``: run as that uid and gid, no groups)."""
    prefix = [] if user is None else ["setpriv", f"--reuid={user}", f"--regid={user}",
                                      "--clear-groups"]
    return subprocess.run([*prefix, sys.executable, "-m", "challenge_welding", *args],
                          capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture(scope="module")
def pred(uncalibrated_reference, tmp_path_factory):
    return make_virtual(uncalibrated_reference, "random", tmp_path_factory.mktemp("faults") / "pred")


def score_args(reference, pred, out, *more):
    return ["score", "--reference", str(reference), "--predictions", str(pred), "--output", str(out),
            *more]


def test_score_on_a_full_file_system_leaves_no_scores_without_their_page(
        uncalibrated_reference, pred, tmp_path):
    # 64 KiB: scores.json (under 1 KiB) fits, details.json (~80 KiB) does not
    with tmpfs(tmp_path / "small", "64k") as small:
        out = small / "out"
        done = cli(*score_args(uncalibrated_reference, pred, out))
        assert done.returncode == 3, done.stderr
        [line] = error_lines(done.stderr)
        assert line.startswith(f"error: no space left on device writing details.json to "
                               f"{out / 'details.json'} ("), line
        assert "KiB needed" in line and "free on that file system" in line
        assert os.listdir(out) == []  # scores.json went with the run: none without its page


@pytest.mark.parametrize("case", ["output is a file", "parent is a file", "read-only"])
def test_score_output_that_cannot_be_a_folder_is_one_line(case, uncalibrated_reference, pred,
                                                           tmp_path):
    with tmpfs(tmp_path / "mnt", "1m", read_only=case == "read-only",
               files={"taken": b"a file"}) as mnt:
        out = {"output is a file": mnt / "taken", "parent is a file": mnt / "taken" / "out",
               "read-only": mnt / "out"}[case]
        done = cli(*score_args(uncalibrated_reference, pred, out))
        assert done.returncode == 3, done.stderr
        [line] = error_lines(done.stderr)
        assert line.startswith({
            "output is a file": f"error: {out} is a file where a folder is needed for the "
                                "scoring output: ",
            "parent is a file": f"error: {mnt / 'taken'} is a file where a folder is needed for "
                                f"the scoring output ({out}): ",
            "read-only": f"error: read-only file system at {out}: a writable folder is "
                         "needed for the scoring output"}[case]), line
        assert os.listdir(mnt) == ["taken"] and (mnt / "taken").read_bytes() == b"a file"


def test_score_draws_under_a_file_is_one_line(uncalibrated_reference, pred, tmp_path):
    (tmp_path / "taken").write_bytes(b"a file")
    draws = tmp_path / "taken" / "run.draws.npz"
    done = cli(*score_args(uncalibrated_reference, pred, tmp_path / "out", "--draws", str(draws)))
    assert done.returncode == 3, done.stderr
    [line] = error_lines(done.stderr)
    assert line == (f"error: {tmp_path / 'taken'} is a file where a folder is needed for the "
                    "draws: move the file away or choose another output path")
    assert not (tmp_path / "out" / "scores.json").exists()  # the run's outputs went with it


@pytest.fixture
def shared():
    """A folder every user may read (pytest's own are 0700, and reset so by other sessions)."""
    path = Path(tempfile.mkdtemp(prefix="cw-faults-"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_score_without_write_permission_is_one_line(uncalibrated_reference, pred, shared):
    """As `nobody`: a folder of root's, mode 0755, refuses it for real."""
    if shutil.which("setpriv") is None or os.geteuid() != 0:
        pytest.skip("needs root and setpriv (util-linux) to run the command as another user")
    shutil.copytree(uncalibrated_reference, shared / "reference_data")
    shutil.copytree(pred, shared / "pred")
    (shared / "closed").mkdir(mode=0o755)
    (shared / "home").mkdir()
    os.chown(shared / "home", 65534, 65534)
    for folder, dirs, files in os.walk(shared):
        for name in dirs + files:
            p = Path(folder) / name
            os.chmod(p, os.stat(p).st_mode | stat.S_IROTH | (stat.S_IXOTH if p.is_dir() else 0))
    out = shared / "closed" / "out"
    env = {**os.environ, "HOME": str(shared / "home"), "MPLCONFIGDIR": str(shared / "home"),
           "XDG_CACHE_HOME": str(shared / "home")}
    done = cli(*score_args(shared / "reference_data", shared / "pred", out), user=65534, env=env)
    assert done.returncode == 3, done.stderr
    [line] = error_lines(done.stderr)
    assert line.startswith(f"error: permission denied writing the scoring output to {out}: write "
                           f"permission is needed on {shared / 'closed'}; "), line
    assert os.listdir(shared / "closed") == []


def test_evaluate_into_a_file_is_one_line(tmp_path):
    """Refused before anything runs."""
    data = tmp_path / "data"
    (data / "input_data").mkdir(parents=True)
    (data / "reference_data").mkdir()
    (tmp_path / "sub").mkdir()
    (tmp_path / "taken").write_bytes(b"a file")
    out = tmp_path / "taken" / "eval"
    done = cli("evaluate", "--submission", str(tmp_path / "sub"), "--data", str(data), "--output",
               str(out))
    assert done.returncode == 3, done.stderr
    [line] = error_lines(done.stderr)
    assert line.startswith(f"error: {tmp_path / 'taken'} is a file where a folder is needed for "
                           f"the evaluation output ({out}): "), line


def test_leaderboard_on_a_read_only_or_full_file_system_is_one_line(
        uncalibrated_reference, pred, tmp_path):
    scored = tmp_path / "scored"
    assert cli(*score_args(uncalibrated_reference, pred, scored)).returncode == 0
    with tmpfs(tmp_path / "ro", "1m", read_only=True) as ro:
        done = cli("leaderboard", str(scored), "--output", str(ro / "board" / "lb"))
        assert done.returncode == 3, done.stderr
        [line] = error_lines(done.stderr)
        assert line.startswith(f"error: read-only file system at {ro / 'board'}: a writable folder "
                               "is needed for the leaderboard"), line
    with tmpfs(tmp_path / "small", "4k") as small:  # the page (~20 KiB) does not fit
        done = cli("leaderboard", str(scored), "--output", str(small / "lb"))
        assert done.returncode == 3, done.stderr
        [line] = error_lines(done.stderr)
        assert line.startswith(f"error: no space left on device writing the leaderboard page to "
                               f"{small / 'lb.html'} ("), line
        assert os.listdir(small) == []  # no half page, no temporary file


def test_build_sets_on_a_full_file_system_is_one_line_and_leaves_no_set(tmp_path):
    from challenge_welding.data.synth import generate_dataset

    store = generate_dataset(tmp_path / "store", n=120, seed=3, resolution=(160, 90),
                             ko_share=0.3, ood_share=0.08, progress=False)
    args = ["build-sets", "--out"]
    source = ["--source", str(store.source)]
    for key, value in store.build_args().items():
        if key == "unseen_sources" and value:
            source += ["--unseen-source", *[str(v) for v in value]]
        elif key == "ood_source" and value:
            source += ["--ood-source", str(value)]
    with tmpfs(tmp_path / "small", "256k") as small:
        out = small / "data"
        done = cli(*args, str(out), *source, "--workers", "1")
        assert done.returncode == 3, done.stdout + done.stderr
        [line] = error_lines(done.stderr)
        assert line.startswith("error: no space left on device writing the evaluation sets to "
                               f"{out} ("), line
        # the sets are made in a work folder that goes; none was moved in half-made
        assert sorted(os.listdir(out)) == []
