"""DRF (spec 001 §5.2 item 2) through the real engine, simulator and runtime estimator.

Each scenario is small enough to work out the progressive-filling answer by hand; the
expected counts in the assertions come from that hand computation.
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
)
from mlsched.engine.engine import RunResult
from mlsched.engine.simulator import SimulatedExecutor, TruthConfig
from mlsched.perfmodel.estimator import RuntimeEstimator
from mlsched.scheduler import RunContext, create
from mlsched.scheduler.baselines.drf import DrfPolicy

SLOT_S = 10.0


def gpu_cluster(n_servers: int = 1, gpus: int = 8) -> Cluster:
    return Cluster(
        tuple(
            Server(f"s{i}", ResourceVector({"gpu": gpus, "cpu": 64}), rack=f"r{i % 2}")
            for i in range(n_servers)
        )
    )


def ring_job(
    job_id: str,
    *,
    gpu: int = 1,
    workers: int = 8,
    work: int = 10_000,
    arrival: int = 0,
    min_workers: int = 1,
) -> JobSpec:
    """An all-reduce job with negligible communication: one unit per worker per second."""
    return JobSpec(
        job_id,
        arrival_slot=arrival,
        arch=Arch.ALLREDUCE,
        chunks=workers,
        batches_per_chunk=max(1, work // workers),
        min_workers=min_workers,
        worker=ResourceVector({"gpu": gpu, "cpu": 1}),
        compute_s=1.0,
        gradient_mb=0.001,
    )


def run(
    cluster: Cluster, jobs: list[JobSpec], *, until: int = 400, truth: TruthConfig | None = None
) -> tuple[RunResult, dict[int, dict[str, Placement]]]:
    executor = RecordingExecutor(SimulatedExecutor(cluster, SLOT_S, truth=truth))
    engine = make_engine(cluster, create("drf"), jobs, slot_seconds=SLOT_S, executor=executor)
    return engine.run(until=until), executor.allocations


def workers(allocations: dict[int, dict[str, Placement]], slot: int) -> dict[str, int]:
    return {j: p.n_workers for j, p in allocations[slot].items()}


def test_identical_jobs_get_equal_shares() -> None:
    _, alloc = run(gpu_cluster(), [ring_job("a"), ring_job("b")], until=3)
    assert workers(alloc, 0) == {"a": 4, "b": 4}


def test_a_bigger_per_worker_demand_gets_fewer_workers() -> None:
    # 8 GPUs; dominant shares y/8 and 2y/8 are equalised at 4/8: a gets 4, b gets 2.
    _, alloc = run(gpu_cluster(), [ring_job("a", gpu=1), ring_job("b", gpu=2)], until=3)
    assert workers(alloc, 0) == {"a": 4, "b": 2}


def test_dominant_share_is_per_pool_with_separate_pools() -> None:
    split = Cluster(
        (
            Server("w", ResourceVector({"cpu": 8}), pool=Pool.WORKER),
            Server("p", ResourceVector({"cpu": 2}), pool=Pool.PS),
        )
    )
    mixed = Cluster(
        (Server("w", ResourceVector({"cpu": 8})), Server("p", ResourceVector({"cpu": 2})))
    )
    job = JobSpec("j", worker=ResourceVector({"cpu": 2}), ps=ResourceVector({"cpu": 1}))
    shares = []
    for cluster in (split, mixed):
        policy = DrfPolicy()
        policy.setup(
            RunContext(
                cluster=cluster,
                slot_seconds=SLOT_S,
                horizon=None,
                seed=0,
                runtime=RuntimeEstimator(cluster),
            )
        )
        shares.append(policy.dominant_share(job, workers=1, ps=1))
    # Split: max(2/8 of the worker pool, 1/2 of the PS pool); mixed: 3 of 10 CPUs.
    assert shares == [pytest.approx(0.5), pytest.approx(0.3)]


def test_running_job_shrinks_when_another_arrives_and_grows_back_after() -> None:
    jobs = [ring_job("a", work=100_000), ring_job("b", work=400, arrival=3)]
    result, alloc = run(gpu_cluster(), jobs, until=60)
    assert workers(alloc, 2) == {"a": 8}
    assert workers(alloc, 3) == {"a": 4, "b": 4}
    done = result.records["b"].completion_slot
    assert done is not None
    assert workers(alloc, done + 1) == {"a": 8}


def test_allocation_is_left_alone_between_events() -> None:
    jobs = [ring_job("a", work=100_000), ring_job("b", work=100_000, arrival=5)]
    _, alloc = run(gpu_cluster(), jobs, until=10)
    # Same placement objects slot after slot while nothing arrives or completes.
    assert all(alloc[t]["a"] is alloc[0]["a"] for t in range(1, 5))
    assert all(alloc[t]["a"] is alloc[5]["a"] for t in range(6, 10))
    assert alloc[5]["a"] != alloc[0]["a"]


def test_unchanged_counts_keep_their_placement_across_an_event() -> None:
    # Two servers; a and b are capped at 2 workers, so c's arrival changes neither count.
    jobs = [
        ring_job("a", workers=2, work=100_000),
        ring_job("b", workers=2, work=100_000),
        ring_job("c", workers=2, work=100_000, arrival=4),
    ]
    result, alloc = run(gpu_cluster(2, 4), jobs, until=8, truth=TruthConfig(restart_s=1.0))
    assert alloc[5]["a"] == alloc[3]["a"] and alloc[5]["b"] == alloc[3]["b"]
    assert result.records["a"].restarts == result.records["b"].restarts == 0


def test_min_workers_is_a_gang_and_a_job_below_it_gets_nothing() -> None:
    # 8 GPUs: a's first step takes 6 (min_workers); b needs 3 at once and only 2 are left,
    # so b gets none (not 2) and a grows into them.
    jobs = [
        ring_job("a", work=100_000, min_workers=6),
        ring_job("b", work=100_000, min_workers=3),
    ]
    _, alloc = run(gpu_cluster(), jobs, until=3)
    assert workers(alloc, 0) == {"a": 8}


def test_a_job_that_never_fits_is_rejected_as_infeasible() -> None:
    result, _ = run(gpu_cluster(), [ring_job("big", gpu=16), ring_job("ok", work=100)])
    assert result.records["big"].state is JobState.REJECTED
    assert result.records["big"].reject_kind is RejectKind.INFEASIBLE
    assert result.records["ok"].state is JobState.DONE


def test_every_job_of_a_feasible_mixed_workload_completes() -> None:
    cluster = Cluster(
        (
            Server("w0", ResourceVector({"gpu": 4, "cpu": 16, "bw_gbps": 20}), pool=Pool.WORKER),
            Server("w1", ResourceVector({"gpu": 4, "cpu": 16, "bw_gbps": 20}), pool=Pool.WORKER),
            Server("p0", ResourceVector({"cpu": 8, "bw_gbps": 40}), pool=Pool.PS),
        )
    )
    jobs = [
        JobSpec(
            f"ps{i}",
            arrival_slot=i,
            chunks=6,
            batches_per_chunk=40 + 10 * i,
            worker=ResourceVector({"gpu": 1, "cpu": 2, "bw_gbps": 2}),
            ps=ResourceVector({"cpu": 1, "bw_gbps": 5}),
            compute_s=0.5,
            gradient_mb=1.0,
        )
        for i in range(5)
    ] + [ring_job(f"r{i}", gpu=2, workers=3, work=600, arrival=2 * i) for i in range(4)]
    result, alloc = run(cluster, jobs, until=400)
    assert {r.state for r in result.records.values()} == {JobState.DONE}
    for slot_alloc in alloc.values():  # a PS job always runs with enough PSs
        for job_id, p in slot_alloc.items():
            spec = next(j for j in jobs if j.job_id == job_id)
            assert p.n_ps >= spec.ps_needed(p.n_workers)


def test_a_newcomer_does_not_displace_running_jobs_whose_counts_hold() -> None:
    jobs = [
        ring_job("a", workers=3, work=100_000),
        ring_job("b", workers=3, work=100_000),
        ring_job("c", workers=2, min_workers=2, work=100_000, arrival=3),
    ]
    result, alloc = run(gpu_cluster(2, 4), jobs, until=5, truth=TruthConfig(restart_s=1.0))
    assert workers(alloc, 3) == {"a": 3, "b": 3, "c": 2}
    assert alloc[3]["a"] == alloc[2]["a"] and alloc[3]["b"] == alloc[2]["b"]
    assert result.records["a"].restarts == result.records["b"].restarts == 0
