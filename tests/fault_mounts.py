"""Real file-system faults for the tests of our own faults: a small tmpfs (no space left), a
read-only one (root ignores chmod 0555, not a read-only mount), a file where a folder is
needed. Mounting needs CAP_SYS_ADMIN: without it a test is skipped, saying why."""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

import pytest


def _mount(args: list[str]) -> None:
    proc = subprocess.run(["mount", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        who = "as root" if os.geteuid() == 0 else f"as uid {os.geteuid()} (not root)"
        reason = (proc.stderr or proc.stdout).strip().splitlines()
        pytest.skip(f"cannot mount a tmpfs {who} ({reason[0] if reason else proc.returncode}): "
                    "mounting needs CAP_SYS_ADMIN; run as root on a host or in a --privileged "
                    "container to make this fault for real")


@contextlib.contextmanager
def tmpfs(where: Path, size: str, read_only: bool = False, files: dict | None = None):
    """A tmpfs of ``size`` at ``where`` (made), holding ``files`` ({relative path: bytes or
    None for a folder}); remounted read-only when asked. Unmounted on exit."""
    where.mkdir(parents=True, exist_ok=True)
    _mount(["-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(where)])
    try:
        for rel, data in (files or {}).items():
            path = where / rel
            if data is None:
                path.mkdir(parents=True, exist_ok=True)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
        if read_only:
            _mount(["-o", "remount,ro", str(where)])
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def error_lines(stderr: str) -> list[str]:
    """The lines a command said as errors; a traceback is never one of them."""
    assert "Traceback" not in stderr, stderr
    return [line for line in stderr.splitlines() if line.startswith("error:")]
