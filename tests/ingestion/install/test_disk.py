"""An install step of participant code may not fill the disk (install/disk.py).

Before the watch (main at 0702874), the submission below wrote 160 MiB from its setup.py and
the install went on ("ok"): nothing bounded how much an install writes, only how big one
file of the run's scratch may be. Now the step is stopped past the bound, in one line that
blames the submission, and the disk keeps what it had.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from challenge_welding.ingestion.install import disk
from challenge_welding.ingestion.run.ingest import ingest

from fault_mounts import tmpfs
from ingestion_helpers import SETUP_PY, make_submission

# setup.py writes 40 files of 4 MiB where it runs (its build folder), then says it finished
FILLER = SETUP_PY + '''
import os
for i in range(40):
    with open(f"filler-{i}.bin", "wb") as fh:
        fh.write(os.urandom(4 << 20))
print("FILLER wrote 160 MiB")
'''


def test_setup_py_that_fills_the_disk_is_stopped(tmp_path, input_data, monkeypatch):
    monkeypatch.setenv(disk.INSTALL_MB_ENV, "48")
    with tmpfs(tmp_path / "fs", "1g") as fs:  # the environments' cache alone on a file system
        sub = make_submission(fs / "sub", setup=FILLER)
        before = os.statvfs(fs)
        report = ingest(sub, input_data, fs / "out", cache_dir=fs / "envs",
                        sets=["performance"], progress=False, verbose=False)
        after = os.statvfs(fs)
        assert report["status"] == "failed"
        [line] = report["errors"]
        assert "the install wrote more than 48 MiB to the disk under " in line, line
        assert line.endswith(f"stopped ({disk.INSTALL_MB_ENV} sets the bound)"), line
        assert "evaluator's fault" not in line
        # stopped within a few polls of the bound (4 MiB per write, 0.25 s a poll), never the
        # 160 MiB, and what it wrote is gone with the failed build
        grew = (before.f_bfree - after.f_bfree) * after.f_frsize
        assert grew < 100 << 20, grew >> 20


def test_a_disk_nearly_full_from_the_start_is_ours(tmp_path):
    with tmpfs(tmp_path / "fs", "300m") as fs:
        # 20 MiB left (300 - 280, in pages): under a tenth of this small file system
        (fs / "ballast").write_bytes(b"\0" * (280 << 20))
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                                start_new_session=True)
        t0 = time.monotonic()
        watch = disk.DiskWatch(proc.pid, [str(fs)], cap=1 << 40, interval=0.05)
        assert proc.wait(10) == -9  # its group killed at the first poll
        watch.stop()
        assert time.monotonic() - t0 < 5
        assert watch.ours is True  # it wrote nothing: the disk was full before it
        assert watch.line == f"the disk under {fs} has 20 MiB left (the install wrote 0 MiB " \
                             "of it): stopped", watch.line


def test_the_bound_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv(disk.INSTALL_MB_ENV, raising=False)
    assert disk.install_cap() == 20480 << 20
    monkeypatch.setenv(disk.INSTALL_MB_ENV, "1.5")
    assert disk.install_cap() == int(1.5 * (1 << 20))
    monkeypatch.setenv(disk.INSTALL_MB_ENV, "lots")  # not a number: the default
    assert disk.install_cap() == 20480 << 20
