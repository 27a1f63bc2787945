"""Tiresias-style LAS (spec 003 §5) through the real engine, simulator and estimator.

Jobs set ``requested_workers`` so their fixed counts are known; the expected slot-by-slot
order follows from attained service in GPU-slots, worked out by hand in each test.
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

SLOT_S = 10.0


def gpu_cluster(n_servers: int = 1, gpus: int = 4) -> Cluster:
    return Cluster(
        tuple(
            Server(f"s{i}", ResourceVector({"gpu": gpus, "cpu": 64}), rack=f"r{i % 2}")
            for i in range(n_servers)
        )
    )


def ring_job(
    job_id: str, *, workers: int, gpu: int = 1, slots: int = 100, arrival: int = 0
) -> JobSpec:
    """All-reduce job with fixed ``workers`` that needs about ``slots`` slots to finish."""
    return JobSpec(
        job_id,
        arrival_slot=arrival,
        arch=Arch.ALLREDUCE,
        chunks=workers,
        batches_per_chunk=int(slots * SLOT_S),
        requested_workers=workers,
        worker=ResourceVector({"gpu": gpu, "cpu": 1}),
        compute_s=1.0,
        gradient_mb=0.001,
    )


def run(
    cluster: Cluster,
    jobs: list[JobSpec],
    *,
    until: int = 400,
    truth: TruthConfig | None = None,
    policy: str = "tiresias",
) -> tuple[RunResult, dict[int, dict[str, Placement]]]:
    """Run ``policy`` (the LAS family shares these helpers); the allocation of each slot."""
    executor = RecordingExecutor(SimulatedExecutor(cluster, SLOT_S, truth=truth))
    engine = make_engine(cluster, create(policy), jobs, slot_seconds=SLOT_S, executor=executor)
    return engine.run(until=until), executor.allocations


def running(alloc: dict[int, dict[str, Placement]], slot: int) -> set[str]:
    return set(alloc.get(slot, {}))


def test_a_newcomer_with_less_service_preempts_and_they_then_alternate() -> None:
    # 4 GPUs, both jobs need all 4. a runs slots 0-2 (12 GPU-slots); b arrives in slot 3
    # with 0 and runs until it has 12 too (slots 3-5); at the tie a (earlier) goes first.
    jobs = [ring_job("a", workers=4), ring_job("b", workers=4, arrival=3)]
    result, alloc = run(gpu_cluster(), jobs, until=8, truth=TruthConfig(restart_s=2.0))
    assert [running(alloc, t) for t in range(8)] == [
        {"a"}, {"a"}, {"a"}, {"b"}, {"b"}, {"b"}, {"a"}, {"b"},
    ]  # fmt: skip
    # Preemption is not free: a's resume in slot 6 was charged the restart time.
    assert result.records["a"].restart_s == 2.0


def test_attained_service_counts_gpus_per_worker() -> None:
    # One 2-GPU server. a: 1 worker x 2 GPUs, b: 2 workers x 1 GPU. Both gain 2 GPU-slots
    # per slot, so they alternate; counted in worker-slots b would gain twice as fast and
    # the order would be a, b, a, a, b, a.
    jobs = [ring_job("a", workers=1, gpu=2), ring_job("b", workers=2, gpu=1)]
    _, alloc = run(gpu_cluster(gpus=2), jobs, until=6)
    assert [running(alloc, t) for t in range(6)] == [{"a"}, {"b"}, {"a"}, {"b"}, {"a"}, {"b"}]


def test_gpu_slots_decide_who_catches_up() -> None:
    # One 2-GPU server; a takes both GPUs with one worker, b one GPU with one worker, plus
    # c (one GPU) so that b alone never fills the server. Slot 0: a (first by arrival),
    # then b and c together (a has 2, they have 0); slot 2: b and c have 1 < 2, again;
    # slot 3: all have 2, a first by arrival.
    jobs = [
        ring_job("a", workers=1, gpu=2),
        ring_job("b", workers=1, gpu=1),
        ring_job("c", workers=1, gpu=1),
    ]
    _, alloc = run(gpu_cluster(gpus=2), jobs, until=4)
    assert [running(alloc, t) for t in range(4)] == [{"a"}, {"b", "c"}, {"b", "c"}, {"a"}]


def test_a_job_that_does_not_fit_is_skipped_and_later_ones_still_run() -> None:
    # 4 GPUs, all arrive together: a (3) fits, b (2) does not, c (1) still does.
    jobs = [
        ring_job("a", workers=3),
        ring_job("b", workers=2),
        ring_job("c", workers=1),
    ]
    _, alloc = run(gpu_cluster(), jobs, until=1)
    assert running(alloc, 0) == {"a", "c"}


def test_a_job_that_keeps_running_keeps_its_placement() -> None:
    # Two 4-GPU servers; a (2 workers) runs throughout while short jobs come and go around
    # it, and is never re-laid-out.
    jobs = [ring_job("a", workers=2, slots=30)] + [
        ring_job(f"s{i}", workers=2, slots=2, arrival=3 * i) for i in range(6)
    ]
    result, alloc = run(gpu_cluster(2, 4), jobs, until=40, truth=TruthConfig(restart_s=1.0))
    slots_a = [t for t in sorted(alloc) if "a" in alloc[t]]
    assert slots_a == list(range(len(slots_a)))  # never preempted: enough room for all
    assert len({alloc[t]["a"] for t in slots_a}) == 1
    assert result.records["a"].restarts == 0 and result.records["a"].restart_s == 0.0


def test_fixed_counts_that_never_fit_are_rejected_as_infeasible() -> None:
    jobs = [ring_job("big", workers=5), ring_job("ok", workers=2, slots=2)]
    result, _ = run(gpu_cluster(), jobs)
    assert result.records["big"].reject_kind is RejectKind.INFEASIBLE
    assert result.records["ok"].state is JobState.DONE


def test_every_job_of_a_feasible_mixed_workload_completes() -> None:
    cluster = Cluster(
        (
            Server("w0", ResourceVector({"gpu": 4, "cpu": 16}), pool=Pool.WORKER, rack="r0"),
            Server("w1", ResourceVector({"gpu": 4, "cpu": 16}), pool=Pool.WORKER, rack="r1"),
            Server("p0", ResourceVector({"cpu": 8}), pool=Pool.PS),
        )
    )
    jobs = [
        JobSpec(
            f"ps{i}",
            arrival_slot=i,
            chunks=4,
            batches_per_chunk=100 + 20 * i,
            requested_workers=1 + i % 4,
            requested_ps=1,
            worker=ResourceVector({"gpu": 1, "cpu": 2}),
            ps=ResourceVector({"cpu": 1}),
            compute_s=0.5,
            gradient_mb=1.0,
        )
        for i in range(6)
    ] + [ring_job(f"r{i}", workers=1 + i % 3, gpu=2, slots=3, arrival=2 * i) for i in range(4)]
    result, _ = run(cluster, jobs, truth=TruthConfig(restart_s=1.0))
    assert {r.state for r in result.records.values()} == {JobState.DONE}


def test_a_newcomer_placed_first_does_not_displace_running_jobs() -> None:
    # a and b run 3 workers each, one per 4-GPU server. c (2 workers, no service yet) is
    # placed first at its arrival; it takes the unreserved GPU of each server rather than
    # the best-fit server, so a and b keep running where they are.
    jobs = [
        ring_job("a", workers=3),
        ring_job("b", workers=3),
        ring_job("c", workers=2, slots=50, arrival=3),
    ]
    result, alloc = run(gpu_cluster(2, 4), jobs, until=5, truth=TruthConfig(restart_s=1.0))
    assert running(alloc, 3) == {"a", "b", "c"}
    assert alloc[3]["a"] == alloc[2]["a"] and alloc[3]["b"] == alloc[2]["b"]
    assert result.records["a"].restarts == result.records["b"].restarts == 0


def test_ps_rule_needed_gives_the_fewest_pss_and_a_bad_rule_is_refused() -> None:
    """``ps_rule`` as FIFO's: ``needed`` runs a PS job with ``ps_needed(W)`` PSs (the drawn
    count is at least that, and above it for some jobs); an unknown rule names the option."""
    jobs = [
        JobSpec(
            f"p{i}",
            arch=Arch.PS,
            sync=SyncMode.SYNC,
            chunks=8,
            worker=ResourceVector({"gpu": 1, "cpu": 1}),
            ps=ResourceVector({"cpu": 1}),
        )
        for i in range(20)
    ]
    needed, drawn = create("tiresias", ps_rule="needed"), create("tiresias")
    for job in jobs:
        w, p = needed.counts(job)  # type: ignore[attr-defined]
        assert p == job.ps_needed(w)
    assert any(
        drawn.counts(j)[1] > needed.counts(j)[1]  # type: ignore[attr-defined]
        for j in jobs
    )
    with pytest.raises(ValueError, match="ps_rule"):
        create("tiresias", ps_rule="most")
