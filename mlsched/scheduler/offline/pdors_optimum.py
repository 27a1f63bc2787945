"""The offline optimum of spec 000's problem (DMLRS, §2.3) for the Fig. 10 reproduction (§5.4).

Every job, its arrival and the whole horizon are known in advance; a MILP chooses which
jobs to admit and, for each admitted job and slot, whether it runs co-located on one
machine (the internal mode, Fact 1) or spread (the external mode), and how many workers
and PSs it runs on each machine. It is spec 000 §5.4's MILP made capacity-exact per
machine:

* internal mode, per job i, usable slot t and machine h that hosts workers and PSs:
  integers ``w_in[i, t, h]``, ``s_in[i, t, h]``, allowed only when the binary
  ``z[i, t, h]`` is 1;
* external mode: integers ``w_ex[i, t, h]`` on worker machines and ``s_ex[i, t, k]`` on PS
  machines, allowed only when the binary ``y[i, t]`` is 1 (the spec has one pair per
  (i, t); per-machine variables are needed for exact capacity);
* one mode per slot, internal on one machine: ``sum_h z[i, t, h] + y[i, t] <= 1``;
* the ratio (E6) per mode, ``sum w <= gamma sum s`` (so a running job has a PS; without
  ``ps_ratio``, ``sum w <= F sum s``), the bandwidth cover ``b sum w <= B sum s`` when
  the job reserves bandwidth, and ``sum s <= kappa sum w`` (no idle PSs, as spec 001's
  optimum);
* work (E7): ``sum_t rate_in sum_h w_in + rate_ex sum_h w_ex >= V_i x_i``, the two
  per-worker rates from :func:`~mlsched.scheduler.pdors.needs.per_worker_rates` (the
  runtime model at the job's ratio);
* completion binaries ``c[i, t]`` with ``sum_t c[i, t] = x_i <= 1`` and
  ``sum_h (w_in + w_ex)[i, t] <= F_i sum_{t' >= t} c[i, t']``: at most F workers (E8),
  none after completion;
* capacity (E9) of every machine, resource and slot over all jobs' workers and PSs of
  both modes;
* ``min_workers > 1``: the slot's workers are 0 or at least ``min_workers`` (a binary per
  slot);
* objective ``sum_{i, t} c[i, t] u_i(t - a_i)``: the engine's credit, f(completion slot -
  arrival slot), slot ``a_i`` usable; a job not finished by T earns 0.

The rates make the model a lower bound of the engine's reality in two places: an external
slot whose tasks happen to share one machine runs at the internal rate in the simulator
but is credited here at the external one, and a slot with more PSs than ``w / gamma``
(integer rounding, A7) communicates faster than the reference ratio the rates are taken
at. The returned schedule is scored like the engine scores it, at the slot where its
credited work is done.

Solved by HiGHS under a required wall-clock limit; see
:class:`~mlsched.scheduler.offline.optimum.OfflineResult` for what comes back when the
limit is reached. All-reduce jobs and progress utilities are refused, as in spec 001's
optimum.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from mlsched.core.allocation import Placement, Plan
from mlsched.core.cluster import Cluster
from mlsched.core.job import JobSpec
from mlsched.perfmodel.base import RuntimeModel
from mlsched.scheduler.offline.optimum import (
    OfflineResult,
    check_offline_inputs,
    solve_offline,
    unsolved,
)
from mlsched.scheduler.pdors.needs import per_worker_rates
from mlsched.scheduler.placement import eligible_ps_servers, eligible_worker_servers
from mlsched.scheduler.solvers.highs import SolveStatus
from mlsched.scheduler.solvers.model import MilpModel

__all__ = ["pdors_optimum"]

_EPS = 1e-9


def _max_count(cap: np.ndarray, demand: np.ndarray) -> int:
    need = demand > _EPS
    if not need.any():
        return 1 << 20
    return max(0, math.floor(float(np.min(cap[need] / demand[need])) + _EPS))


@dataclass
class _Slot:
    """One job's columns in one slot: (column, machine) per mode and kind, and c."""

    w_in: list[tuple[int, int]]
    s_in: list[tuple[int, int]]
    w_ex: list[tuple[int, int]]
    s_ex: list[tuple[int, int]]
    c: int


@dataclass
class _Job:
    spec: JobSpec
    rate_in: float
    rate_ex: float
    slots: dict[int, _Slot]

    @property
    def work(self) -> float:
        """Total work in internal worker-slots."""
        return self.spec.total_work / self.rate_in

    @property
    def ext_weight(self) -> float:
        """Internal worker-slots one external worker-slot is worth."""
        return self.rate_ex / self.rate_in


