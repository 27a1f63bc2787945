"""The offline optimum of spec 001's problem (1)-(13), for the performance ratio (§3.8).

Every job, its arrival and the whole horizon are known in advance; a MILP chooses which
jobs to admit and, for each admitted job and slot, how many workers and PSs it runs on
each server. The completion slot (8) is linearised as the spec recommends: a binary
``u[i, t]`` is 1 iff job i completes in slot t, ``sum_t u[i, t] = x_i <= 1``, and no worker
runs after completion. Because every f is non-increasing, the solver puts the completion
indicator at the true last slot (or later only where f is flat, which changes no value).

Model, for job i with arrival a_i, slots t in [a_i, T-1] (slot a_i is usable, spec 001
A13), worker servers h its GPU type allows and PS servers k:

* ``y[i, h, t]``, ``z[i, k, t]`` integers: workers and PSs (12), (13); none before
  arrival (9), (10), by construction;
* (2) ``sum_{h,t} y[i, h, t] >= Work_i * sum_t u[i, t]``, where ``Work_i`` is the job's
  total work in worker-slots: ``total_work / rate_i``, ``rate_i`` the work units one worker
  does in one slot by the runtime model (spec 001 §2.2: progress is linear in the worker
  count, ``Y / (M theta)`` chunks per slot);
* (3) and completion: ``sum_h y[i, h, t] <= N_i * sum_{t' >= t} u[i, t']`` (N_i is the job's
  ``worker_cap``);
* (4), (5) capacity of every server, resource and slot (workers and PSs of all jobs);
* (6) ``b_i Y <= B_i Z``, and ``Y <= ps_ratio Z`` when the job sets a ratio, and
  ``Y <= N_i Z`` (a PS job that runs has a PS); (7) ``Z <= Y`` (``kappa Y`` for a job whose
  bandwidth or ratio needs more PSs than workers, where (6)+(7) would make it unschedulable,
  spec 001 A5);
* ``min_workers``: ``Y`` is 0 or at least ``min_workers`` in every slot (a binary per slot,
  only for jobs with ``min_workers > 1``);
* objective: ``sum_{i,t} u[i, t] f_i(t - a_i)`` (1); a job not finished by T earns 0.

Solved by HiGHS (:func:`~mlsched.scheduler.solvers.highs.solve_milp`) under a required
wall-clock limit. When the limit stops the search the best schedule found is returned with
``status`` :attr:`SolveStatus.TIME_LIMIT`, its relative ``gap`` and the solver's upper
``bound`` on the optimum, so a ratio computed from it is a lower estimate of the true one
(OPT lies in ``[total_utility, bound]``).

Scope: the linear progress model is exact for asynchronous PS jobs whose workers reserve
bandwidth (spec 001's jobs: the runtime model then gives each worker the same rate whatever
the placement, as long as ``Z B >= Y b``). For other PS jobs the rate is taken at a
reference placement (one worker and its PSs, packed on the empty cluster), an
approximation. All-reduce jobs are outside the spec's model and are refused. Identical
servers are not aggregated.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from mlsched.core.allocation import Placement, Plan
from mlsched.core.cluster import Cluster
from mlsched.core.job import JobSpec
from mlsched.perfmodel.base import RuntimeModel
from mlsched.scheduler.placement import eligible_ps_servers, eligible_worker_servers, pack
from mlsched.scheduler.solvers.highs import SolveResult, SolveStatus, solve_milp
from mlsched.scheduler.solvers.model import MilpModel
from mlsched.scheduler.view import CapacityLedger

__all__ = ["OfflineResult", "offline_optimum", "performance_ratio", "worker_rate"]

_EPS = 1e-9


@dataclass(frozen=True)
class OfflineResult:
    """The offline optimum (or the best schedule found by the time limit).

    ``total_utility`` is the utility of ``schedule`` (each admitted job scored at the slot
    its work is done); ``admitted`` the jobs it completes; ``schedule`` a :class:`Plan` per
    admitted job (per-slot placements up to its completion); ``completion`` its completion
    slot. ``status`` is the solver's: ``optimal`` (within ``mip_rel_gap``, HiGHS' default
    1e-4 unless given), ``time_limit`` (feasible, not proven optimal) or, with no schedule
    at all, ``failed``/``infeasible``. ``gap`` is the relative MIP gap reported by HiGHS
    (``inf`` when the limit stopped it with only the empty schedule against a positive
    bound; None without a schedule), ``bound`` its upper bound on the optimum (None when
    unknown). ``unschedulable`` lists
    the jobs no schedule can run (they arrive at or after T, or never fit the cluster).
    ``rates`` are the work units per worker per slot used per job (spec 000's optimum: the
    internal rate), ``external_rates`` spec 000's external ones (empty for spec 001).
    """

    total_utility: float
    admitted: tuple[str, ...]
    schedule: Mapping[str, Plan]
    completion: Mapping[str, int]
    status: SolveStatus
    gap: float | None
    bound: float | None
    seconds: float
    variables: int = 0
    constraints: int = 0
    unschedulable: tuple[str, ...] = ()
    message: str = ""
    rates: Mapping[str, float] = field(default_factory=dict)
    external_rates: Mapping[str, float] = field(default_factory=dict)

    @property
    def optimal(self) -> bool:
        return self.status is SolveStatus.OPTIMAL


def check_offline_inputs(
    jobs: Sequence[JobSpec], horizon: int, slot_seconds: float, problem: str
) -> list[str]:
    """The job ids, after refusing what an offline optimum cannot model: a bad horizon or
    slot length, repeated ids, all-reduce jobs and progress utilities."""
    if not isinstance(horizon, int) or isinstance(horizon, bool) or horizon < 1:
        raise ValueError(f"horizon must be an integer >= 1, got {horizon!r}")
    if not slot_seconds > 0:
        raise ValueError(f"slot_seconds must be > 0, got {slot_seconds!r}")
    ids = [j.job_id for j in jobs]
    if len(set(ids)) != len(ids):
        raise ValueError("job ids must be unique")
    for job in jobs:
        if not job.uses_ps:
            raise ValueError(f"job {job.job_id!r} is all-reduce: {problem} models PS jobs only")
        if job.utility.over_progress:
            raise ValueError(f"job {job.job_id!r} has a progress utility, not f(duration)")
    return ids


def solve_offline(
    m: MilpModel,
    n: int,
    *,
    time_limit_s: float,
    mip_rel_gap: float | None,
    node_limit: int | None = None,
) -> SolveResult:
    """Maximise an offline model's objective with HiGHS under the time limit (and, when
    given, the branch-and-bound node limit: a limit that stops at the same point anywhere)."""
    return solve_milp(
        np.array(m.obj),
        m.a_ub(n),
        np.array(m.b),
        integrality=np.array(m.kind),
        bounds=list(zip(m.lo, m.hi, strict=True)),
        time_limit_s=time_limit_s,
        mip_rel_gap=mip_rel_gap,
        node_limit=node_limit,
        maximize=True,
    )


def unsolved(
    res: SolveResult,
    seconds: float,
    shape: tuple[int, int],
    unschedulable: Sequence[str],
    rates: Mapping[str, float],
    external_rates: Mapping[str, float] | None = None,
) -> OfflineResult:
    """The result of a solve that found no schedule (``shape``: variables, rows)."""
    return OfflineResult(
        0.0,
        (),
        {},
        {},
        res.status,
        None,
        res.dual_bound,
        seconds,
        shape[0],
        shape[1],
        tuple(unschedulable),
        res.message,
        rates,
        external_rates or {},
    )


def performance_ratio(opt_utility: float, online_utility: float) -> float:
    """OPT / online total utility (spec 001 Fig. 5): >= 1 when ``opt_utility`` is the
    optimum; ``inf`` when the online policy earned nothing and OPT did, 1.0 when neither."""
    for name, value in (("opt_utility", opt_utility), ("online_utility", online_utility)):
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    if online_utility <= 0:
        return math.inf if opt_utility > 0 else 1.0
    return opt_utility / online_utility


def worker_rate(
    job: JobSpec, cluster: Cluster, runtime: RuntimeModel, slot_seconds: float
) -> float:
    """Work units one worker does in one slot (0 when the job never fits the cluster):
    the runtime model's throughput at one worker and its PSs packed on the empty cluster."""
    n_ps = job.ps_needed(1)
    placement = pack(job, 1, n_ps, CapacityLedger(cluster))
    if placement is None:
        return 0.0
    return runtime.throughput(job, placement) * slot_seconds / placement.n_workers


