"""Parent side of the image hand-over: a fresh, nameless memory file per batch, never reused.

A decode thread writes a whole batch of RGB images into a new buffer (cv2 writes straight
into it, see decode.py). Once written, the parent unmaps it and makes it read-only
(:meth:`BatchBuffer.seal`); at hand-over it passes the buffer's descriptor to the child over
the control socket (SCM_RIGHTS) and forgets it: it never reads, writes, resizes or reuses
that buffer again. The child maps the same bytes copy-on-write and wraps them in numpy
views, so the images cross the process boundary without a copy.

What holds, and why (docs/integrity.md, "Early pixels"):
- no early pixels, whatever the submission keeps: a buffer whose descriptor has crossed
  to the child is never written again, so whatever the submission retained of it (its
  descriptor, in flight in a socket or in a forked process; a mapping; its pages, held by a
  pipe through vmsplice/splice/tee or by an io_uring registration; numpy views) only ever
  shows the batch it was handed, after that batch's hand-over. Every batch is decoded into
  memory that never left our process. The guarantee rests on what we write and when, not on
  a scan of the submission's processes (the pool used to reuse buffers once /proc showed no
  holder; pages held by a pipe or io_uring, or a descriptor in flight, are not in /proc, and
  a probe saw 162 of 615 images early that way). The buffers have no name (``memfd_create``,
  ``O_TMPFILE``, or a file unlinked at once) and the parent is non-dumpable (reaper.py), so
  the child cannot open a batch before its descriptor arrives;
- fixed and read-only: a memfd is sealed after it is written and unmapped (F_SEAL_SHRINK,
  GROW, WRITE and SEAL): nobody can resize or write it any more, through any descriptor.
  A file buffer (tmpfs files cannot be sealed) crosses as a read-only descriptor of a file
  of mode 0400. Either way the evaluator never touches it again, so nothing the child does
  to it (ftruncate, write) can reach us: no SIGBUS in the parent;
- kept images stay valid: the child maps a buffer MAP_PRIVATE (copy-on-write: components
  that modify their input arrays in place still can, in their own copy of the touched
  pages) and never unmaps it; a mapping lives as long as the submission holds a view on it,
  and its bytes never change;
- speed: a fresh buffer's pages cost CPU (allocation, zeroing, the first-touch faults, the
  free): with 4 KiB pages as much as decoding the image (benchmarks/README.md). Where the
  kernel lets us mount a private tmpfs with transparent huge pages (root, or an
  unprivileged user namespace: :func:`huge_folder`), buffers are files there: 2 MiB pages
  cost about a twentieth, less than the former reused buffers' 4 KiB mappings. Otherwise
  (a Codabench worker: no capability, no namespace) a sealed memfd, given 2 MiB pages
  by ``MADV_COLLAPSE`` (Linux 6.1+, whatever shmem_enabled says but "deny":
  :func:`collapse_huge`), else by the system's shmem_enabled, else 4 KiB pages.
  ``CHALLENGE_WELDING_HANDOVER`` forces a way (:data:`HANDOVER_WAYS`: benchmarks and
  tests). Buffers are made and their space reserved ahead, between timed calls (decode.py's
  bursts, ingest.py's prefill while the child loads); a buffer never handed over (a cancelled
  batch) is reused.

A memfd lives in RAM outside /dev/shm, so a container's 64 MB /dev/shm does not limit it.
Without memfd (not Linux) the buffer is a file created and unlinked in /dev/shm when it has
room, else in the temporary folder. Every file buffer's space is reserved up front
(posix_fallocate when available) so that a full folder is an error here, not a SIGBUS on
first write.
"""

from __future__ import annotations

import contextlib
import errno
try:
    import fcntl
except ImportError:  # Windows: no seals; the file fallback crosses read-only (see seal())
    fcntl = None
import gc
import mmap
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import threading

import numpy as np

from challenge_welding.contract.errors import ChallengeError

SEALS = (getattr(fcntl, "F_SEAL_SHRINK", 2) | getattr(fcntl, "F_SEAL_GROW", 4)
         | getattr(fcntl, "F_SEAL_WRITE", 8) | getattr(fcntl, "F_SEAL_SEAL", 1))
MADV_HUGEPAGE = 14
MADV_COLLAPSE = 25  # Linux 6.1+
HUGE = 2 << 20  # a PMD-sized transparent huge page on x86-64 and arm64 (4 KiB base pages)
SHMEM_ENABLED = "/sys/kernel/mm/transparent_hugepage/shmem_enabled"
HANDOVER_ENV = "CHALLENGE_WELDING_HANDOVER"
# what the variable may force: the private huge-page tmpfs when it can be made (the default);
# a memfd, as where no namespace may be made (2 MiB pages where MADV_COLLAPSE works); a
# memfd with 4 KiB pages (what a kernel before 6.1 gives, e.g. 5.15)
HANDOVER_WAYS = ("auto", "memfd", "memfd-4k")