def pdors_optimum(
    jobs: Sequence[JobSpec],
    cluster: Cluster,
    runtime: RuntimeModel,
    slot_seconds: float,
    horizon: int,
    *,
    time_limit_s: float,
    mip_rel_gap: float | None = None,
    rates: Mapping[str, tuple[float, float]] | None = None,
) -> OfflineResult:
    """Solve spec 000's offline problem on ``jobs`` over slots ``0..horizon-1``.

    ``rates`` overrides the (internal, external) work units per worker per slot of some
    jobs (default: :func:`~mlsched.scheduler.pdors.needs.per_worker_rates`).
    ``time_limit_s`` is required. The result's ``rates`` are the internal rates used and
    ``external_rates`` the external ones.
    """
    ids = check_offline_inputs(jobs, horizon, slot_seconds, "spec 000's problem")
    start = time.perf_counter()
    cap = cluster.capacity
    m = MilpModel()
    rate_in_of: dict[str, float] = {}
    rate_ex_of: dict[str, float] = {}
    unschedulable: list[str] = []
    layout: list[_Job] = []
    cap_rows: dict[tuple[int, int, int], list[tuple[int, float]]] = {}
    for job in jobs:
        if rates is not None and job.job_id in rates:
            rate_in, rate_ex = (float(v) for v in rates[job.job_id])
        else:
            rate_in, rate_ex = per_worker_rates(job, runtime, slot_seconds, len(cluster))
        rate_in_of[job.job_id], rate_ex_of[job.job_id] = rate_in, rate_ex
        alpha = cluster.demand_array(job.worker)
        beta = cluster.demand_array(job.ps)
        big_f = job.worker_cap
        top_s = max(1, job.ps_per_worker) * big_f
        w_hosts = {
            h: n
            for h in eligible_worker_servers(job, cluster)
            if (n := min(big_f, _max_count(cap[h], alpha))) > 0
        }
        p_hosts = {
            k: n
            for k in eligible_ps_servers(job, cluster)
            if (n := min(top_s, _max_count(cap[k], beta))) > 0
        }
        # Internal mode: a machine that hosts both and fits one worker and its PSs.
        first_ps = job.ps_needed(1)
        in_hosts = [
            h for h in w_hosts if h in p_hosts and np.all(alpha + first_ps * beta <= cap[h] + _EPS)
        ]
        window = range(job.arrival_slot, horizon)
        ext_ok = rate_ex > 0 and bool(w_hosts) and bool(p_hosts)
        in_ok = rate_in > 0 and bool(in_hosts)
        if (
            not (ext_ok or in_ok)
            or rate_in <= 0
            or not len(window)
            or not cluster.offers(job.worker)
            or not cluster.offers(job.ps)
        ):
            unschedulable.append(job.job_id)
            continue
        slots: dict[int, _Slot] = {}
        for t in window:
            slot = _Slot(
                [(m.var(0.0, float(w_hosts[h])), h) for h in in_hosts] if in_ok else [],
                [(m.var(0.0, float(p_hosts[h])), h) for h in in_hosts] if in_ok else [],
                [(m.var(0.0, float(n)), h) for h, n in w_hosts.items()] if ext_ok else [],
                [(m.var(0.0, float(n)), k) for k, n in p_hosts.items()] if ext_ok else [],
                m.var(0.0, 1.0, job.utility(t - job.arrival_slot)),
            )
            slots[t] = slot
            for demand, cols in (
                (alpha, slot.w_in + slot.w_ex),
                (beta, slot.s_in + slot.s_ex),
            ):
                for r in np.flatnonzero(demand > _EPS).tolist():
                    for col, h in cols:
                        cap_rows.setdefault((h, r, t), []).append((col, float(demand[r])))
        layout.append(_Job(job, rate_in, max(rate_ex, 0.0), slots))
    for (h, r, _), entries in cap_rows.items():
        m.row(entries, float(cap[h, r]))
    for entry in layout:
        _job_rows(m, entry)
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
            rates=rate_in_of,
            external_rates=rate_ex_of,
        )
    res = solve_offline(m, n, time_limit_s=time_limit_s, mip_rel_gap=mip_rel_gap)
    seconds = time.perf_counter() - start
    if not res.ok or res.x is None:
        return unsolved(res, seconds, (n, len(m.b)), unschedulable, rate_in_of, rate_ex_of)
    schedule, completion, total = _read_schedule(res.x, layout)
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
        rate_in_of,
        rate_ex_of,
    )


