"""The one atomic writer and the sha256 helpers (contract/files.py), on real files and links."""

import hashlib
import os

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
