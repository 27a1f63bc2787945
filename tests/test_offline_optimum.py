"""The offline optimum of spec 001 (§3.8) against brute force and against online policies.

Jobs have no communication (``gradient_mb=0``) and ``compute_s=1`` with 10-second slots, so
one worker does exactly 10 work units per slot and the offline model is exact.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from functools import cache

import numpy as np
import pytest
from engine_helpers import make_engine

from mlsched.core import (
    Arch,
    Cluster,
    JobSpec,
    Pool,
    ResourceVector,
    Server,
    Utility,
    UtilityKind,
)
from mlsched.engine.builder import baseline_policies
from mlsched.perfmodel.estimator import RuntimeEstimator
from mlsched.scheduler import create
from mlsched.scheduler.offline import offline_optimum, performance_ratio, worker_rate
from mlsched.scheduler.solvers.highs import SolveStatus

SLOT_S = 10.0
RATE = 10.0  # work units per worker per slot


def job(
    job_id: str,
    worker_slots: int,
    utility: Utility,
    *,
    arrival: int = 0,
    cap: int = 2,
    bw: tuple[float, float] | None = None,
) -> JobSpec:
    worker: dict[str, float] = {"cpu": 1}
    ps: dict[str, float] = {"cpu": 1}
    if bw is not None:
        worker["bw_gbps"], ps["bw_gbps"] = bw
    return JobSpec(
        job_id,
        arrival_slot=arrival,
        chunks=1,
        max_workers=cap,
        batches_per_chunk=int(RATE) * worker_slots,
        worker=ResourceVector(worker),
        ps=ResourceVector(ps),
        compute_s=1.0,
        gradient_mb=0.0,
        utility=utility,
    )


def batches(j: JobSpec) -> float:
    """Worker-slots of work."""
    return j.total_work / RATE


def cluster(worker_cpus: tuple[int, ...], ps_cpus: tuple[int, ...], bw: bool = False) -> Cluster:
    def cap(cpu: int) -> ResourceVector:
        return ResourceVector({"cpu": cpu, **({"bw_gbps": 10} if bw else {})})

    return Cluster(
        tuple(Server(f"w{i}", cap(c), pool=Pool.WORKER) for i, c in enumerate(worker_cpus))
        + tuple(Server(f"p{i}", cap(c), pool=Pool.PS) for i, c in enumerate(ps_cpus))
    )


def step(value: float, deadline: float) -> Utility:
    return Utility(UtilityKind.STEP, {"value": value, "deadline": deadline})


def linear(value: float, deadline: float) -> Utility:
    return Utility(UtilityKind.LINEAR, {"value": value, "deadline": deadline})


# Instances: (cluster, jobs, horizon).
INSTANCES = {
    "three-jobs": (
        cluster((2, 1), (2,)),
        [
            job("a", 4, step(10, 1)),
            job("b", 3, linear(8, 4), cap=3),
            job("c", 2, Utility.constant(3), arrival=1, cap=1),
        ],
        4,
    ),
    "bandwidth-bound-ps": (
        cluster((2, 2), (3,), bw=True),
        [
            job("a", 3, Utility.sigmoid(9, 2.0, 1), cap=3, bw=(2, 3)),
            job("b", 4, step(7, 2), cap=2, bw=(1, 2)),
            job("c", 2, linear(5, 3), arrival=1, cap=2, bw=(3, 3)),
            job("d", 1, Utility.constant(1), arrival=2, cap=1, bw=(1, 1)),
        ],
        3,
    ),
}


def brute_force(c: Cluster, jobs: list[JobSpec], horizon: int) -> float:
    """Best total utility over every schedule: per slot, every split of every job's workers
    over the worker servers, with its fewest PSs (``ps_needed``) split every way over the PS
    servers; a job scores f(slot its work is done - arrival) if that is before the horizon."""
    cap = c.capacity
    w_servers, p_servers = list(c.worker_servers), list(c.ps_servers)

    def splits(n: int, k: int) -> Iterator[tuple[int, ...]]:
        for combo in itertools.product(range(n + 1), repeat=k):
            if sum(combo) == n:
                yield combo

    def options(j: JobSpec) -> list[tuple[int, np.ndarray]]:
        """(workers, resource use per server) of every way to run j for one slot."""
        out = [(0, np.zeros_like(cap))]
        w, p = c.demand_array(j.worker), c.demand_array(j.ps)
        for y in range(1, j.worker_cap + 1):
            for ys in splits(y, len(w_servers)):
                for zs in splits(j.ps_needed(y), len(p_servers)):
                    use = np.zeros_like(cap)
                    for s, n in zip(w_servers, ys, strict=True):
                        use[s] += n * w
                    for s, n in zip(p_servers, zs, strict=True):
                        use[s] += n * p
                    if np.all(use <= cap + 1e-9):
                        out.append((y, use))
        return out

    opts = [options(j) for j in jobs]
    need = [batches(j) for j in jobs]

    @cache
    def best(t: int, done: tuple[float, ...]) -> float:
        if t == horizon:
            return 0.0
        value = 0.0
        live = [i for i, j in enumerate(jobs) if j.arrival_slot <= t and done[i] < need[i] - 1e-9]
        for choice in itertools.product(*(range(len(opts[i])) for i in live)):
            picked = [opts[i][k] for i, k in zip(live, choice, strict=True)]
            use = sum((u for _, u in picked), np.zeros_like(cap))
            if np.any(use > cap + 1e-9):
                continue
            nxt = list(done)
            gained = 0.0
            for i, (y, _) in zip(live, picked, strict=True):
                nxt[i] = done[i] + y
                if nxt[i] >= need[i] - 1e-9:
                    gained += jobs[i].utility(t - jobs[i].arrival_slot)
            value = max(value, gained + best(t + 1, tuple(nxt)))
        return value

    return best(0, tuple(0.0 for _ in jobs))


def online(c: Cluster, jobs: list[JobSpec], horizon: int, policy: str) -> float:
    engine = make_engine(c, create(policy), jobs, slot_seconds=SLOT_S, horizon=horizon)
    result = engine.run()
    return sum(r.utility() for r in result.records.values())


@pytest.mark.parametrize("name", sorted(INSTANCES))
def test_optimum_equals_brute_force(name: str) -> None:
    c, jobs, horizon = INSTANCES[name]
    result = offline_optimum(
        jobs, c, RuntimeEstimator(c), SLOT_S, horizon, time_limit_s=30, mip_rel_gap=0.0
    )
    assert result.status is SolveStatus.OPTIMAL and result.optimal
    assert result.rates == {j.job_id: pytest.approx(RATE) for j in jobs}
    expected = brute_force(c, jobs, horizon)
    assert expected > 0
    assert result.total_utility == pytest.approx(expected, abs=1e-6)
    assert result.bound == pytest.approx(expected, abs=1e-6)
    assert result.gap is not None and result.gap <= 1e-6
    # The schedule itself is feasible and earns what is reported.
    specs = {j.job_id: j for j in jobs}
    earned = 0.0
    for job_id in result.admitted:
        plan = result.schedule[job_id]
        j = specs[job_id]
        assert min(plan.slots) >= j.arrival_slot
        assert plan.completion_slot == result.completion[job_id] < horizon
        assert sum(p.n_workers for p in plan.slots.values()) >= batches(j) - 1e-9
        for p in plan.slots.values():
            assert j.ps_needed(p.n_workers) <= p.n_ps <= p.n_workers <= j.worker_cap
        earned += j.utility(result.completion[job_id] - j.arrival_slot)
    assert earned == pytest.approx(result.total_utility)
    for t in range(horizon):
        used = np.zeros_like(c.capacity)
        for job_id, plan in result.schedule.items():
            p = plan.at(t)
            if p is not None:
                for s, u in p.usage(specs[job_id], c).items():
                    used[s] += u
        assert np.all(used <= c.capacity + 1e-9)


@pytest.mark.parametrize("name", sorted(INSTANCES))
def test_optimum_bounds_every_baseline_and_gives_the_ratio(name: str) -> None:
    c, jobs, horizon = INSTANCES[name]
    opt = offline_optimum(jobs, c, RuntimeEstimator(c), SLOT_S, horizon, time_limit_s=30)
    assert opt.optimal
    policies = baseline_policies()
    assert {"fifo", "drf", "rrh", "dorm"} <= set(policies)
    for policy in policies:
        utility = online(c, jobs, horizon, policy)
        assert utility <= opt.total_utility + 1e-6, policy
        ratio = performance_ratio(opt.total_utility, utility)
        assert ratio >= 1.0 - 1e-9
        if utility > 0:
            assert ratio == pytest.approx(opt.total_utility / utility)


def test_performance_ratio_edges() -> None:
    assert performance_ratio(6.0, 4.0) == 1.5
    assert performance_ratio(3.0, 0.0) == math.inf
    assert performance_ratio(0.0, 0.0) == 1.0
    with pytest.raises(ValueError):
        performance_ratio(-1.0, 1.0)
    with pytest.raises(ValueError):
        performance_ratio(1.0, math.nan)


def _packing_instance() -> tuple[list[JobSpec], Cluster]:
    """Twenty jobs over three slots on three worker servers short of three resources each:
    a packing problem that one branch-and-bound node does not prove (seeded, fixed)."""
    rng = np.random.default_rng(0)
    workers = [
        Server(
            f"w{i}",
            ResourceVector({"cpu": 23 + i, "mem": 31 - 2 * i, "gpu": 13 + i}),
            pool=Pool.WORKER,
        )
        for i in range(3)
    ]
    ps = Server("p0", ResourceVector({"cpu": 1000, "mem": 1000, "gpu": 1000}), pool=Pool.PS)
    c = Cluster((*workers, ps))
    jobs = []
    for i in range(20):
        k = int(rng.integers(1, 4))
        jobs.append(
            JobSpec(
                f"j{i}",
                chunks=1,
                arrival_slot=int(rng.integers(0, 3)),
                max_workers=k,
                batches_per_chunk=int(RATE) * k * int(rng.integers(1, 3)),
                worker=ResourceVector(
                    {
                        "cpu": int(rng.integers(1, 8)),
                        "mem": int(rng.integers(1, 9)),
                        "gpu": int(rng.integers(1, 5)),
                    }
                ),
                ps=ResourceVector({"cpu": 1}),
                compute_s=1.0,
                gradient_mb=0.0,
                utility=Utility.sigmoid(float(rng.integers(5, 60)), 0.5, float(rng.integers(1, 3))),
            )
        )
    return jobs, c


def test_a_limited_solve_reports_status_gap_and_bound_honestly() -> None:
    """Stopped by a limit (the node limit: the same stopping point on any machine, where a
    clock limit would depend on its speed), the result is the schedule found so far, flagged
    as not proven, with a gap and a bound that the proven optimum respects."""
    jobs, c = _packing_instance()
    est = RuntimeEstimator(c)
    limited = offline_optimum(jobs, c, est, SLOT_S, 3, time_limit_s=60, node_limit=1)
    assert limited.status is SolveStatus.TIME_LIMIT, limited.message
    assert not limited.optimal
    assert limited.admitted and limited.total_utility > 0
    assert limited.gap is not None and limited.gap > 0
    assert limited.bound is not None and limited.bound > limited.total_utility
    full = offline_optimum(jobs, c, est, SLOT_S, 3, time_limit_s=60)
    assert full.status is SolveStatus.OPTIMAL and full.optimal
    assert full.bound is not None and full.bound >= full.total_utility - 1e-9
    assert limited.total_utility <= full.total_utility + 1e-6 <= limited.bound + 2e-6
    # Both schedules are what they claim: each admitted job completes, scored as reported.
    for res in (limited, full):
        total = sum(
            j.utility(res.completion[j.job_id] - j.arrival_slot)
            for j in jobs
            if j.job_id in res.admitted
        )
        assert total == pytest.approx(res.total_utility)


def test_a_solve_without_a_schedule_reports_nothing_admitted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """HiGHS stopped before any incumbent (a limit on a hard instance; no instance does it
    on every machine, so the solver's answer is injected): nothing is admitted, the utility
    is 0, and the status and the solver's bound are passed on."""
    from mlsched.scheduler.offline import optimum as module
    from mlsched.scheduler.solvers.highs import SolveResult

    jobs, c = _packing_instance()
    failed = SolveResult(SolveStatus.FAILED, None, None, "limit before any incumbent", 300.0)
    monkeypatch.setattr(module, "solve_offline", lambda *a, **k: failed)
    res = offline_optimum(jobs, c, RuntimeEstimator(c), SLOT_S, 3, time_limit_s=60)
    assert res.status is SolveStatus.FAILED and not res.optimal
    assert res.total_utility == 0 and res.admitted == () and dict(res.schedule) == {}
    assert res.bound == 300.0 and res.gap is None
    assert res.variables > len(jobs) and res.message == "limit before any incumbent"


def test_unschedulable_jobs_and_bad_input() -> None:
    c = cluster((2,), (2,))
    late = job("late", 1, Utility.constant(1), arrival=5)
    huge = JobSpec(
        "huge",
        worker=ResourceVector({"cpu": 4}),
        ps=ResourceVector({"cpu": 1}),
        compute_s=1.0,
        gradient_mb=0.0,
    )
    ok = job("ok", 1, Utility.constant(2))
    result = offline_optimum([late, huge, ok], c, RuntimeEstimator(c), SLOT_S, 3, time_limit_s=10)
    assert set(result.unschedulable) == {"late", "huge"}
    assert result.admitted == ("ok",) and result.total_utility == pytest.approx(2.0)
    assert worker_rate(huge, c, RuntimeEstimator(c), SLOT_S) == 0.0
    ring = JobSpec("ring", arch=Arch.ALLREDUCE, worker=ResourceVector({"cpu": 1}))
    with pytest.raises(ValueError, match="all-reduce"):
        offline_optimum([ring], c, RuntimeEstimator(c), SLOT_S, 3, time_limit_s=1)
    with pytest.raises(ValueError, match="time_limit_s"):
        offline_optimum([ok], c, RuntimeEstimator(c), SLOT_S, 3, time_limit_s=0)
    nothing = offline_optimum([late], c, RuntimeEstimator(c), SLOT_S, 3, time_limit_s=1)
    assert nothing.total_utility == 0 and nothing.status is SolveStatus.OPTIMAL
