"""Garbage-collector settings for long-running processes (the controller).

A full collection stops every thread while it scans every object the collector tracks.
Measured with 1,000 agents heartbeating (docs/benchmarks.md, testbed section (a)):

* most of a controller's objects are made at start-up and live as long as it does
  (imported modules' functions, types and tables; the model check imports torch and its
  shape machinery, about 450,000 of them). Frozen once started, they are out of the scans:
  a full collection took 230-320 ms with them and 50-80 ms without;
* a busy slot boundary replaces every job's status, plans and reports, which promotes
  enough objects to the oldest generation that CPython's default (a full collection once
  10 collections of the middle one have run) made one at nearly every 5-s slot. One in 100
  middle collections makes it about one a minute there; cyclic garbage waits that much
  longer to be freed, and acyclic garbage is freed at once as always.
"""

from __future__ import annotations

import gc

__all__ = ["SERVING_FULL_EVERY", "tune_for_serving"]

#: Collections of the middle generation between full collections (CPython's default: 10).
SERVING_FULL_EVERY = 100


def tune_for_serving() -> int:
    """Collect once, freeze every object that survives (out of all later scans) and make
    full collections rarer; returns how many objects were frozen. Call it once a
    long-running process has imported and built what it keeps for good."""
    gc.collect()
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, SERVING_FULL_EVERY)
    return gc.get_freeze_count()
