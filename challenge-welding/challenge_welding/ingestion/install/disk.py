"""How much an install step of participant code may write to disk.

setup.py and a build backend run with the right to write the environment being built. A
bounded tmpfs cannot hold that environment (it must outlive the step, on disk, in the
environments' cache), and ``RLIMIT_FSIZE`` bounds one file, not how many: before this watch,
a setup.py writing files in a loop filled the disk under the cache, the organiser's disk.

So the step is watched while it runs: every ``interval`` seconds the used bytes of each file
system it writes on (``statvfs``) are compared with their level at its start. Past ``cap``
bytes more (``CHALLENGE_WELDING_INSTALL_MB``, default 20 GiB: the published TensorFlow
solution's environment takes about 1.5 GiB), or when a file system it writes on is left
with less than ``reserve`` free (a tenth of a smaller one), the step's process group is
killed and :attr:`DiskWatch.line` says which. ``statvfs`` counts every writer of that file system, not the step alone, so a
busy shared disk could stop an honest install; the cap is large for that reason, and a
disk found nearly full is told as the evaluator's fault (free space), not the submission's,
unless the step itself wrote most of it. Hand-written: no library watches a process tree's
disk use (quotas need the administrator, cgroups v2 have no disk-space controller).
"""

from __future__ import annotations

import os
import threading

from challenge_welding.ingestion.confine import reaper

INSTALL_MB_ENV = "CHALLENGE_WELDING_INSTALL_MB"
DEFAULT_INSTALL_MB = 20480
# never leave a file system the step writes on with less free (a tenth of a small one)
RESERVE = 256 << 20


def install_cap() -> int:
    """The bytes an install step may add to the disk (``CHALLENGE_WELDING_INSTALL_MB``)."""
    want = os.environ.get(INSTALL_MB_ENV, "").strip()
    mb = float(want) if want.replace(".", "", 1).isdigit() and float(want) > 0 \
        else DEFAULT_INSTALL_MB
    return int(mb * (1 << 20))


def _used(path: str) -> tuple[int, int, int]:
    """(used bytes, free bytes for us, size) of the file system under ``path``."""
    st = os.statvfs(path)
    return ((st.f_blocks - st.f_bfree) * st.f_frsize, st.f_bavail * st.f_frsize,
            st.f_blocks * st.f_frsize)


class DiskWatch:
    """Kills process group ``pgid`` when the file systems under ``paths`` grow by more than
    ``cap`` bytes since the start, or keep less than ``reserve`` free. :attr:`line` (None:
    never fired) says why; :attr:`ours` tells a disk that was nearly full from the start
    (the evaluator's business) from one the step filled (the submission's)."""

    def __init__(self, pgid: int, paths, cap: int | None = None, reserve: int = RESERVE,
                 interval: float = 0.25):
        self.pgid, self.interval, self.reserve = pgid, interval, reserve
        self.cap = install_cap() if cap is None else cap
        self.line: str | None = None
        self.ours = False
        self.base: dict[int, tuple[str, int]] = {}  # st_dev -> (a path on it, used at start)
        for path in paths:
            try:
                dev = os.stat(path).st_dev
                if dev not in self.base:
                    self.base[dev] = (str(path), _used(path)[0])
            except OSError:
                continue  # not made yet or gone: nothing to watch there
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="disk-watch", daemon=True)
        self.thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(self.interval):
            for path, start in self.base.values():
                try:
                    used, free, size = _used(path)
                except OSError:
                    continue
                grew = used - start
                if grew > self.cap:
                    self.line = (f"the install wrote more than {self.cap >> 20} MiB to the disk "
                                 f"under {path} ({grew >> 20} MiB): stopped ({INSTALL_MB_ENV} "
                                 "sets the bound)")
                elif free < min(self.reserve, size // 10):  # a small tmpfs: a tenth of it
                    # the step wrote less than half of what was free when it started: the
                    # disk was nearly full already (ours to free), else the step filled it
                    self.ours = grew < (free + max(grew, 0)) / 2
                    self.line = (f"the disk under {path} has {free >> 20} MiB left (the install "
                                 f"wrote {max(grew, 0) >> 20} MiB of it): stopped")
                else:
                    continue
                reaper.end_group(self.pgid, timeout=30.0, skip=self.pgid)
                return

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(5.0)