def buffer_dirs() -> list[str]:
    """Where file-backed buffers may live, preferred first: /dev/shm (RAM), then the temp folder."""
    dirs = [d for d in ("/dev/shm",) if os.path.isdir(d) and os.access(d, os.W_OK)]
    return dirs + [tempfile.gettempdir()]


def _reserve(fd: int, size: int) -> None:
    if hasattr(os, "posix_fallocate"):
        os.posix_fallocate(fd, 0, size)
    else:  # macOS: no fallocate; ftruncate makes a sparse file
        os.ftruncate(fd, size)


def _unlinked_file(size: int, dirs: list[str]) -> tuple[int, int, str]:
    """(read-write fd, read-only fd, folder) of a new file, unlinked at once, space reserved."""
    errors = []
    for folder in dirs:
        path = os.path.join(folder, f"cw{os.getpid()}-{secrets.token_hex(8)}")
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as exc:
            errors.append(f"{folder}: {exc.strerror or exc}")
            continue
        try:
            ro = os.open(path, os.O_RDONLY)  # what the child will get: opened before the unlink
        finally:
            os.unlink(path)  # nameless from now on: only descriptors reach it
        try:
            _reserve(fd, size)
            return fd, ro, folder
        except OSError as exc:
            errors.append(f"{folder}: {exc.strerror or exc}")
            os.close(fd)
            os.close(ro)
    raise OSError(f"no room for a {size >> 20} MiB image buffer ({'; '.join(errors)})")


# -- a private tmpfs with huge pages ---------------------------------------------------------
# Run in a process of its own (unshare needs a single-threaded process): a private mount
# namespace (as root), else a user namespace too (a user's laptop); the tmpfs is mounted
# there and its root's descriptor sent back. The namespace dies with the helper; the
# descriptor keeps the file system alive, and files made under it through openat(O_TMPFILE)
# have no name anywhere. Standard library only: it runs before anything of ours is imported.
_MOUNT_HELPER = r"""
import ctypes, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
NEWNS, NEWUSER, NOSUID, NODEV, NOEXEC, REC, PRIVATE = 0x20000, 0x10000000, 2, 4, 8, 16384, 262144
def fail(what):
    sys.exit(f"{what}: {os.strerror(ctypes.get_errno())}")
uid, gid = os.geteuid(), os.getegid()
if libc.unshare(NEWNS) != 0:
    if libc.unshare(NEWUSER | NEWNS) != 0:
        fail("unshare")
    for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
        with open(f"/proc/self/{name}", "w") as fh:
            fh.write(text)
if libc.mount(None, b"/", None, REC | PRIVATE, None) != 0:
    fail("making the mounts private")
if libc.mount(b"cw-handover", sys.argv[1].encode(), b"tmpfs", NOSUID | NODEV | NOEXEC,
              b"huge=within_size,size=100%,mode=0700") != 0:
    fail("mount tmpfs")
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
socket.send_fds(socket.socket(fileno=int(sys.argv[2])), [b"k"], [fd])
"""

_huge: dict = {}  # the process's huge-page folder, made once: {"fd": int | None, "why": str}
_huge_lock = threading.Lock()


def shmem_huge_setting() -> str:
    """The system's huge-page policy for memfds ("never", "advise", "always", ...; "" unknown)."""
    try:
        with open(SHMEM_ENABLED) as fh:
            text = fh.read()
    except OSError:
        return ""
    return text[text.find("[") + 1:text.find("]")] if "[" in text else ""


def huge_folder() -> int | None:
    """A directory descriptor on a private tmpfs mounted with huge pages, made once per
    process; None where no namespace may be made or the kernel has no such pages (the
    reason in ``_huge["why"]``). Wherever the system already gives memfds huge pages
    (shmem_enabled always, within_size or force), None: a sealed memfd is as fast there."""
    with _huge_lock:
        if not _huge:
            _huge.update(_mount_huge_folder())
        return _huge["fd"]


