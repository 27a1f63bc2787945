"""Garbage-collector settings for batch work (simulation, trace import).

A simulation allocates a few short-lived tuples per running job and slot (a measurement,
a progress record) and keeps a long-lived record per measurement (the model error): with
CPython's default thresholds the young generations are collected every 700 allocations and
re-scan the survivors, about a seventh of a closed-loop trace simulation's time. Batch work
makes few reference cycles, so it collects rarely instead, and freezes what existed before
(the workload, imported modules) out of the collector's scans. A long-running controller
keeps the defaults.
"""

from __future__ import annotations

import atexit
import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["BATCH_THRESHOLD", "batch_gc", "no_exit_collection"]

#: Allocations between young-generation collections during batch work (default 700).
BATCH_THRESHOLD = 100_000


@contextmanager
def batch_gc() -> Iterator[None]:
    """Collect rarely inside the block; the previous settings come back after it. Nested
    blocks keep the outer block's settings."""
    old = gc.get_threshold()
    if old[0] >= BATCH_THRESHOLD or not gc.isenabled():
        yield
        return
    gc.freeze()
    gc.set_threshold(BATCH_THRESHOLD, old[1], old[2])
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()


_exit_registered = False


def no_exit_collection() -> None:
    """Skip the interpreter's last full collection, over everything a batch command made
    (about 20 ms after a 5,000-job trace run): an exit handler freezes what exists out of
    it. Its cycles hold no resources (files are closed by ``with`` blocks, processes
    joined) and the operating system reclaims the memory; other exit handlers still run."""
    global _exit_registered
    if not _exit_registered:
        atexit.register(gc.freeze)
        _exit_registered = True
