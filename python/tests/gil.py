"""A check that a native call releases the GIL: a Python thread keeps running during it."""

from __future__ import annotations

import sys
import threading
import time


def runs_during(call) -> tuple[int, float]:
    """Calls `call()` while another Python thread records timestamps; returns how many of them
    fall in the middle half of the call, and the call's duration. With the GIL held for the
    whole call that thread cannot run in there at all (it may only at the call's edges, within
    one switch interval); with the GIL released it runs throughout."""
    stamps: list[float] = []
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            stamps.append(time.perf_counter())

    old = sys.getswitchinterval()
    sys.setswitchinterval(0.001)
    t = threading.Thread(target=spin)
    t.start()
    try:
        time.sleep(0.01)
        t0 = time.perf_counter()
        call()
        t1 = time.perf_counter()
    finally:
        stop.set()
        t.join()
        sys.setswitchinterval(old)
    d = t1 - t0
    lo, hi = t0 + d / 4, t1 - d / 4
    return sum(1 for s in stamps if lo < s < hi), d