def handover_way() -> str:
    """The way ``CHALLENGE_WELDING_HANDOVER`` forces (one of :data:`HANDOVER_WAYS`;
    unset or empty: "auto"). Another value is a ChallengeError naming the variable."""
    way = os.environ.get(HANDOVER_ENV, "").strip() or "auto"
    if way not in HANDOVER_WAYS:
        raise ChallengeError(f"{HANDOVER_ENV}={way!r} is not a hand-over way: unset it, or set "
                         f"it to one of {', '.join(HANDOVER_WAYS)}")
    return way


def _mount_huge_folder() -> dict:
    if not sys.platform.startswith("linux") or not hasattr(os, "O_TMPFILE"):
        return {"fd": None, "why": "not Linux"}
    if handover_way() != "auto":
        return {"fd": None, "why": f"{HANDOVER_ENV}={handover_way()}"}
    setting = shmem_huge_setting()
    if setting in ("always", "within_size", "force"):
        return {"fd": None, "why": f"memfds get huge pages (shmem_enabled {setting})"}
    if setting in ("deny", ""):
        return {"fd": None, "why": "no huge pages for tmpfs (shmem_enabled "
                                   f"{setting or 'missing'})"}
    where = tempfile.mkdtemp(prefix="cw-handover-")
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        proc = subprocess.run([sys.executable, "-I", "-S", "-c", _MOUNT_HELPER, where,
                               str(theirs.fileno())], pass_fds=[theirs.fileno()],
                              capture_output=True, text=True, timeout=30, check=False)
        theirs.close()
        if proc.returncode != 0:
            return {"fd": None, "why": (proc.stderr.strip().splitlines() or ["?"])[-1]}
        ours.settimeout(5)
        _msg, fds, _flags, _addr = socket.recv_fds(ours, 1, 1)
        if not fds:
            return {"fd": None, "why": "the mount helper sent no folder"}
        return {"fd": fds[0], "why": "a private tmpfs with huge pages"}
    except (OSError, subprocess.SubprocessError) as exc:
        return {"fd": None, "why": str(exc)}
    finally:
        theirs.close()
        ours.close()
        with contextlib.suppress(OSError):
            os.rmdir(where)  # the mount was in the helper's namespace only: empty here


# -- 2 MiB pages for a memfd, without mounting anything ------------------------------------
# MADV_COLLAPSE (Linux 6.1+) turns the small pages of a shmem range mapped at a 2 MiB-aligned
# address into huge pages, whatever shmem_enabled says (but "deny"), with no privilege. One
# small page per 2 MiB is touched first (an empty range has nothing to collapse); the rest
# is zeroed once, as part of a huge page. The parent then writes through that same aligned
# mapping, so its writes fault once per 2 MiB, not per 4 KiB (through an unaligned mapping
# of the same huge pages they cost 6x more). Hand-written with ctypes: Python's mmap cannot
# choose the address, and no maintained library offers this call.
_collapse: dict = {}  # {"ok": False, "why": str} once the kernel refused: not tried again


def _libc():
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    return libc


def collapse_wanted(size: int) -> bool:
    """Whether a memfd of ``size`` bytes is to be collapsed: at least one 2 MiB page; not
    where the system already faults shmem in huge pages ("always", "within_size", "force")
    or refuses them ("deny", or no setting at all), not when 4 KiB pages are forced
    (:data:`HANDOVER_ENV` ``memfd-4k``), and not after the kernel refused once."""
    if size < HUGE or not sys.platform.startswith("linux") or "ok" in _collapse:
        return False
    return handover_way() != "memfd-4k" and shmem_huge_setting() in ("never", "advise")


