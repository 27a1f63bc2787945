"""Spec 001's baselines RRH and Dorm through the real engine, simulator and runtime model.

The scenarios are small enough to work out the expected decision by hand: every job has
no communication (``gradient_mb=0``) and ``compute_s=1`` with 10-second slots, so one
worker does 10 work units per slot.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from engine_helpers import FREE_RESTARTS, make_engine
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
    Utility,
    UtilityKind,
)
from mlsched.engine.builder import SimulationConfig, simulate
from mlsched.engine.engine import RunResult
from mlsched.engine.simulator import SimulatedExecutor
from mlsched.engine.summary import summarize
from mlsched.perfmodel.estimator import RuntimeEstimator
from mlsched.scheduler import RunContext, create
from mlsched.scheduler.baselines import dorm as dorm_module
from mlsched.scheduler.baselines.dorm import DormPolicy
from mlsched.scheduler.baselines.drf import DrfPolicy
from mlsched.scheduler.baselines.rrh import RrhPolicy, list_schedule
from mlsched.scheduler.policy import Policy
from mlsched.scheduler.solvers.highs import SolveStatus, solve_milp
from mlsched.workloads.loading import load_workload

SLOT_S = 10.0


def step(value: float, deadline: float) -> Utility:
    return Utility(UtilityKind.STEP, {"value": value, "deadline": deadline})


def one_at_a_time() -> Cluster:
    """Room for one worker and one PS at a time."""
    return Cluster(
        (
            Server("w", ResourceVector({"cpu": 1}), pool=Pool.WORKER),
            Server("p", ResourceVector({"cpu": 1}), pool=Pool.PS),
        )
    )


def ps_job(job_id: str, slots: int, utility: Utility, *, arrival: int = 0) -> JobSpec:
    """One worker and one PS; ``slots`` slots of work."""
    return JobSpec(
        job_id,
        arrival_slot=arrival,
        chunks=1,
        batches_per_chunk=10 * slots,
        worker=ResourceVector({"cpu": 1}),
        ps=ResourceVector({"cpu": 1}),
        compute_s=1.0,
        gradient_mb=0.0,
        utility=utility,
    )


def ring_job(job_id: str, *, gpu: int, cap: int, slots: int = 50, arrival: int = 0) -> JobSpec:
    return JobSpec(
        job_id,
        arrival_slot=arrival,
        arch=Arch.ALLREDUCE,
        chunks=cap,
        batches_per_chunk=10 * slots,
        worker=ResourceVector({"gpu": gpu, "cpu": 1}),
        compute_s=1.0,
        gradient_mb=0.0,
    )


def gpu_server(gpus: int = 8) -> Cluster:
    return Cluster((Server("s0", ResourceVector({"gpu": gpus, "cpu": 64})),))


def run(
    cluster: Cluster,
    jobs: list[JobSpec],
    policy: Policy,
    *,
    until: int = 50,
    horizon: int | None = None,
) -> tuple[RunResult, dict[int, dict[str, Placement]]]:
    executor = RecordingExecutor(SimulatedExecutor(cluster, SLOT_S, truth=FREE_RESTARTS))
    engine = make_engine(
        cluster, policy, jobs, slot_seconds=SLOT_S, horizon=horizon, executor=executor
    )
    return engine.run(until=until), executor.allocations


def workers(alloc: dict[int, dict[str, Placement]], slot: int) -> dict[str, int]:
    return {j: p.n_workers for j, p in alloc.get(slot, {}).items()}


# RRH ----------------------------------------------------------------------------------
def test_list_schedule_starts_what_fits_in_priority_order() -> None:
    # Capacity 2: a (2 slots, 1 unit) and c (1 slot, 1 unit) start at 0; b needs 2 units and
    # starts when a frees its unit at slot 2.
    done = list_schedule(
        0, [(2, np.array([1.0])), (1, np.array([2.0])), (1, np.array([1.0]))], np.array([2.0])
    )
    assert done == [1, 2, 0]
    assert list_schedule(5, [(1, np.array([3.0]))], np.array([2.0])) == [math.inf]


def test_rrh_rejects_a_job_whose_delay_cost_exceeds_its_utility() -> None:
    # a runs slots 0-2 and must finish by slot 2 (value 10). b (1 slot, value 6, due in its
    # arrival slot) has the higher reward density (6/1 > 10/2), so the list schedule runs it
    # first and a slips to slot 3: delay cost 10 > 6, rejected.
    jobs = [ps_job("a", 3, step(10, 2)), ps_job("b", 1, step(6, 0.5), arrival=1)]
    result, alloc = run(one_at_a_time(), jobs, create("rrh"))
    b = result.records["b"]
    assert b.state is JobState.REJECTED and b.reject_kind is RejectKind.UNPROFITABLE
    assert "delay cost 10" in b.reason
    assert result.records["a"].completion_slot == 2
    assert [workers(alloc, t) for t in range(3)] == [{"a": 1}] * 3


def test_rrh_admits_when_nobody_loses_and_pauses_the_lower_density_job() -> None:
    # With a due by slot 3, b costs nothing: admitted, and the pause rule runs b (higher
    # density) in slot 1 while a pauses; a resumes on its old servers and still makes it.
    jobs = [ps_job("a", 3, step(10, 3)), ps_job("b", 1, step(6, 0.5), arrival=1)]
    result, alloc = run(one_at_a_time(), jobs, create("rrh"))
    assert result.records["b"].state is JobState.DONE
    assert result.records["b"].completion_slot == 1
    assert result.records["a"].completion_slot == 3
    assert [set(alloc[t]) for t in range(4)] == [{"a"}, {"b"}, {"a"}, {"a"}]
    assert alloc[2]["a"] == alloc[0]["a"]
    assert sum(r.utility() for r in result.records.values()) == pytest.approx(16.0)


def test_rrh_rejects_a_job_that_cannot_finish_by_the_horizon() -> None:
    result, _ = run(one_at_a_time(), [ps_job("a", 3, step(10, 10))], create("rrh"), horizon=2)
    assert result.records["a"].state is JobState.REJECTED
    assert result.records["a"].reject_kind is RejectKind.UNPROFITABLE


def test_rrh_threshold_and_fixed_counts() -> None:
    jobs = [ps_job("a", 1, Utility.constant(5.0))]
    result, _ = run(one_at_a_time(), jobs, create("rrh", threshold=5.0))
    assert result.records["a"].state is JobState.REJECTED
    result, _ = run(one_at_a_time(), jobs, create("rrh", threshold=4.9))
    assert result.records["a"].state is JobState.DONE
    with pytest.raises(ValueError):
        create("rrh", max_workers=0)
    # Fixed counts: the user's request wins (FIFO's rule).
    job = JobSpec("r", chunks=8, requested_workers=3, requested_ps=2)
    assert RrhPolicy().counts(job) == (3, 2)


# Dorm ---------------------------------------------------------------------------------
def test_dorm_fairness_floor_decides_between_packings() -> None:
    # 8 GPUs. a: 3 GPUs per worker, at most 2 workers; b: 2 GPUs, at most 4. DRF gives
    # a=1, b=2 (shares 3/8, 4/8) and leaves a GPU idle. a=2, b=1 fills the server but gives
    # b a share of 2/8 < 0.8 * 4/8, so with the default fairness Dorm keeps DRF's counts;
    # with fairness 0.5 (b needs 2/8) it fills the server.
    jobs = [ring_job("a", gpu=3, cap=2), ring_job("b", gpu=2, cap=4)]
    _, drf = run(gpu_server(), jobs, create("drf"), until=2)
    assert workers(drf, 0) == {"a": 1, "b": 2}
    strict = DormPolicy()
    _, alloc = run(gpu_server(), jobs, strict, until=2)
    assert workers(alloc, 0) == {"a": 1, "b": 2}
    assert strict.solves[0].status is SolveStatus.OPTIMAL and strict.solves[0].fallback is None
    loose = DormPolicy(fairness=0.5)
    _, alloc = run(gpu_server(), jobs, loose, until=2)
    assert workers(alloc, 0) == {"a": 2, "b": 1}


def _shares(cluster: Cluster, jobs: list[JobSpec], alloc: dict[str, Placement]) -> dict:
    drf = DrfPolicy()
    drf.setup(
        RunContext(
            cluster=cluster,
            slot_seconds=SLOT_S,
            horizon=None,
            seed=0,
            runtime=RuntimeEstimator(cluster),
        )
    )
    specs = {j.job_id: j for j in jobs}
    return {j: drf.dominant_share(specs[j], p.n_workers, p.n_ps) for j, p in alloc.items()}


def test_dorm_respects_capacity_and_fairness_with_separate_pools() -> None:
    cluster = Cluster(
        tuple(
            Server(f"w{i}", ResourceVector({"gpu": 4, "cpu": 16, "bw_gbps": 10}), pool=Pool.WORKER)
            for i in range(3)
        )
        + tuple(
            Server(f"p{i}", ResourceVector({"cpu": 8, "bw_gbps": 20}), pool=Pool.PS)
            for i in range(2)
        )
    )
    jobs = [
        JobSpec(
            f"j{i}",
            chunks=6,
            batches_per_chunk=200,
            worker=ResourceVector({"gpu": 1 + i % 2, "cpu": 2 + i, "bw_gbps": 1 + i % 3}),
            ps=ResourceVector({"cpu": 1 + i % 2, "bw_gbps": 5}),
            compute_s=1.0,
            gradient_mb=1.0,
        )
        for i in range(5)
    ]
    policy = DormPolicy()
    _, alloc = run(cluster, jobs, policy, until=2)
    _, fair = run(cluster, jobs, create("drf"), until=2)
    used = np.zeros_like(cluster.capacity)
    specs = {j.job_id: j for j in jobs}
    for job_id, p in alloc[0].items():
        for s, u in p.usage(specs[job_id], cluster).items():
            used[s] += u
        job = specs[job_id]
        assert job.ps_needed(p.n_workers) <= p.n_ps <= p.n_workers <= job.worker_cap
    assert np.all(used <= cluster.capacity + 1e-9)
    dorm_share, drf_share = _shares(cluster, jobs, alloc[0]), _shares(cluster, jobs, fair[0])
    assert set(drf_share) == {j.job_id for j in jobs}
    for job_id, share in drf_share.items():
        assert dorm_share.get(job_id, 0.0) >= 0.8 * share - 1e-9

    # The DRF allocation is feasible for the MILP: Dorm's utilization is at least as high,
    # up to the relative gap.
    def utilization(a: dict[str, Placement]) -> float:
        w_tot = cluster.capacity[:3].sum(axis=0)
        p_tot = cluster.capacity[3:].sum(axis=0)
        total = 0.0
        for job_id, p in a.items():
            job = specs[job_id]
            w = cluster.demand_array(job.worker) * p.n_workers
            z = cluster.demand_array(job.ps) * p.n_ps
            total += float(np.sum(np.divide(w, w_tot, where=w_tot > 0, out=np.zeros_like(w))))
            total += float(np.sum(np.divide(z, p_tot, where=p_tot > 0, out=np.zeros_like(z))))
        return total

    assert utilization(alloc[0]) >= utilization(fair[0]) * (1 - policy.mip_rel_gap) - 1e-9  # type: ignore[operator]


def test_dorm_adjustment_limit_and_drf_fallback() -> None:
    # Four jobs fill 8 GPUs with 2 workers each; a fifth arrives at slot 1 and its fair
    # share (1 GPU) must come from a running job. With no change allowed the program is
    # infeasible and the DRF allocation is used; with half of the jobs allowed to change,
    # at most ceil(0.5 * 5) = 3 running jobs change their counts.
    jobs = [ring_job(f"j{i}", gpu=1, cap=2) for i in range(4)]
    jobs.append(ring_job("new", gpu=1, cap=2, arrival=1))
    frozen = DormPolicy(adjust_fraction=0.0)
    _, alloc = run(gpu_server(), jobs, frozen, until=3)
    assert workers(alloc, 0) == dict.fromkeys(["j0", "j1", "j2", "j3"], 2)
    assert frozen.solves[1].status is SolveStatus.INFEASIBLE
    assert frozen.solves[1].fallback is not None
    _, drf = run(gpu_server(), jobs, create("drf"), until=3)
    assert workers(alloc, 1) == workers(drf, 1)
    half = DormPolicy()
    _, alloc = run(gpu_server(), jobs, half, until=3)
    assert half.solves[1].fallback is None
    changed = [j for j in workers(alloc, 0) if workers(alloc, 1).get(j) != 2]
    assert 1 <= len(changed) <= 3
    assert workers(alloc, 1)["new"] >= 1
    assert sum(workers(alloc, 1).values()) == 8


def test_dorm_time_limit_is_respected(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every MILP Dorm solves gets its time limit (how close HiGHS stops to it is a
    performance figure, not a test's), and a solve stopped without a solution falls back."""
    limits: list[float] = []

    def recording(*args: Any, **kwargs: Any) -> Any:
        limits.append(kwargs["time_limit_s"])
        return solve_milp(*args, **kwargs)

    monkeypatch.setattr(dorm_module, "solve_milp", recording)
    workload = load_workload("oasis-paper", seed=3, jobs=25, horizon=40, options={"servers": 10})
    policy = DormPolicy(time_limit_s=0.05)
    runtime = RuntimeEstimator(workload.cluster, workload.runtime)
    engine = make_engine(
        workload.cluster,
        policy,
        workload.jobs,
        slot_seconds=workload.slot_seconds,
        horizon=workload.horizon_slots,
        families=workload.runtime,
        runtime=runtime,
    )
    engine.run()
    assert policy.solves and len(limits) == len(policy.solves)
    assert set(limits) == {0.05}
    # A solve stopped without a feasible point falls back to DRF; any other is used.
    for s in policy.solves:
        assert (s.fallback is not None) == (not s.status.has_solution)
    with pytest.raises(ValueError):
        create("dorm", time_limit_s=0)


