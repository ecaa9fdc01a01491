"""The clock the scored times are read from, and whether the machine's clock was adjusted.

``CLOCK_MONOTONIC`` (``time.monotonic``, ``perf_counter``) is slewed by NTP and by
``adjtimex``: a tick set 10 % short makes it run 10 % slow, for every run on the machine
until someone sets it back. ``CLOCK_MONOTONIC_RAW`` counts the hardware clocksource's own
rate and no adjustment changes it: :func:`now` reads it, and Child.handover times every
hand-over with it (the scored per-image times and the hand-over overhead).

Whether the clock was adjusted during a run is worth saying anyway (the organiser's other
tools use the adjusted clock): :func:`read` takes both clocks and the kernel's tick and
frequency (``adjtimex`` with ``modes = 0``, a read that needs no privilege and changes
nothing); :func:`verdict` compares the run's start and end.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
from dataclasses import dataclass

RAW = getattr(time, "CLOCK_MONOTONIC_RAW", time.CLOCK_MONOTONIC)
RAW_NAME = "CLOCK_MONOTONIC_RAW" if hasattr(time, "CLOCK_MONOTONIC_RAW") else "CLOCK_MONOTONIC"
# NTP slews the monotonic clock by at most 500 ppm (frequency) + 500 ppm (offset): a larger
# gap between the two clocks over a run is someone else's adjustment
MAX_NTP_PPM = 1000.0


def now() -> float:
    """Seconds on the raw monotonic clock."""
    return time.clock_gettime(RAW)


class _Timex(ctypes.Structure):  # struct timex (linux/timex.h), up to tick; padding after
    _fields_ = [("modes", ctypes.c_uint), ("offset", ctypes.c_long), ("freq", ctypes.c_long),
                ("maxerror", ctypes.c_long), ("esterror", ctypes.c_long),
                ("status", ctypes.c_int), ("constant", ctypes.c_long),
                ("precision", ctypes.c_long), ("tolerance", ctypes.c_long),
                ("time_sec", ctypes.c_long), ("time_usec", ctypes.c_long),
                ("tick", ctypes.c_long), ("_rest", ctypes.c_byte * 128)]


def _adjtimex() -> tuple[int, float] | None:
    """(tick in µs, frequency offset in ppm) from a read-only adjtimex; None off Linux."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        tx = _Timex()  # modes = 0: read only
        if ctypes.CDLL(None, use_errno=True).adjtimex(ctypes.byref(tx)) < 0:
            return None
    except (OSError, AttributeError):
        return None
    return int(tx.tick), tx.freq / 65536.0  # freq is ppm in 16.16 fixed point


@dataclass
class Reading:
    raw: float              # CLOCK_MONOTONIC_RAW, s
    mono: float             # CLOCK_MONOTONIC, s
    tick: int | None        # µs per kernel tick (adjtimex); None where unknown
    freq_ppm: float | None  # the kernel's frequency correction


def read() -> Reading:
    kx = _adjtimex()
    mono, raw = time.clock_gettime(time.CLOCK_MONOTONIC), now()
    return Reading(raw, mono, kx and kx[0], kx and kx[1])


def nominal_tick() -> int:
    """The unadjusted tick: 1e6 / USER_HZ µs (10,000 at 100 Hz)."""
    return 1_000_000 // os.sysconf("SC_CLK_TCK")


def verdict(start: Reading, end: Reading) -> dict:
    """For ingestion.json. ``monotonic_vs_raw_ppm`` = (Δmono − Δraw) / Δraw × 1e6 (0 for a
    run shorter than 1 ms: not measurable); ``adjusted`` when the tick changed or is not
    nominal, or the two clocks drifted apart by more than NTP's slew (1,000 ppm)."""
    d_raw = end.raw - start.raw
    ppm = (end.mono - start.mono - d_raw) / d_raw * 1e6 if d_raw > 1e-3 else 0.0
    ticks = [start.tick, end.tick]
    adjusted = (abs(ppm) > MAX_NTP_PPM
                or (None not in ticks and (ticks[0] != ticks[1] or ticks[0] != nominal_tick())))
    return {"timer": RAW_NAME, "monotonic_vs_raw_ppm": round(ppm, 3), "tick_us": ticks,
            "freq_ppm": [start.freq_ppm, end.freq_ppm], "adjusted": adjusted}


def warning(v: dict) -> str | None:
    """One line when :func:`verdict` found the clock adjusted."""
    if not v["adjusted"]:
        return None
    return (f"the machine's clock was adjusted during the run (tick {v['tick_us'][0]} -> "
            f"{v['tick_us'][1]} µs, nominal {nominal_tick()}; monotonic vs raw "
            f"{v['monotonic_vs_raw_ppm']:+.0f} ppm): the scored times were read from "
            f"{v['timer']}, which no adjustment changes")
