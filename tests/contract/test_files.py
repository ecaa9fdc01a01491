"""The one atomic writer and the sha256 helpers (contract/files.py), on real files and links."""

import hashlib
import os
from pathlib import Path

import pytest

from challenge_welding.contract import files
from challenge_welding.contract.files import atomic_path, sha256_bytes, sha256_file, write_atomic


def test_write_atomic_never_writes_through_a_planted_link(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("theirs")
    target = tmp_path / "scores.json"
    os.symlink(victim, files._temporary_name(target))  # planted at the temporary name
    os.symlink(victim, target)                          # and at the target itself
    write_atomic(target, '{"score": 1}')
    assert victim.read_text() == "theirs"
    assert not target.is_symlink() and target.read_text() == '{"score": 1}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scores.json", "victim.txt"]


def test_atomic_path_leaves_the_old_file_when_the_writer_fails(tmp_path):
    target = tmp_path / "draws.npz"
    target.write_bytes(b"old")
    with pytest.raises(ValueError), atomic_path(target) as tmp:
        assert tmp.suffix == ".npz" and tmp.parent == tmp_path
        tmp.write_bytes(b"half")
        raise ValueError("writer failed")
    assert target.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["draws.npz"]
    with atomic_path(target) as tmp:
        tmp.write_bytes(b"new")
    assert target.read_bytes() == b"new" and [p.name for p in tmp_path.iterdir()] == ["draws.npz"]


def test_sha256_helpers_agree_with_hashlib(tmp_path):
    data = os.urandom(3 << 20)  # more than one 1 MiB block
    (tmp_path / "f").write_bytes(data)
    assert sha256_file(tmp_path / "f") == sha256_bytes(data) == hashlib.sha256(data).hexdigest()


# -- our own write faults and temporary folders (issue 24) ------------------------------------

def test_write_atomic_on_a_full_file_system_is_one_line_and_keeps_the_old_file(tmp_path):
    import errno

    from fault_mounts import tmpfs

    from challenge_welding.contract.errors import OutputError

    with tmpfs(tmp_path / "small", "16k") as small:
        target = small / "scores.json"
        target.write_bytes(b"old")
        with pytest.raises(OutputError) as info:
            write_atomic(target, b"x" * (64 << 10))
        assert info.value.exit_code == 3 and info.value.os_error.errno == errno.ENOSPC
        assert str(info.value).startswith(f"no space left on device writing scores.json to {target} "
                                          "(64.0 KiB needed, ")
        assert target.read_bytes() == b"old" and os.listdir(small) == ["scores.json"]


def test_writing_explains_faults_of_the_output_only(tmp_path):
    from challenge_welding.contract.errors import OutputError
    from challenge_welding.contract.files import writing

    out = tmp_path / "out"
    with pytest.raises(FileNotFoundError):  # an input read inside the block: not ours to explain
        with writing(out, "the scores"):
            open(tmp_path / "input" / "missing.parquet", "rb")
    (tmp_path / "taken").write_bytes(b"a file")
    with pytest.raises(OutputError) as info:
        with writing(tmp_path / "taken" / "out", "the scores"):
            (tmp_path / "taken" / "out").mkdir(parents=True)
    assert str(info.value) == (f"{tmp_path / 'taken'} is a file where a folder is needed for the "
                               f"scores ({tmp_path / 'taken' / 'out'}): move the file away or "
                               "choose another output path")


OWNER = """
import sys, time
from challenge_welding.contract.files import OwnedFolder
print(OwnedFolder("cw-test-", dir=sys.argv[1]).path, flush=True)
time.sleep(120)
"""


def test_remove_stale_removes_the_folders_of_dead_owners_only(tmp_path):
    import signal
    import subprocess
    import sys

    from challenge_welding.contract.files import OwnedFolder, remove_stale

    def owner():
        proc = subprocess.Popen([sys.executable, "-c", OWNER, str(tmp_path)], stdout=subprocess.PIPE,
                                text=True)
        return proc, proc.stdout.readline().strip()

    dead, dead_path = owner()
    dead.send_signal(signal.SIGKILL)  # no clean-up of its own: the kernel drops its lock
    dead.wait()
    alive, alive_path = owner()
    try:
        mine = OwnedFolder("cw-test-", dir=tmp_path)   # this process, alive
        kept = OwnedFolder("cw-test-", dir=tmp_path)
        kept.keep()                                     # left for the user: no owner file
        (tmp_path / "cw-test-plain").mkdir()            # not made by OwnedFolder
        assert remove_stale("cw-test-", tmp_path) == [Path(dead_path)]
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
            Path(p).name for p in (alive_path, mine.path, kept.path, tmp_path / "cw-test-plain"))
        mine.remove()
        assert not mine.path.exists()
    finally:
        alive.kill()
        alive.wait()
    assert remove_stale("cw-test-", tmp_path) == [Path(alive_path)]


def test_scores_json_has_one_writer_strict_and_read_back_alike(tmp_path):
    """contract.checked.write_scores: the contract's keys in order, strict JSON, read back by read_scores;
    a NaN or a missing key is refused before a byte is written."""
    import json

    from challenge_welding.contract.checked import json_text, read_scores, write_scores
    from challenge_welding.contract.errors import ChallengeError
    from challenge_welding.contract.names import SCORE_KEYS

    scores = {k: 0.25 * i for i, k in enumerate(SCORE_KEYS)}
    path = write_scores(tmp_path / "scores.json", scores)
    assert path.read_text() == json_text(scores)
    assert list(json.loads(path.read_text())) == list(SCORE_KEYS)
    assert read_scores(path) == scores
    for bad, key in (({**scores, "score": float("nan")}, "'score'"), ({k: scores[k] for k in SCORE_KEYS[1:]}, "keys")):
        with pytest.raises(ChallengeError, match=key):
            write_scores(tmp_path / "bad.json", bad)
        assert not (tmp_path / "bad.json").exists()
