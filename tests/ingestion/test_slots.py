"""Batch buffers: a nameless memfd; without one, an unlinked file in /dev/shm, falling back to
the temporary folder when /dev/shm is too small (64 MB in containers)."""

import mmap
import os
import subprocess

import numpy as np
import pytest

from challenge_welding.ingestion.protocol import BatchBuffer

FULL_HD_BATCH = 10 * 1080 * 1920 * 3  # 62 MB: one default batch of full-HD images


def read_back(buffer, offset, n):
    """What the child sees: a fresh mapping of the descriptor."""
    mm = mmap.mmap(buffer.fd, buffer.size)
    try:
        return mm[offset:offset + n]
    finally:
        mm.close()


def test_memfd_buffer_is_nameless_and_holds_what_was_written():
    buf = BatchBuffer(1000)
    assert buf.where == "memfd"
    buf.view(64, 2, 3)[:] = 7
    buf.unmap()  # the descriptor alone keeps the bytes
    assert read_back(buf, 64, 18) == bytes([7] * 18)
    assert os.readlink(f"/proc/self/fd/{buf.fd}").startswith("/memfd:")
    buf.close()


def test_file_buffer_skips_an_unusable_folder_and_leaves_no_name(tmp_path):
    buf = BatchBuffer(1000, dirs=[str(tmp_path / "missing"), str(tmp_path)])
    assert buf.where == str(tmp_path)
    assert os.listdir(tmp_path) == []  # unlinked at once: only the descriptor reaches it
    buf.view(64, 2, 3)[:] = 7
    assert read_back(buf, 64, 18) == bytes([7] * 18)
    buf.close()


@pytest.fixture
def small_tmpfs(tmp_path):
    """A real 16 MiB tmpfs, like a container's small /dev/shm (mounting needs CAP_SYS_ADMIN)."""
    mnt = tmp_path / "shm"
    mnt.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mnt)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        # say why and what to do: as root in an unprivileged container the kernel refuses too.
        # mount's first line names the failure; its last one only points at dmesg.
        who = "as root" if os.geteuid() == 0 else f"as uid {os.geteuid()} (not root)"
        reason = (proc.stderr or proc.stdout).strip().splitlines()
        pytest.skip(f"cannot mount a tmpfs {who} ({reason[0] if reason else f'exit status {proc.returncode}'}): "
                    "mounting needs CAP_SYS_ADMIN; run the tests as root on a host, or in a container "
                    "started with --privileged (or --cap-add SYS_ADMIN), to run this small-/dev/shm test")
    yield mnt
    subprocess.run(["umount", str(mnt)], check=True)


def test_full_hd_batch_on_a_small_tmpfs_goes_to_the_fallback_without_sigbus(small_tmpfs, tmp_path):
    fallback = tmp_path / "tmp"
    fallback.mkdir()
    buf = BatchBuffer(FULL_HD_BATCH, dirs=[str(small_tmpfs), str(fallback)])
    assert buf.where == str(fallback)
    view = buf.view(FULL_HD_BATCH - 1080 * 1920 * 3, 1080, 1920)
    view[:] = 200  # the last image of the batch: SIGBUS here with an over-committed tmpfs
    assert int(np.asarray(view).max()) == 200
    assert os.listdir(small_tmpfs) == []  # the failed reservation left nothing behind
    del view
    buf.close()


def test_no_room_anywhere_is_one_clear_error(small_tmpfs):
    with pytest.raises(OSError, match="no room for a 59 MiB image buffer"):
        BatchBuffer(FULL_HD_BATCH, dirs=[str(small_tmpfs)])


def test_a_buffer_is_reused_only_when_nobody_else_holds_it():
    import sys

    from challenge_welding.ingestion.protocol import BufferPool
    from challenge_welding.ingestion.reaper import holds

    pool = BufferPool()
    buf = pool.take(1000)
    code = ("import mmap, os, sys, time; fd = int(sys.argv[1]); m = mmap.mmap(fd, {n}) "
            "if sys.argv[2] == 'map' else None; {close}print('ready', flush=True); time.sleep(60)")
    for how, close in (("map", "os.close(fd); "), ("fd", "")):
        proc = subprocess.Popen([sys.executable, "-c", code.format(n=buf.size, close=close),
                                 str(buf.fd), how], pass_fds=(buf.fd,), stdout=subprocess.PIPE,
                                text=True)
        try:
            assert proc.stdout.readline() == "ready\n"
            assert holds(buf.ident, [proc.pid]), how  # a mapping, or a descriptor only
        finally:
            proc.kill()
            proc.wait()
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert not holds(buf.ident, [other.pid])
    finally:
        other.kill()
        other.wait()
    pool.give_back(buf, held=False)
    assert pool.take(500) is buf and pool.reused == 1  # fits: reused as it is
    pool.give_back(buf, held=True)  # still held by the submission: never reused, closed here
    assert buf.fd == -1 and pool.free == []
    assert pool.take(500) is not buf and pool.made == 2
    pool.close()


def test_handed_back_buffers_are_checked_together_when_one_is_next_needed():
    from challenge_welding.ingestion.protocol import BufferPool

    asked = []
    pool = BufferPool(held=lambda idents: asked.append(set(idents)) or {kept.ident})
    kept, free = pool.take(1000), pool.take(1000)
    pool.hand_back(kept)
    pool.hand_back(free)
    assert asked == [] and kept.fd >= 0  # nothing checked yet: no /proc pass per batch
    again = pool.take(500)
    assert asked == [{kept.ident, free.ident}]  # one check for both
    assert again is free and pool.reused == 1
    assert kept.fd == -1  # still held by the submission: closed here, never rewritten
    pool.close()
    unknown = BufferPool()  # no way to tell who holds a buffer: never reused
    buf = unknown.take(1000)
    unknown.hand_back(buf)
    assert buf.fd == -1 and unknown.take(1000) is not buf
    unknown.close()