class AlignedMapping:
    """The first ``size`` bytes of ``fd`` mapped shared and read-write at a 2 MiB-aligned
    address, inside an anonymous Python mmap one huge page longer (``anon``) whose aligned
    part the file mapping replaces (MAP_FIXED). ``mm`` is a memoryview of exactly those
    bytes: numpy views of it hold an export of ``anon``, so :meth:`close` (anon.close(),
    which unmaps the whole span) refuses with BufferError while a view lives, as
    mmap.close() does. ``huge``: the bytes MADV_COLLAPSE gave 2 MiB pages (0 where the
    kernel cannot: before 6.1, no transparent huge pages, none free right now)."""

    def __init__(self, fd: int, size: int):
        import ctypes

        self.size = size
        self.anon = mmap.mmap(-1, size + HUGE, flags=mmap.MAP_PRIVATE)
        probe = ctypes.c_char.from_buffer(self.anon)  # its address (an export, dropped next)
        base = ctypes.addressof(probe)
        del probe
        self.shift = -base % HUGE
        at = base + self.shift
        got = _libc().mmap(at, size, mmap.PROT_READ | mmap.PROT_WRITE,
                           mmap.MAP_SHARED | MAP_FIXED, fd, 0)  # within our own mapping only
        if got != at:
            err = ctypes.get_errno()
            self.anon.close()
            raise OSError(err, f"mmap: {os.strerror(err)}")
        self.mm: memoryview | None = memoryview(self.anon)[self.shift:self.shift + size]
        span = size // HUGE * HUGE
        for k in range(0, span, HUGE):
            self.mm[k] = 0  # a page to collapse around (the file reads 0 there anyway)
        try:
            self.anon.madvise(MADV_COLLAPSE, self.shift, span)
            self.huge = span
        except OSError as exc:
            self.huge = 0
            if exc.errno == errno.EINVAL:
                # no MADV_COLLAPSE (Linux < 6.1) or no huge pages for shmem: not tried again
                # (EAGAIN, ENOMEM: no huge page free now; this buffer keeps 4 KiB pages)
                _collapse.update(ok=False, why=f"MADV_COLLAPSE: {exc.strerror}")

    def close(self) -> None:
        """Unmap; BufferError (and still mapped, ``mm`` usable) while a view of it lives."""
        if self.anon.closed:
            return
        self.mm = None  # ours only: a numpy view keeps its own reference, and the export
        try:
            self.anon.close()
        except BufferError:
            self.mm = memoryview(self.anon)[self.shift:self.shift + self.size]
            raise


MAP_FIXED = 0x10


def handover_kind() -> str:
    """How this process makes hand-over buffers: "tmpfs", "memfd" or "file"."""
    if huge_folder() is not None:
        return "tmpfs"
    return "memfd" if hasattr(os, "memfd_create") else "file"


class BatchBuffer:
    """One batch's images in a nameless memory file, mapped read-write by the parent until
    :meth:`seal`; then only a read-only (sealed) descriptor is left, the one the child gets.

    ``kind``: "tmpfs" (a file in :func:`huge_folder`), "memfd" or "file" (an unlinked file
    in the first of ``dirs`` with room; the default folders when ``dirs`` is None); by
    default :func:`handover_kind`, or "file" when ``dirs`` is given. ``collapse`` False: a
    memfd keeps its pages unmade (a buffer never written, e.g. the hand-over check's:
    collapsing it would zero all of it for nothing, 140 ms per 60 MiB of memory the VM had
    just given back to its host).
    """

    def __init__(self, nbytes: int, dirs: list[str] | None = None, kind: str | None = None,
                 collapse: bool = True):
        size = max(1, nbytes)
        kind = kind or ("file" if dirs is not None else handover_kind())
        self.ro = -1  # the read-only descriptor the child gets (file kinds)
        self.mm: mmap.mmap | None = None
        self.aligned: AlignedMapping | None = None  # the writer's mapping of a collapsed memfd
        if kind == "memfd":
            self.fd = os.memfd_create("cw-batch", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
            os.ftruncate(self.fd, size)
            self.where = "memfd"
            if collapse and collapse_wanted(size):
                try:
                    self.aligned = AlignedMapping(self.fd, size)
                except OSError:  # no address space left: the plain mapping below
                    self.aligned = None
        elif kind == "tmpfs":
            self.fd = os.open(".", os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o600,
                              dir_fd=huge_folder())
            self.where = "tmpfs"
            try:
                self.ro = os.open(f"/proc/self/fd/{self.fd}", os.O_RDONLY | os.O_CLOEXEC)
                _reserve(self.fd, size)  # a full tmpfs: an error here, not a SIGBUS later
            except OSError:
                self.close()
                raise
        else:
            self.fd, self.ro, self.where = _unlinked_file(size, dirs or buffer_dirs())
        self.kind, self.size, self.sealed = kind, size, False
        self.huge = self.aligned.huge if self.aligned is not None else 0  # bytes in 2 MiB pages
        self.mm = self.aligned.mm if self.aligned is not None else mmap.mmap(self.fd, size)
        if kind == "memfd" and shmem_huge_setting() == "advise" and hasattr(self.mm, "madvise"):
            with contextlib.suppress(OSError):
                self.mm.madvise(MADV_HUGEPAGE)

    def view(self, offset: int, h: int, w: int) -> np.ndarray:
        # frombuffer, not ndarray(buffer=): only frombuffer's array holds a buffer export
        # (numpy 2.4), the one that makes unmap() refuse while a view lives
        return np.frombuffer(self.mm, np.uint8, h * w * 3, offset).reshape(h, w, 3)

    def unmap(self) -> None:
        """Drop the parent's mapping; the descriptor still holds the bytes. Our own views must
        be gone (decoders done); one left to the garbage collector is collected here."""
        if self.mm is None:
            return
        if self.aligned is not None:
            self.mm = None  # our reference would hold the export that close() checks
            try:
                self.aligned.close()
            except BufferError:  # a view of ours in a reference cycle: collect it, then unmap
                gc.collect()
                try:
                    self.aligned.close()
                except BufferError:
                    self.mm = self.aligned.mm  # still mapped: the live view stays valid
                    raise
            return
        try:
            self.mm.close()
        except BufferError:  # a view of ours in a reference cycle: collect it, then unmap
            gc.collect()
            self.mm.close()
        self.mm = None

    def seal(self) -> int:
        """Written: unmap it and make it read-only for good; returns the descriptor that may
        cross to the child. A memfd gets every seal (nobody may write, shrink or grow it
        any more, through any descriptor); a file keeps only the read-only descriptor, mode
        0400. Either way this buffer is never written again: :meth:`view` is gone."""
        if not self.sealed:
            self.unmap()  # F_SEAL_WRITE refuses while a shared writable mapping exists
            if self.kind == "memfd":
                fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS, SEALS)
            else:
                os.fchmod(self.fd, 0o400)
                os.close(self.fd)
                self.fd, self.ro = self.ro, -1
            self.sealed = True
        return self.fd

    def close(self) -> None:
        """Forget the buffer on the parent's side (after hand-over, or when never handed over)."""
        self.unmap()
        for fd in (self.fd, self.ro):
            if fd >= 0:
                os.close(fd)
        self.fd = self.ro = -1


