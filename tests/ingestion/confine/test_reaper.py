"""The reaper finds a double-forked orphan (re-parented to us as the subreaper) by both of
its walks, and kills it; processes that are not the submission's are left alone."""

import os
import subprocess
import sys
import time

import pytest

from challenge_welding.ingestion.confine import reaper

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc, prctl")

DAEMON = """
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        open(sys.argv[1], "w").write(str(os.getpid()))
        time.sleep(60)
    os._exit(0)
os.wait()
time.sleep(60)
"""


def test_orphan_of_a_double_fork_is_found_and_killed(tmp_path):
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with reaper.guarded() as subreaper:
            assert subreaper
            before = {p for p, (pp, _s, _t) in reaper.process_table().items()
                      if pp == os.getpid()}
            assert bystander.pid in before
            pidfile = tmp_path / "daemon.pid"
            child = subprocess.Popen([sys.executable, "-c", DAEMON, str(pidfile)],
                                     start_new_session=True)
            since = reaper.start_ticks(child.pid)
            deadline = time.monotonic() + 30
            while not (pidfile.exists() and pidfile.read_text()):
                assert time.monotonic() < deadline
                time.sleep(0.05)
            daemon = int(pidfile.read_text())
            while reaper.process_table()[daemon][0] != os.getpid():  # re-parented to us
                assert time.monotonic() < deadline
                time.sleep(0.05)
            want = {child.pid, daemon}
            assert reaper.submission_pids(child.pid, since, before) == want
            assert reaper.submission_processes(child.pid, since, before) == want
            assert reaper.kill_tree(child.pid, since, before) == 1  # the daemon, one by one
            child.wait()
            assert not os.path.exists(f"/proc/{daemon}")  # killed and reaped
            assert bystander.poll() is None  # not the submission's: untouched
    finally:
        bystander.kill()
        bystander.wait()