@pytest.mark.parametrize("name", ["rrh", "dorm"])
def test_runs_on_a_small_oasis_paper_workload(name: str) -> None:
    workload = load_workload("oasis-paper", seed=0, jobs=20, horizon=40, options={"servers": 6})
    summary = summarize(simulate(workload, SimulationConfig(name, seed=0)))
    assert summary.completed > 0
    assert summary.total_utility > 0


@pytest.mark.parametrize("seed", range(4))
def test_dorm_starts_from_a_feasible_point_and_loses_nothing(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dorm hands HiGHS a feasible start built from the previous and DRF allocations (a cold
    solve spent seconds finding a first incumbent). A start is only an incumbent: each
    program solved from its start must reach what the same program reaches cold, up to the
    relative gap both stop at. Most re-plans follow one arrival or completion, where the
    previous allocation repaired with a few changes is a point: most solves must start
    (a construction that never finds one passes every other test)."""
    calls: list[tuple[tuple[Any, ...], dict[str, Any], Any]] = []

    def recording(*args: Any, **kwargs: Any) -> Any:
        res = solve_milp(*args, **kwargs)
        calls.append((args, kwargs, res))
        return res

    monkeypatch.setattr(dorm_module, "solve_milp", recording)
    workload = load_workload("oasis-paper", seed=seed, jobs=14, horizon=40, options={"servers": 3})
    policies: list[Any] = []
    simulate(
        workload,
        SimulationConfig("dorm", seed=seed, policy_options={"adjust_fraction": 0.2}),
        on_allocate=lambda p, *_: policies.append(p) if not policies else None,
        cache=False,
    )
    policy = policies[0]
    assert len(calls) == len(policy.solves) >= 8
    started = [(a, k, r) for a, k, r in calls if k.get("start") is not None]
    assert len(started) >= len(calls) / 2, [s.started for s in policy.solves]
    gap = policy.mip_rel_gap or 0.0
    for args, kwargs, res in started:
        cold = solve_milp(*args, **{**kwargs, "start": None})
        assert res.ok, res.message
        if cold.is_optimal:
            assert cold.objective is not None and res.objective is not None
            assert res.objective >= (1 - gap) * cold.objective - 1e-9