def _max_count(cap: np.ndarray, demand: np.ndarray) -> int:
    need = demand > _EPS
    if not need.any():
        return 1 << 20
    return max(0, math.floor(float(np.min(cap[need] / demand[need])) + _EPS))


@dataclass
class _SlotCols:
    """One job's columns in one slot: (column, server) of its workers and PSs, and u."""

    ys: list[tuple[int, int]]
    zs: list[tuple[int, int]]
    u: int


def offline_optimum(
    jobs: Sequence[JobSpec],
    cluster: Cluster,
    runtime: RuntimeModel,
    slot_seconds: float,
    horizon: int,
    *,
    time_limit_s: float,
    mip_rel_gap: float | None = None,
    rates: Mapping[str, float] | None = None,
    node_limit: int | None = None,
) -> OfflineResult:
    """Solve spec 001's offline problem (1)-(13) on ``jobs`` over slots ``0..horizon-1``.

    ``rates`` overrides the work units per worker per slot of some jobs (default:
    :func:`worker_rate`). ``time_limit_s`` is required; see :class:`OfflineResult` for what
    comes back when it (or ``node_limit``, the solver's branch-and-bound nodes) is reached.
    """
    ids = check_offline_inputs(jobs, horizon, slot_seconds, "the offline problem")
    start = time.perf_counter()
    cap = cluster.capacity
    m = MilpModel()
    rate_of: dict[str, float] = {}
    unschedulable: list[str] = []
    layout: list[tuple[JobSpec, float, dict[int, _SlotCols]]] = []
    cap_rows: dict[tuple[int, int, int], list[tuple[int, float]]] = {}
    for job in jobs:
        rate = (
            float(rates[job.job_id])
            if rates is not None and job.job_id in rates
            else worker_rate(job, cluster, runtime, slot_seconds)
        )
        rate_of[job.job_id] = rate
        w_dem = cluster.demand_array(job.worker)
        p_dem = cluster.demand_array(job.ps)
        w_servers = [
            (h, min(job.worker_cap, _max_count(cap[h], w_dem)))
            for h in eligible_worker_servers(job, cluster)
        ]
        top_z = max(1, job.ps_per_worker) * job.worker_cap
        p_servers = [
            (k, min(top_z, _max_count(cap[k], p_dem))) for k in eligible_ps_servers(job, cluster)
        ]
        w_servers = [(h, n) for h, n in w_servers if n > 0]
        p_servers = [(k, n) for k, n in p_servers if n > 0]
        window = range(job.arrival_slot, horizon)
        if (
            rate <= 0
            or not w_servers
            or not p_servers
            or not len(window)
            or not cluster.offers(job.worker)
            or not cluster.offers(job.ps)
        ):
            unschedulable.append(job.job_id)
            continue
        per_slot: dict[int, _SlotCols] = {}
        for t in window:
            cols_t = _SlotCols(
                [(m.var(0.0, float(n)), h) for h, n in w_servers],
                [(m.var(0.0, float(n)), k) for k, n in p_servers],
                m.var(0.0, 1.0, job.utility(t - job.arrival_slot)),
            )
            per_slot[t] = cols_t
            for demand, cols in ((w_dem, cols_t.ys), (p_dem, cols_t.zs)):
                for r in np.flatnonzero(demand > _EPS).tolist():
                    for c, s in cols:
                        cap_rows.setdefault((s, r, t), []).append((c, float(demand[r])))
        layout.append((job, rate, per_slot))
    for (s, r, _), entries in cap_rows.items():
        m.row(entries, float(cap[s, r]))
    for job, rate, per_slot in layout:
        work = job.total_work / rate  # worker-slots
        u_cols = [per_slot[t].u for t in sorted(per_slot)]
        all_y = [c for t in per_slot for c, _ in per_slot[t].ys]
        m.row([(c, -1.0) for c in all_y] + [(u, work * (1 - _EPS)) for u in u_cols], _EPS)
        m.row([(u, 1.0) for u in u_cols], 1.0)
        n_cap = float(job.worker_cap)
        kappa = float(max(1, job.ps_per_worker))
        b, big_b = job.worker_bw_gbps, job.ps_bw_gbps
        for pos, t in enumerate(sorted(per_slot)):
            ys = [c for c, _ in per_slot[t].ys]
            zs = [c for c, _ in per_slot[t].zs]
            later = u_cols[pos:]
            m.row([(c, 1.0) for c in ys] + [(u, -n_cap) for u in later], 0.0)
            if b > 0 and big_b > 0:
                m.row([(c, b) for c in ys] + [(c, -big_b) for c in zs], 0.0)
            if job.ps_ratio is not None:
                m.row([(c, 1.0) for c in ys] + [(c, -job.ps_ratio) for c in zs], 0.0)
            m.row([(c, 1.0) for c in ys] + [(c, -n_cap) for c in zs], 0.0)
            m.row([(c, 1.0) for c in zs] + [(c, -kappa) for c in ys], 0.0)
            if job.min_workers > 1:
                on = m.var(0.0, 1.0)
                m.row([(c, 1.0) for c in ys] + [(on, -n_cap)], 0.0)
                m.row([(c, -1.0) for c in ys] + [(on, float(job.min_workers))], 0.0)
    n = len(m.lo)
    if not n:
        return OfflineResult(
            0.0,
            (),
            {},
            {},
            SolveStatus.OPTIMAL,
            0.0,
            0.0,
            time.perf_counter() - start,
            unschedulable=tuple(unschedulable),
            message="no job can be scheduled",
            rates=rate_of,
        )
    res = solve_offline(
        m, n, time_limit_s=time_limit_s, mip_rel_gap=mip_rel_gap, node_limit=node_limit
    )
    seconds = time.perf_counter() - start
    if not res.ok or res.x is None:
        return unsolved(res, seconds, (n, len(m.b)), unschedulable, rate_of)
    x = res.x
    schedule: dict[str, Plan] = {}
    completion: dict[str, int] = {}
    total = 0.0
    for job, rate, per_slot in layout:
        if sum(x[cols_t.u] for cols_t in per_slot.values()) < 0.5:
            continue
        work = job.total_work / rate
        done = 0.0
        slots: dict[int, Placement] = {}
        for t in sorted(per_slot):
            cols_t = per_slot[t]
            w = {h: k for c, h in cols_t.ys if (k := round(float(x[c]))) > 0}
            p = {s: k for c, s in cols_t.zs if (k := round(float(x[c]))) > 0}
            if not w:
                continue
            slots[t] = Placement.of(w, p)
            done += sum(w.values())
            if done >= work * (1 - 1e-7):
                completion[job.job_id] = t
                break
        if job.job_id not in completion:
            continue  # numerically short of its work: scored 0
        schedule[job.job_id] = Plan(slots)
        total += job.utility(completion[job.job_id] - job.arrival_slot)
    bound = res.dual_bound
    if bound is not None:
        bound = max(bound, total)
    gap = None if res.mip_gap is None else float(res.mip_gap)
    return OfflineResult(
        total,
        tuple(j for j in ids if j in schedule),
        schedule,
        completion,
        res.status,
        gap,
        bound,
        seconds,
        n,
        len(m.b),
        tuple(unschedulable),
        res.message,
        rate_of,
    )
