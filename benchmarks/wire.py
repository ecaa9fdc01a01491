"""The wire's own cost: one batch's round trip (hand-over message -> answer -> idle) with the
checked JSON frames of ingestion/handover/wire.py, against the pickle protocol it replaced
(multiprocessing.connection), measured in the same run between the same two processes.

The child side is child.py's real code (Reader, pack_output, encode); the parent side is the
real Channel and checks. No image, no descriptor, no predict(): only what the protocol adds.

    .venv/bin/python benchmarks/wire.py [--rounds 3000] [--batch 10]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import time
from multiprocessing import Pipe, get_context

import numpy as np

from challenge_welding.ingestion.handover import child
from challenge_welding.ingestion.handover import wire


def _answer(n):
    return {"predictions": ["OK"] * n, "probabilities": [np.array([0.1, 0.8, 0.1])] * n,
            "OOD_scores": [np.float64(0.3)] * n}


def _wire_child(sock_fd: int, n: int) -> None:
    sock = socket.socket(fileno=sock_fd)
    reader = child.Reader(sock)
    while True:
        msg = reader.frame()
        if msg["op"] == child.OP_STOP:
            return
        fields, arrays = child.pack_output(_answer(n), n)
        tag = {"id": msg["id"], "nonce": msg["nonce"]}
        child.send(sock, {"op": child.OP_RESULT, **tag, "seconds": 0.0, "error": None, **fields},
                   arrays)
        child.send(sock, {"op": child.OP_IDLE, **tag})


def bench_wire(rounds: int, n: int) -> list[float]:
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:  # the child: answer until told to stop
        ours.close()
        _wire_child(theirs.detach(), n)
        os._exit(0)
    theirs.close()
    chan = wire.Channel(ours)
    items = [[i * 64, 36, 64] for i in range(n)]
    meta = [{"welding-seams": "c20", "resolution": [64, 36]}] * n
    times = []
    for i in range(rounds):
        nonce = os.urandom(8).hex()
        t0 = time.perf_counter()
        chan.check_quiet()
        chan.send({"op": "batch", "id": i, "nonce": nonce, "size": 1, "images": items,
                   "meta": meta, "device": None}, None, 10)
        head = chan.read_header(child.header_cap(n), None, lambda: True)
        values = chan.read_arrays(wire.check_result(head, i, nonce, n), None, lambda: True)
        idle = chan.read_header(child.header_cap(0), None, lambda: True)
        wire.check_tag(idle, i, nonce)
        times.append(time.perf_counter() - t0)
        assert values[0].shape == (n, 3)
    chan.send({"op": "stop"}, None, 10)
    os.waitpid(pid, 0)
    return times


def _pickle_child(conn, n):
    while True:
        msg = conn.recv()
        if msg["op"] == "stop":
            return
        conn.send({"op": "result", "id": msg["id"], "seconds": 0.0,
                   "output": child.to_plain(_answer(n)), "ignored": []})
        conn.send({"op": "idle", "id": msg["id"]})


def bench_pickle(rounds: int, n: int) -> list[float]:
    ours, theirs = Pipe()
    proc = get_context("fork").Process(target=_pickle_child, args=(theirs, n))
    proc.start()
    items = [(i * 64, 36, 64) for i in range(n)]
    meta = [{"welding-seams": "c20", "resolution": [64, 36]}] * n
    times = []
    for i in range(rounds):
        t0 = time.perf_counter()
        ours.send({"op": "batch", "id": i, "size": 1, "images": items, "meta": meta,
                   "device": None})
        ours.recv()
        ours.recv()
        times.append(time.perf_counter() - t0)
    ours.send({"op": "stop"})
    proc.join()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3000)
    parser.add_argument("--batch", type=int, default=10)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    base = statistics.median(bench_pickle(args.rounds, args.batch))
    new = statistics.median(bench_wire(args.rounds, args.batch))
    print(f"round trip of a {args.batch}-image answer, median of {args.rounds} "
          f"(load average {load:.1f} on {os.cpu_count()} cores):")
    print(f"  pickle protocol (baseline): {base * 1e6:8.1f} us")
    print(f"  checked JSON frames       : {new * 1e6:8.1f} us   ratio {new / base:.2f}x")


if __name__ == "__main__":
    main()
