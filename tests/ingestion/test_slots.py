"""Image slots fall back to the temporary folder when /dev/shm is too small (64 MB in containers)."""

import os
import subprocess

import numpy as np
import pytest

from challenge_welding.ingestion.protocol import Slot

FULL_HD_BATCH = 10 * 1080 * 1920 * 3  # 62 MB: one default batch of full-HD images


def test_slot_skips_an_unusable_folder_and_maps_the_next(tmp_path):
    slot = Slot("t", 0, dirs=[str(tmp_path / "missing"), str(tmp_path)])
    slot.ensure(1000)
    assert os.path.dirname(slot.name) == str(tmp_path)
    slot.view(64, 2, 3)[:] = 7
    with open(slot.name, "rb") as f:  # what the child maps is what the parent wrote
        f.seek(64)
        assert f.read(18) == bytes([7] * 18)
    path = slot.name
    slot.release()
    assert not os.path.exists(path)


@pytest.fixture
def small_tmpfs(tmp_path):
    """A real 16 MiB tmpfs, like a container's small /dev/shm (needs root)."""
    mnt = tmp_path / "shm"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mnt)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (not root)")
    yield mnt
    subprocess.run(["umount", str(mnt)], check=True)


def test_full_hd_batch_on_a_small_tmpfs_goes_to_the_fallback_without_sigbus(small_tmpfs, tmp_path):
    fallback = tmp_path / "tmp"
    fallback.mkdir()
    slot = Slot("t", 0, dirs=[str(small_tmpfs), str(fallback)])
    slot.ensure(FULL_HD_BATCH)
    assert os.path.dirname(slot.name) == str(fallback)
    view = slot.view(FULL_HD_BATCH - 1080 * 1920 * 3, 1080, 1920)
    view[:] = 200  # the last image of the batch: SIGBUS here with an over-committed tmpfs
    assert int(np.asarray(view).max()) == 200
    assert os.listdir(small_tmpfs) == []  # the failed reservation left nothing behind
    slot.release()


def test_no_room_anywhere_is_one_clear_error(small_tmpfs):
    slot = Slot("t", 0, dirs=[str(small_tmpfs)])
    with pytest.raises(OSError, match="no room for a 64 MiB image buffer"):
        slot.ensure(FULL_HD_BATCH)
