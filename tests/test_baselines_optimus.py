"""The Optimus-style greedy through the real engine, simulator and runtime estimator.

Speeds come from the engine's runtime model: an all-reduce job with a negligible gradient
speeds up linearly with workers; one with a huge gradient is fastest on one worker (the
ring's communication outweighs the extra compute). Expected counts are worked out by hand
from the greedy rule (gain per unit of normalised resource).
"""

from __future__ import annotations

import pytest
from engine_helpers import make_engine
from strategies import RecordingExecutor

from mlsched.core import (
    Arch,
    Cluster,
    JobSpec,
    JobState,
    Placement,
    Pool,
    RejectKind,
    ResourceVector,
    Server,
    SyncMode,
)
from mlsched.engine.engine import RunResult
from mlsched.engine.simulator import SimulatedExecutor, TruthConfig
from mlsched.scheduler import create
from mlsched.scheduler.policy import Policy

SLOT_S = 10.0


def gpu_cluster(gpus: int = 8, n_servers: int = 1) -> Cluster:
    return Cluster(
        tuple(
            Server(f"s{i}", ResourceVector({"gpu": gpus, "cpu": 64}), rack=f"r{i % 2}")
            for i in range(n_servers)
        )
    )


def ring_job(
    job_id: str,
    *,
    workers: int = 8,
    gpu: int = 1,
    work: int = 100_000,
    gradient_mb: float = 0.001,
    compute_s: float = 1.0,
    arrival: int = 0,
    min_workers: int = 1,
) -> JobSpec:
    return JobSpec(
        job_id,
        arrival_slot=arrival,
        arch=Arch.ALLREDUCE,
        chunks=workers,
        batches_per_chunk=max(1, work // workers),
        min_workers=min_workers,
        worker=ResourceVector({"gpu": gpu, "cpu": 1}),
        compute_s=compute_s,
        gradient_mb=gradient_mb,
    )


def run(
    cluster: Cluster,
    jobs: list[JobSpec],
    *,
    until: int = 400,
    policy: Policy | None = None,
    truth: TruthConfig | None = None,
) -> tuple[RunResult, dict[int, dict[str, Placement]]]:
    executor = RecordingExecutor(SimulatedExecutor(cluster, SLOT_S, truth=truth))
    engine = make_engine(
        cluster, policy or create("optimus"), jobs, slot_seconds=SLOT_S, executor=executor
    )
    return engine.run(until=until), executor.allocations


def workers(alloc: dict[int, dict[str, Placement]], slot: int) -> dict[str, int]:
    return {j: p.n_workers for j, p in alloc[slot].items()}


def test_workers_go_to_the_job_whose_remaining_time_falls_faster() -> None:
    jobs = [ring_job("scales"), ring_job("chatty", gradient_mb=500.0, compute_s=0.01)]
    _, alloc = run(gpu_cluster(6), jobs, until=2)
    assert workers(alloc, 0) == {"scales": 5, "chatty": 1}


def test_a_job_stops_growing_where_one_more_worker_would_slow_it() -> None:
    _, alloc = run(gpu_cluster(6), [ring_job("chatty", gradient_mb=500.0, compute_s=0.01)], until=2)
    assert workers(alloc, 0) == {"chatty": 1}


def test_gain_is_per_unit_of_resource() -> None:
    # Same speed-up, but b's workers cost 2 GPUs: by gain / cost the 8 GPUs split a=4, b=2
    # (a 1->2, b 1->2, a 2->3, then b's next worker no longer fits and a takes the last GPU).
    _, alloc = run(gpu_cluster(8), [ring_job("a", gpu=1), ring_job("b", gpu=2)], until=2)
    assert workers(alloc, 0) == {"a": 4, "b": 2}


def test_first_steps_go_to_the_smallest_total_work_first() -> None:
    jobs = [
        ring_job("big", workers=4, min_workers=4, work=4_000),
        ring_job("small", workers=4, min_workers=4, work=400),
    ]
    result, alloc = run(gpu_cluster(4), jobs)
    assert workers(alloc, 0) == {"small": 4}
    small_done = result.records["small"].completion_slot
    assert small_done is not None
    assert workers(alloc, small_done + 1) == {"big": 4}
    assert result.records["big"].state is JobState.DONE


def test_a_ps_goes_only_where_it_speeds_the_job_up() -> None:
    # One server with room for everything. A synchronous PS job's push/pull is split over
    # its PSs, so a second PS helps; an asynchronous one is not PS-bound, so it keeps one.
    cluster = Cluster((Server("s0", ResourceVector({"gpu": 8, "cpu": 64})),))

    def ps_job(job_id: str, sync: SyncMode) -> JobSpec:
        return JobSpec(
            job_id,
            arch=Arch.PS,
            sync=sync,
            chunks=2,
            batches_per_chunk=50_000,
            worker=ResourceVector({"gpu": 1, "cpu": 1}),
            ps=ResourceVector({"cpu": 1}),
            compute_s=0.1,
            gradient_mb=100.0,
        )

    _, alloc = run(
        cluster, [ps_job("sync", SyncMode.SYNC), ps_job("async", SyncMode.ASYNC)], until=2
    )
    counts = {j: (p.n_workers, p.n_ps) for j, p in alloc[0].items()}
    assert counts == {"sync": (2, 2), "async": (2, 1)}


def test_allocation_is_left_alone_between_events() -> None:
    jobs = [ring_job("a"), ring_job("b", arrival=5)]
    _, alloc = run(gpu_cluster(8), jobs, until=10)
    assert all(alloc[t]["a"] is alloc[0]["a"] for t in range(1, 5))
    assert alloc[5]["a"].n_workers < alloc[0]["a"].n_workers  # b's arrival re-plans


def test_unchanged_counts_keep_their_placement_across_an_event() -> None:
    # a and b are capped at 2 workers; c's arrival changes neither count nor placement,
    # although c is smaller and is placed before them.
    jobs = [
        ring_job("a", workers=2),
        ring_job("b", workers=2),
        ring_job("c", workers=2, work=50_000, arrival=4),
    ]
    result, alloc = run(gpu_cluster(4, 2), jobs, until=8, truth=TruthConfig(restart_s=1.0))
    assert alloc[5]["a"] == alloc[3]["a"] and alloc[5]["b"] == alloc[3]["b"]
    assert result.records["a"].restarts == result.records["b"].restarts == 0


def test_max_increments_zero_leaves_every_job_at_its_first_step() -> None:
    jobs = [ring_job("a", min_workers=2), ring_job("b", min_workers=3)]
    _, alloc = run(gpu_cluster(8), jobs, until=2, policy=create("optimus", max_increments=0))
    assert workers(alloc, 0) == {"a": 2, "b": 3}


def test_bad_max_increments_is_refused() -> None:
    with pytest.raises(ValueError, match="max_increments"):
        create("optimus", max_increments=-1)


def test_a_job_that_never_fits_is_rejected_and_the_rest_complete() -> None:
    cluster = Cluster(
        (
            Server("w0", ResourceVector({"gpu": 4, "cpu": 16}), pool=Pool.WORKER),
            Server("w1", ResourceVector({"gpu": 4, "cpu": 16}), pool=Pool.WORKER),
            Server("p0", ResourceVector({"cpu": 8}), pool=Pool.PS),
        )
    )
    jobs = (
        [ring_job("huge", gpu=5, work=100)]
        + [
            JobSpec(
                f"ps{i}",
                arrival_slot=i,
                sync=SyncMode.SYNC if i % 2 else SyncMode.ASYNC,
                chunks=4,
                batches_per_chunk=200 + 50 * i,
                worker=ResourceVector({"gpu": 1, "cpu": 2}),
                ps=ResourceVector({"cpu": 1}),
                compute_s=0.5,
                gradient_mb=5.0,
            )
            for i in range(5)
        ]
        + [ring_job(f"r{i}", workers=3, gpu=2, work=900, arrival=2 * i) for i in range(4)]
    )
    result, _ = run(cluster, jobs, truth=TruthConfig(restart_s=1.0))
    assert result.records["huge"].reject_kind is RejectKind.INFEASIBLE
    states = {j: r.state for j, r in result.records.items() if j != "huge"}
    assert set(states.values()) == {JobState.DONE}


def test_a_smaller_newcomer_placed_first_does_not_displace_running_jobs() -> None:
    # a and b run 3 workers each, one per 4-GPU server. c (2 workers, less work) is placed
    # before them at its arrival; it goes to the unreserved GPU of each server instead of
    # packing onto one and pushing a off it.
    jobs = [
        ring_job("a", workers=3),
        ring_job("b", workers=3),
        ring_job("c", workers=2, min_workers=2, work=10_000, arrival=3),
    ]
    result, alloc = run(gpu_cluster(4, 2), jobs, until=5, truth=TruthConfig(restart_s=1.0))
    assert alloc[3]["a"] == alloc[2]["a"] and alloc[3]["b"] == alloc[2]["b"]
    assert alloc[3]["c"].n_workers == 2 and len(alloc[3]["c"].workers) == 2
    assert result.records["a"].restarts == result.records["b"].restarts == 0
