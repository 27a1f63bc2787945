"""The task filler's bulk reservation against one job at a time: the same sums, exactly."""

from __future__ import annotations

import numpy as np
import pytest

from mlsched.core import Arch, Cluster, JobSpec, Placement, ResourceVector, Server
from mlsched.scheduler.baselines.taskfill import TaskFiller, to_placement
from mlsched.scheduler.baselines.taskgrow import JobTasks


def _cluster() -> Cluster:
    return Cluster(
        tuple(
            Server(f"s{i}", ResourceVector({"gpu": 8, "cpu": 64, "mem_gb": 256}), rack=f"r{i % 3}")
            for i in range(12)
        )
    )


@pytest.mark.parametrize("seed", range(8))
def test_reserve_all_is_reserve_one_job_at_a_time(seed: int) -> None:
    rng = np.random.default_rng(seed)
    cluster = _cluster()
    one, bulk = TaskFiller(cluster), TaskFiller(cluster)
    tasks = []
    for i in range(30):
        arch = Arch.PS if i % 2 else Arch.ALLREDUCE
        job = JobSpec(
            f"j{i}",
            arch=arch,
            chunks=8,
            worker=ResourceVector({"gpu": float(rng.choice([0.5, 1, 2])), "cpu": 3.3}),
            ps=ResourceVector({"cpu": 1.7, "mem_gb": 4}),
        )
        servers = rng.choice(12, size=3, replace=False)
        workers = tuple((int(s), int(rng.integers(1, 4))) for s in servers)
        ps = ((int(servers[0]), 2),) if arch is Arch.PS else ()
        dem = one.demand(job, i)
        tasks.append(JobTasks(dem, Placement(workers, ps)))
    tasks.append(JobTasks(one.demand(JobSpec("new", worker=ResourceVector({"gpu": 1})), 99), None))
    for t in tasks:  # one at a time, as the filler's own reserve() does it
        for s, c in t.sticky_w.items():
            one.reserve(s, t.dem.worker, c)
        for s, c in t.sticky_p.items():
            one.reserve(s, t.dem.ps, c)
    JobTasks.reserve_all(bulk, tasks)
    np.testing.assert_array_equal(bulk.reserved, one.reserved)  # bit for bit
    assert bulk.has_reserved and one.has_reserved
    empty = TaskFiller(cluster)
    JobTasks.reserve_all(empty, [tasks[-1]])  # nothing sticky: nothing reserved
    assert not empty.has_reserved and not empty.reserved.any()


def test_an_unchanged_placement_comes_back_as_the_same_object() -> None:
    prev = Placement(((1, 2), (4, 1)), ((1, 1),))
    assert to_placement({1: 2, 4: 1}, {1: 1}, prev) is prev
    changed = to_placement({1: 2, 4: 2}, {1: 1}, prev)
    assert changed is not prev and changed.workers == ((1, 2), (4, 2))
    typed = Placement(((1, 2),), worker_type="big")
    again = to_placement({1: 2}, {}, typed)
    assert again is not typed and again.worker_type is None  # the filler places defaults