# buffer sizes in steps of one huge page: every fresh byte is zeroed by the kernel, so no more
# than a page beyond the batch (8 MiB steps zeroed 4.7 MiB too many per full-HD batch)
STEP = HUGE


class BufferPool:
    """Fresh batch buffers, made ahead; a buffer is reused only if it never crossed.

    :meth:`take` gives a buffer that no descriptor has ever left our process with: a spare
    one (made ahead by :meth:`prefill`, or given back unused with :meth:`give_back` by a
    cancelled batch), else a new one. A buffer handed over is closed by its user
    (predict.handover) and never comes back. ``keep``: at most this many spares."""

    def __init__(self, keep: int = 4, dirs: list[str] | None = None, kind: str | None = None):
        self.keep, self.dirs = keep, dirs
        self.kind = kind or ("file" if dirs is not None else handover_kind())
        self.free: list[BatchBuffer] = []
        self.lock = threading.Lock()
        self.made = self.reused = 0
        self.collapsed = 0  # memfds given 2 MiB pages by MADV_COLLAPSE

    def _new(self, nbytes: int) -> BatchBuffer:
        buffer = BatchBuffer(max(1, -(-nbytes // STEP) * STEP), self.dirs, self.kind)
        if buffer.huge:
            with self.lock:
                self.collapsed += 1
        return buffer

    def take(self, nbytes: int) -> BatchBuffer:
        with self.lock:
            fits = [b for b in self.free if b.size >= nbytes]
            if fits:
                buffer = min(fits, key=lambda b: b.size)
                self.free.remove(buffer)
                self.reused += 1
                return buffer
            self.made += 1
        return self._new(nbytes)

    def prefill(self, nbytes: int, count: int) -> None:
        """Make ``count`` buffers for batches of ``nbytes`` and fault every page in once: run
        while no timed call runs (the child importing and loading its model), so that a
        fresh page's cost is not paid inside a set."""
        for _ in range(min(count, self.keep)):
            buffer = self._new(nbytes)
            np.ndarray(buffer.size, np.uint8, buffer=buffer.mm)[::mmap.PAGESIZE] = 0
            with self.lock:
                self.made += 1
                self.free.append(buffer)

    def give_back(self, buffer: BatchBuffer) -> None:
        """A buffer that was never handed over (a cancelled batch): a spare again. A sealed
        one (it may have crossed) is closed, never reused."""
        with self.lock:
            if not buffer.sealed and buffer.mm is not None and len(self.free) < self.keep:
                self.free.append(buffer)
                return
        buffer.close()

    def close(self) -> None:
        with self.lock:
            for buffer in self.free:
                buffer.close()
            self.free.clear()


def layout(shapes: list[tuple[int, int]]) -> tuple[list[tuple[int, int, int]], int]:
    """Byte offsets of images of the given (h, w) packed one after another, 64-byte aligned."""
    items, offset = [], 0
    for h, w in shapes:
        items.append((offset, h, w))
        offset += -(-(h * w * 3) // 64) * 64
    return items, offset
