"""Batch buffers: a file in a private huge-page tmpfs, or a nameless memfd; without either, an
unlinked file in /dev/shm, falling back to the temporary folder when /dev/shm is too small
(64 MB in containers). What crosses to the child is sealed or read-only."""

import mmap
import os

import numpy as np
import pytest

from challenge_welding.ingestion.handover.buffers import BatchBuffer
from fault_mounts import tmpfs

FULL_HD_BATCH = 10 * 1080 * 1920 * 3  # 62 MB: one default batch of full-HD images


def read_back(buffer, offset, n):
    """What the child sees: a fresh mapping of the descriptor."""
    mm = mmap.mmap(buffer.fd, buffer.size)
    try:
        return mm[offset:offset + n]
    finally:
        mm.close()


def test_memfd_buffer_is_nameless_and_holds_what_was_written():
    buf = BatchBuffer(1000, kind="memfd")
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
    with tmpfs(tmp_path / "shm", "16m") as mnt:
        yield mnt


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


def _accmode(fd):
    import fcntl

    return fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE


def test_a_sealed_memfd_can_neither_be_written_nor_resized_and_maps_copy_on_write():
    """What the child gets of a memfd: every seal, so write(), ftruncate() (shrink or grow)
    and a shared writable mapping are refused, by the kernel, through any descriptor; a
    private mapping is allowed and its writes stay in the writer's copy."""
    import fcntl

    from challenge_welding.ingestion.handover.buffers import SEALS

    buf = BatchBuffer(1 << 20, kind="memfd")
    buf.view(0, 2, 3)[:] = 7
    fd = buf.seal()
    assert buf.mm is None and fcntl.fcntl(fd, fcntl.F_GET_SEALS) == SEALS
    for attempt in (lambda: os.write(fd, b"x"), lambda: os.pwrite(fd, b"x", 0),
                    lambda: os.ftruncate(fd, 0), lambda: os.ftruncate(fd, 2 << 20),
                    lambda: mmap.mmap(fd, buf.size),  # shared, writable
                    lambda: fcntl.fcntl(fd, fcntl.F_ADD_SEALS, 0)):
        with pytest.raises(PermissionError):
            attempt()
    mine = mmap.mmap(fd, buf.size, access=mmap.ACCESS_COPY)  # as the child maps it
    mine[0:3] = b"abc"  # a component writing into its input array: its own copy
    assert read_back_private(fd, buf.size, 0, 4) == bytes([7, 7, 7, 7])
    assert os.fstat(fd).st_size == 1 << 20
    mine.close()
    buf.close()


def read_back_private(fd, size, offset, n):
    mm = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
    try:
        return mm[offset:offset + n]
    finally:
        mm.close()


@pytest.mark.parametrize("kind", ["tmpfs", "file"])
def test_a_file_buffer_crosses_as_a_read_only_descriptor(kind, tmp_path):
    """tmpfs files cannot be sealed: what crosses is a read-only descriptor (no write, no
    truncate, no shared writable mapping) of a file of mode 0400."""
    from challenge_welding.ingestion.handover import buffers

    if kind == "tmpfs" and buffers.huge_folder() is None:
        pytest.skip(f"no private huge-page tmpfs here: {buffers._huge['why']}")
    buf = BatchBuffer(1 << 20, dirs=[str(tmp_path)] if kind == "file" else None, kind=kind)
    buf.view(64, 2, 3)[:] = 9
    fd = buf.seal()
    assert _accmode(fd) == os.O_RDONLY and os.fstat(fd).st_mode & 0o777 == 0o400
    for attempt, error in ((lambda: os.write(fd, b"x"), OSError),
                           (lambda: os.ftruncate(fd, 0), OSError),
                           (lambda: mmap.mmap(fd, buf.size), PermissionError)):
        with pytest.raises(error):
            attempt()
    mine = mmap.mmap(fd, buf.size, access=mmap.ACCESS_COPY)
    mine[64:67] = b"abc"
    assert read_back_private(fd, buf.size, 64, 18) == bytes([9] * 18)
    mine.close()
    assert os.listdir(tmp_path) == []
    buf.close()


def test_huge_folder_files_get_2_mib_pages():
    """The speed of fresh buffers rests on huge pages (buffers.py): a buffer made in the
    private tmpfs is mapped with 2 MiB pages, as the kernel's own accounting shows."""
    from challenge_welding.ingestion.handover import buffers

    if buffers.huge_folder() is None:
        pytest.skip(f"no private huge-page tmpfs here: {buffers._huge['why']}")
    buf = BatchBuffer(16 << 20, kind="tmpfs")
    np.ndarray(buf.size, np.uint8, buffer=buf.mm)[::4096] = 1
    addr = np.frombuffer(buf.mm, np.uint8).ctypes.data
    with open("/proc/self/smaps") as fh:
        text = fh.read()
    block = next(b for b in text.split("\n") if b.startswith(f"{addr:x}-"))
    rest = text[text.index(block):]
    pmd = next(line for line in rest.splitlines() if line.startswith(("FilePmdMapped",
                                                                        "ShmemPmdMapped")))
    assert int(pmd.split()[1]) >= 8 << 10, pmd  # at least half of the 16 MiB in 2 MiB pages
    buf.close()


def test_the_pool_reuses_only_buffers_that_never_crossed():
    from challenge_welding.ingestion.handover.buffers import BufferPool

    pool = BufferPool()
    unused = pool.take(1000)
    pool.give_back(unused)  # a cancelled batch: never sealed, never handed over
    assert pool.take(500) is unused and pool.reused == 1
    unused.seal()  # sealed: it may have crossed
    pool.give_back(unused)
    assert unused.fd == -1 and pool.free == []
    assert pool.take(500) is not unused and pool.made == 2
    pool.close()
