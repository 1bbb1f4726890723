"""Wall-clock seconds of a call, timed as `timeit` times: with the garbage collector off while it runs.

A collection's pause grows with every object the process holds (a fit or a benchmark holds every method's index),
not with the call timed, and falls on whichever call happens to be running."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable


def seconds(call: Callable[[], object]) -> float:
    """Seconds `call()` takes, the collector run first and off while it runs."""
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        call()
        return time.perf_counter() - start
    finally:
        gc.enable()
