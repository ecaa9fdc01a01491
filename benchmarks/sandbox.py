"""The sandbox's own cost: the same work in a confined and an unconfined child, alternated.

Work: (a) CPU-bound numpy (a 512x512 matmul, what predict() mostly does), (b) a syscall
storm (os.getppid, os.stat: every one passes the seccomp filter's whole list; stat also
Landlock's path walk), (c) 200k fcntl/ioctl calls, whose arguments the filter inspects. Prints the median of each over rounds and the ratio confined / unconfined; state the
machine's load (uptime) with the figures.

    .venv/bin/python benchmarks/sandbox.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

from challenge_welding.ingestion.confine import sandbox

WORK = r"""
import os, sys, time
import numpy as np
a = np.random.default_rng(0).random((512, 512))
t = time.perf_counter()
for _ in range(20):
    a @ a
cpu = time.perf_counter() - t
t = time.perf_counter()
for _ in range(200000):
    os.getppid()
for _ in range(20000):
    os.stat(sys.executable)
sysc = time.perf_counter() - t
import fcntl, termios
r, w = os.pipe()
t = time.perf_counter()
for _ in range(100000):  # calls whose arguments the seccomp filter inspects
    fcntl.fcntl(r, fcntl.F_GETFL)
    fcntl.ioctl(r, termios.FIONREAD, b"    ")
checked = time.perf_counter() - t
print(cpu, sysc, checked)
"""


def once(confine) -> tuple[float, float, float]:
    # sys.executable, not its real path: the venv's interpreter has numpy, the base one not
    out = subprocess.run([sys.executable, "-c", WORK], capture_output=True, text=True,
                         check=True, preexec_fn=confine,
                         env={**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"})
    cpu, sysc, checked = map(float, out.stdout.split())
    return cpu, sysc, checked


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    scratch = tempfile.mkdtemp()
    policy = sandbox.Policy(read=[*sandbox.SYSTEM_READ, *sandbox.base_prefixes(), sys.prefix],
                            write=[scratch], abi=sandbox.usable_abi())
    confined, plain = [], []
    for _ in range(args.rounds):  # alternated: the machine's load drifts
        plain.append(once(None))
        confined.append(once(sandbox.Confinement(policy)))
    print(f"Landlock ABI {policy.abi or 'none'}; load: {os.getloadavg()[0]:.1f}")
    for i, what in enumerate(("numpy matmul (CPU-bound)", "220k syscalls",
                              "200k fcntl/ioctl")):
        p = statistics.median(r[i] for r in plain)
        c = statistics.median(r[i] for r in confined)
        print(f"{what:26s} unconfined {p * 1000:8.1f} ms   confined {c * 1000:8.1f} ms   "
              f"ratio {c / p:.3f}")


if __name__ == "__main__":
    main()