def _mode_rows(
    m: MilpModel, job: JobSpec, ws: list[int], ss: list[int], on: int, big_f: float
) -> None:
    """One mode's rows in one slot: gated by the binary ``on``, the ratio, a PS per
    running job, the bandwidth cover, and no idle PSs."""
    if not ws:
        return
    top_s = float(max(1, job.ps_per_worker)) * big_f
    m.row([(c, 1.0) for c in ws] + [(on, -big_f)], 0.0)
    m.row([(c, 1.0) for c in ss] + [(on, -top_s)], 0.0)
    if job.ps_ratio is not None:
        m.row([(c, 1.0) for c in ws] + [(c, -float(job.ps_ratio)) for c in ss], 0.0)
    m.row([(c, 1.0) for c in ws] + [(c, -big_f) for c in ss], 0.0)
    b, big_b = job.worker_bw_gbps, job.ps_bw_gbps
    if b > 0 and big_b > 0:
        m.row([(c, b) for c in ws] + [(c, -big_b) for c in ss], 0.0)
    kappa = float(max(1, job.ps_per_worker))
    m.row([(c, 1.0) for c in ss] + [(c, -kappa) for c in ws], 0.0)


def _job_rows(m: MilpModel, entry: _Job) -> None:
    job = entry.spec
    big_f = float(job.worker_cap)
    ts = sorted(entry.slots)
    c_cols = [entry.slots[t].c for t in ts]
    # Work (E7), in internal worker-slots, credited only to a job that completes.
    done: list[tuple[int, float]] = []
    for t in ts:
        slot = entry.slots[t]
        done += [(c, -1.0) for c, _ in slot.w_in]
        done += [(c, -entry.ext_weight) for c, _ in slot.w_ex]
    m.row(done + [(c, entry.work * (1 - _EPS)) for c in c_cols], _EPS)
    m.row([(c, 1.0) for c in c_cols], 1.0)
    for pos, t in enumerate(ts):
        slot = entry.slots[t]
        zs = [m.var(0.0, 1.0) for _ in slot.w_in]
        y = m.var(0.0, 1.0) if slot.w_ex else None
        # One mode per slot; internal on one machine (Fact 1).
        m.row([(z, 1.0) for z in zs] + ([(y, 1.0)] if y is not None else []), 1.0)
        for z, (wc, _), (sc, _) in zip(zs, slot.w_in, slot.s_in, strict=True):
            _mode_rows(m, job, [wc], [sc], z, big_f)
        if y is not None:
            _mode_rows(m, job, [c for c, _ in slot.w_ex], [c for c, _ in slot.s_ex], y, big_f)
        workers = [c for c, _ in slot.w_in + slot.w_ex]
        # At most F workers (E8), none after completion.
        m.row([(c, 1.0) for c in workers] + [(c, -big_f) for c in c_cols[pos:]], 0.0)
        if job.min_workers > 1:
            run = m.var(0.0, 1.0)
            m.row([(c, 1.0) for c in workers] + [(run, -big_f)], 0.0)
            m.row([(c, -1.0) for c in workers] + [(run, float(job.min_workers))], 0.0)


def _read_schedule(
    x: np.ndarray, layout: list[_Job]
) -> tuple[dict[str, Plan], dict[str, int], float]:
    """Per admitted job its plan up to the slot its credited work is done, that slot, and
    the total utility scored there (as the engine credits it)."""
    schedule: dict[str, Plan] = {}
    completion: dict[str, int] = {}
    total = 0.0
    for entry in layout:
        job = entry.spec
        if sum(x[slot.c] for slot in entry.slots.values()) < 0.5:
            continue
        done = 0.0
        slots: dict[int, Placement] = {}
        for t in sorted(entry.slots):
            slot = entry.slots[t]
            w: dict[int, int] = {}
            p: dict[int, int] = {}
            for cols, into in ((slot.w_in + slot.w_ex, w), (slot.s_in + slot.s_ex, p)):
                for c, h in cols:
                    if (k := round(float(x[c]))) > 0:
                        into[h] = into.get(h, 0) + k
            if not w:
                continue
            slots[t] = Placement.of(w, p)
            done += sum(round(float(x[c])) for c, _ in slot.w_in)
            done += entry.ext_weight * sum(round(float(x[c])) for c, _ in slot.w_ex)
            if done >= entry.work * (1 - 1e-7):
                completion[job.job_id] = t
                break
        if job.job_id not in completion:
            continue  # numerically short of its work: scored 0
        schedule[job.job_id] = Plan(slots)
        total += job.utility(completion[job.job_id] - job.arrival_slot)
    return schedule, completion, total
