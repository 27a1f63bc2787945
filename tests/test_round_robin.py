"""Round-robin spreading (mlsched.scheduler.placement) against the rule it implements.

The rule (spec 001 §5.2): tasks go one at a time to successive servers that have room,
starting after the last server used, cycling until the job is placed; a job that does
not fit takes nothing. The reference below applies it literally, one server check at a
time, and moves its pointer as the code does: past the highest-numbered server the last
placement used (past the last one visited, but for a placement that wraps around). The cases are random ledgers from nearly empty to nearly full, so that a fill's
first pass finds room at once, after a few servers, or after many (where the placement
code switches from looking at servers one by one to one look at every server); one task
in eight is a job of one worker (placed by its own shorter path). Which bug fails it: a
server skipped or visited twice in a pass, room read after tasks went to it, a failed fill
that keeps what it took, or a pointer left on the last server used.
"""

from __future__ import annotations

import numpy as np
import pytest

from mlsched.core.cluster import Cluster
from mlsched.core.job import JobSpec
from mlsched.scheduler.placement import RoundRobin
from mlsched.scheduler.view import CapacityLedger


def _cluster(n: int) -> Cluster:
    return Cluster.from_dict(
        {"servers": [{"name": "s", "count": n, "capacity": {"gpu": 4, "cpu": 16}}]}
    )


def _reference(
    free: np.ndarray, demand: np.ndarray, count: int, order: list[int]
) -> dict[int, int] | None:
    """Tasks over ``order``, one per visit to a server with room, pass after pass."""
    free = free.copy()
    taken: dict[int, int] = {}
    left, live = count, list(order)
    while left and live:
        kept = []
        for s in live:
            if not left:
                break
            if (demand <= free[s] + 1e-9).all():
                free[s] -= demand
                taken[s] = taken.get(s, 0) + 1
                left -= 1
                kept.append(s)
        live = kept
    return None if left else taken


@pytest.mark.parametrize("seed", range(8))
def test_round_robin_places_as_the_rule_says(seed: int) -> None:
    rng = np.random.default_rng(seed)
    cluster = _cluster(24)
    rr = RoundRobin(cluster)
    ledger = CapacityLedger(cluster)
    # Some servers nearly full, some empty, in runs, so that first passes miss 0 to 20.
    for s in range(24):
        ledger.free[s] = rng.choice([0.0, 1.0, 4.0]) * np.array([1.0, 4.0])
    placed = failed = 0
    start = 0  # where the rule says the next placement starts: after the last server used
    for i in range(200):
        gpus = int(rng.integers(1, 3))
        workers = int(rng.integers(1, 9))
        job = JobSpec(
            job_id=f"j{i}",
            chunks=workers,
            min_workers=workers,
            worker={"gpu": gpus, "cpu": 4 * gpus},
        )
        demand = cluster.demand_array(job.worker)
        servers = list(range(24))
        order = servers[start:] + servers[:start]
        before = ledger.free.copy()
        expected = _reference(before, demand, workers, order)
        got = rr.place(job, workers, 0, ledger)
        if expected is None:
            assert got is None
            assert np.array_equal(ledger.free, before)  # a failed fill takes nothing
            failed += 1
        else:
            assert got is not None
            assert dict(got.workers) == expected
            start = max(expected) + 1
            placed += 1
        if rng.random() < 0.3:  # capacity comes back now and then, as jobs end
            s = int(rng.integers(0, 24))
            ledger.free[s] = cluster.capacity[s].copy()
    assert placed > 20 and failed > 5
