"""Dorm: utilization-maximizing MILP with fairness and adjustment limits (spec 001 §5.2 item 4).

Dorm (the paper's ref. [17]) re-partitions the cluster at every job arrival and completion
by a mixed-integer program that maximizes resource utilization subject to fairness and
adjustment-overhead constraints. The paper gives no formulation; this is the spec's
recommended one.

**Admission.** Every job is admitted unless ``min_workers`` workers and their PSs can never
fit the empty cluster (rejected as infeasible), as for DRF.

**When.** At the slot following each admission or completion the counts *and placement* of
every active job are recomputed; in between the allocation is returned unchanged.

**MILP.** Integer variables ``y[j, h]`` (workers of job j on worker server h, the servers its
GPU type allows) and ``z[j, k]`` (PSs on PS server k), a binary ``on[j]`` (the job runs) and,
for each job that ran before, a binary ``ch[j]`` (its counts change). With
``Y_j = sum_h y[j, h]`` and ``Z_j = sum_k z[j, k]``:

* objective: maximize ``sum over (pool, r) of used_r / capacity_r``, i.e. each task counts
  its demand normalised by its pool's total of each resource (per pool when no server hosts
  both workers and PSs, else over the cluster totals, as DRF's shares);
* capacity: on every server and resource, the tasks placed there fit (spec 001 (4), (5));
* gang and caps: ``min_workers * on_j <= Y_j <= worker_cap * on_j`` (001 (3));
* PS jobs: ``Z_j >= on_j``, ``B_j Z_j >= b_j Y_j`` (001 (6)), ``ps_ratio * Z_j >= Y_j``
  when set, and ``Z_j <= Y_j`` (001 (7); ``kappa_j Y_j`` for the rare job whose
  bandwidth or ratio needs more PSs than workers, ``kappa_j`` the smallest integer that
  allows ``ps_needed``);
* fairness: each job's dominant share is at least ``fairness`` (phi, default 0.8) times its
  DRF share. A dominant share is a maximum, so the constraint is linearised on the
  dimension that is dominant at the job's DRF allocation: ``share_d*(Y_j, Z_j) >= phi *
  share_drf`` (a sufficient condition; the DRF allocation itself satisfies it);
* adjustment: ``|Y_j - Y_j^prev| <= M ch_j`` and ``|Z_j - Z_j^prev| <= M ch_j``, and
  ``sum_j ch_j <= ceil(adjust_fraction * n_active)`` (default 0.5): at most half of the
  active jobs' running counts change; a running job that is stopped counts as a change.

A job that ran before also earns a tie-breaking bonus, smaller in total than half the
utilization of one task, for each task it keeps on the same server, so the solver does not
move tasks between equivalent servers (a move restarts the job).

**Candidate servers.** A job's variables cover only its previous servers, its servers in
the DRF allocation, and ``extra_servers`` (default 2; None: every server) more per pool,
those with the most room for one of its tasks left by the DRF allocation. The DRF and the
previous allocation stay feasible; the program stays small enough to solve in well under
the limit at spec 001's scales (with every server it often ran into the limit).

**Solver.** HiGHS through :func:`~mlsched.scheduler.solvers.highs.solve_milp`, under a
branch-and-bound ``node_limit`` (default 200: the same stopping point on any machine, so
runs are reproducible), a wall-clock safety net ``time_limit_s`` (default 10 s) and a
relative gap ``mip_rel_gap`` (default 0.05: the LP bound of these packing programs is
loose, and proving a tight gap took seconds on most re-plans). A solution found by a limit
is used even if not proven optimal. A run stays reproducible unless a solve reaches the
wall-clock limit, which the node limit keeps far away.

**Fallback.** When the solver finds no feasible point (the adjustment limit can make the
program infeasible when a newcomer's fair share needs more jobs to shrink than it allows;
or the time limit passes before an incumbent), the DRF allocation of the moment is used,
the spec's "DRF solution as fallback". Every solve is recorded in :attr:`DormPolicy.solves`
(status, seconds, whether the fallback was used, whether it began from a start).

**Start.** The solver begins from a feasible point built from the previous allocation, or
else from the DRF one (:mod:`.dorm_start`): without one, HiGHS spent most of each 1-3 s
solve in its heuristics looking for a first incumbent; from one, 0.1-0.3 s. The start is an incumbent, not a
constraint: the program and its optimum are the same.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from mlsched.core.allocation import Admission, Placement
from mlsched.core.cluster import Cluster
from mlsched.core.job import JobSpec
from mlsched.scheduler.baselines.dorm_start import DormStart
from mlsched.scheduler.baselines.drf import DrfPolicy, dominant_share_units
from mlsched.scheduler.baselines.replan import ReplanPolicy
from mlsched.scheduler.baselines.taskfill import EPS, JobDemand, to_placement
from mlsched.scheduler.solvers.highs import SolveStatus, solve_milp
from mlsched.scheduler.solvers.model import MilpModel
from mlsched.scheduler.view import ClusterView, RunContext

__all__ = ["DormPolicy", "DormSolve", "share_coefficients"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DormSolve:
    """One re-plan: the slot, active jobs, the solver's status and time, whether the DRF
    fallback was used (and why), and whether the solve began from a feasible start."""

    slot: int
    jobs: int
    variables: int
    status: SolveStatus
    seconds: float
    objective: float | None
    fallback: str | None = None
    started: bool = False  # the solver was handed a feasible start (see DormStart)


def share_coefficients(cluster: Cluster, dem: JobDemand) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) with the job's share of every dominant-share dimension = ``a Y + b Z`` for Y
    workers and Z PSs (2R per-pool dimensions with separate pools, else R)."""
    separate, w_unit, p_unit = dominant_share_units(cluster)
    if separate:
        zero = np.zeros_like(w_unit)
        return (
            np.concatenate([dem.worker * w_unit, zero]),
            np.concatenate([zero, dem.ps * p_unit]),
        )
    return dem.worker * w_unit, dem.ps * w_unit


class DormPolicy(ReplanPolicy[JobDemand]):
    name = "dorm"
    description = (
        "Dorm-style MILP: maximize utilization under DRF-relative fairness and an "
        "adjustment limit, re-solved at each arrival and completion"
    )

    def __init__(
        self,
        *,
        time_limit_s: float = 10.0,
        node_limit: int | None = 200,
        fairness: float = 0.8,
        adjust_fraction: float = 0.5,
        mip_rel_gap: float | None = 0.05,
        extra_servers: int | None = 2,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        for name, value, lo, hi in (
            ("time_limit_s", time_limit_s, 0.0, math.inf),
            ("fairness", fairness, 0.0, 1.0),
            ("adjust_fraction", adjust_fraction, 0.0, 1.0),
        ):
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not lo <= value <= hi
                or (name == "time_limit_s" and not (value > 0 and math.isfinite(value)))
            ):
                raise TypeError(f"{name} must be a number in [{lo:g}, {hi:g}], got {value!r}")
        if mip_rel_gap is not None and (
            isinstance(mip_rel_gap, bool)
            or not isinstance(mip_rel_gap, (int, float))
            or not mip_rel_gap >= 0
        ):
            raise TypeError(f"mip_rel_gap must be a number >= 0 or None, got {mip_rel_gap!r}")
        if node_limit is not None and (
            isinstance(node_limit, bool) or not isinstance(node_limit, int) or node_limit < 1
        ):
            raise TypeError(f"node_limit must be an integer >= 1 or None, got {node_limit!r}")
        self.node_limit = node_limit
        self.time_limit_s = float(time_limit_s)
        self.fairness = float(fairness)
        self.adjust_fraction = float(adjust_fraction)
        self.mip_rel_gap = None if mip_rel_gap is None else float(mip_rel_gap)
        if extra_servers is not None and (
            isinstance(extra_servers, bool)
            or not isinstance(extra_servers, int)
            or extra_servers < 0
        ):
            raise TypeError(f"extra_servers must be an integer >= 0 or None, got {extra_servers!r}")
        self.extra_servers = extra_servers
        self.solves: list[DormSolve] = []
        self._drf = DrfPolicy()

    def setup(self, context: RunContext) -> None:
        super().setup(context)
        self._drf.setup(context)

    def on_arrival(self, job: JobSpec, view: ClusterView) -> Admission:
        f = self._bind(view.cluster)
        admission = self._drf.on_arrival(job, view)
        if not admission.is_admitted():
            return admission
        self._add(job.job_id, f.demand(job, self._seq))
        return Admission.admit(reason="admitted; counts and placement by the utilization MILP")

    def _forget(self, job_id: str) -> None:
        self._drf.release(job_id)

    def _plan(self, slot: int, view: ClusterView) -> dict[str, Placement]:
        fair = dict(self._drf.allocate(slot, view).items())
        return self._replan(slot, view, fair)

    # The MILP ----------------------------------------------------------------------------
    def _replan(
        self, slot: int, view: ClusterView, fair: dict[str, Placement]
    ) -> dict[str, Placement]:
        cluster = view.cluster
        jobs = [d for j, d in self._jobs.items() if j in view]
        if not jobs:
            return {}
        cap = cluster.capacity
        separate, w_unit, p_unit = dominant_share_units(cluster)
        if not separate:
            p_unit = w_unit
        cols: list[tuple[int, bool, int]] = []  # (job index, is worker, server)
        lo: list[float] = []
        hi: list[float] = []
        gain: list[float] = []
        kinds: list[int] = []
        rows = MilpModel()  # rows only: the columns are built alongside
        cap_rows: dict[tuple[int, int], list[tuple[int, float]]] = {}

        def var(low: float, high: float, obj: float, integer: bool) -> int:
            lo.append(low)
            hi.append(high)
            gain.append(obj)
            kinds.append(1 if integer else 0)
            return len(lo) - 1

        f = self._bind(cluster)
        f.reset()
        residual = self._residual(cluster, fair)
        y_cols: list[list[int]] = []
        z_cols: list[list[int]] = []
        previous = [self._alloc.get(d.job.job_id) for d in jobs]
        kept_tasks = sum(p.n_workers + p.n_ps for p in previous if p is not None)
        per_task = [float((d.worker * w_unit).sum()) for d in jobs] + [
            float((d.ps * p_unit).sum()) for d in jobs if d.job.uses_ps
        ]
        smallest = min([g for g in per_task if g > 0], default=1.0)
        bonus = 0.5 * smallest / (1 + kept_tasks)
        for i, d in enumerate(jobs):
            job = d.job
            ys: list[int] = []
            zs: list[int] = []
            for is_worker, servers, demand, unit in (
                (True, d.worker_servers, d.worker, w_unit),
                (False, d.ps_servers if job.uses_ps else d.ps_servers[:0], d.ps, p_unit),
            ):
                if not len(servers):
                    continue
                top = job.worker_cap if is_worker else job.ps_per_worker * job.worker_cap
                servers = self._candidates(
                    cluster, servers, demand, is_worker, residual, fair.get(job.job_id), previous[i]
                )
                room = f.fit_counts(servers, demand)
                per = float((demand * unit).sum())
                used = [(r, float(demand[r])) for r in np.flatnonzero(demand > EPS).tolist()]
                for s, n in zip(servers.tolist(), room.tolist(), strict=True):
                    n = min(int(n), top)
                    if n <= 0:
                        continue
                    c = var(0.0, float(n), per, True)
                    cols.append((i, is_worker, s))
                    (ys if is_worker else zs).append(c)
                    for r, amount in used:
                        cap_rows.setdefault((s, r), []).append((c, amount))
            y_cols.append(ys)
            z_cols.append(zs)
        if not cols:
            return {}
        for (s, r), entries in cap_rows.items():
            rows.row(entries, float(cap[s, r]))
        on_cols = [var(0.0, 1.0, 0.0, True) for _ in jobs]
        ch_cols: list[int] = []
        ch_of: dict[int, int] = {}  # job index -> its ch column
        kept: list[tuple[int, int, int]] = []  # (bonus column, task column, tasks kept)
        for i, d in enumerate(jobs):
            job = d.job
            ys, zs, on = y_cols[i], z_cols[i], on_cols[i]
            rows.row([(c, 1.0) for c in ys] + [(on, -float(job.worker_cap))], 0.0)
            rows.row([(c, -1.0) for c in ys] + [(on, float(job.min_workers))], 0.0)
            if job.uses_ps:
                rows.row([(c, -1.0) for c in zs] + [(on, 1.0)], 0.0)
                b, big_b = job.worker_bw_gbps, job.ps_bw_gbps
                if b > 0 and big_b > 0:
                    rows.row([(c, b) for c in ys] + [(c, -big_b) for c in zs], 0.0)
                if job.ps_ratio is not None:
                    rows.row([(c, 1.0) for c in ys] + [(c, -job.ps_ratio) for c in zs], 0.0)
                kappa = float(job.ps_per_worker)
                rows.row([(c, 1.0) for c in zs] + [(c, -kappa) for c in ys], 0.0)
            # Fairness on the dimension dominant at the job's DRF allocation.
            drf = fair.get(job.job_id)
            if drf is not None and self.fairness > 0:
                a_co, b_co = share_coefficients(cluster, d)
                shares = a_co * drf.n_workers + b_co * drf.n_ps
                dim = int(np.argmax(shares))
                target = self.fairness * float(shares[dim])
                if target > 0:
                    rows.row(
                        [(c, -float(a_co[dim])) for c in ys] + [(c, -float(b_co[dim])) for c in zs],
                        -target * (1 - 1e-9),
                    )
            prev = previous[i]
            if prev is not None:
                ch = var(0.0, 1.0, 0.0, True)
                ch_cols.append(ch)
                ch_of[i] = ch
                big_y = float(job.worker_cap)
                rows.row([(c, 1.0) for c in ys] + [(ch, -big_y)], float(prev.n_workers))
                rows.row([(c, -1.0) for c in ys] + [(ch, -big_y)], -float(prev.n_workers))
                if job.uses_ps:
                    big_z = float(job.ps_per_worker * job.worker_cap)
                    rows.row([(c, 1.0) for c in zs] + [(ch, -big_z)], float(prev.n_ps))
                    rows.row([(c, -1.0) for c in zs] + [(ch, -big_z)], -float(prev.n_ps))
                # Keeping tasks where they were: a small bonus per kept task.
                where = {(True, s): n for s, n in prev.workers}
                where.update({(False, s): n for s, n in prev.ps})
                for c in ys + zs:
                    _, is_worker, s = cols[c]
                    n = where.get((is_worker, s), 0)
                    if n:
                        k = var(0.0, float(n), bonus, False)
                        rows.row([(k, 1.0), (c, -1.0)], 0.0)
                        kept.append((k, c, n))
        if ch_cols:
            limit = math.ceil(self.adjust_fraction * len(jobs) - 1e-9)
            rows.row([(c, 1.0) for c in ch_cols], float(limit))
        n = len(lo)
        a_ub = rows.a_ub(n)
        b_ub = np.array(rows.b)
        start = time.perf_counter()
        first = DormStart(cap, jobs, cols, on_cols, ch_of, kept, a_ub, b_ub, np.array(hi)).find(
            [fair.get(d.job.job_id) for d in jobs], previous
        )
        res = solve_milp(
            np.array(gain),
            a_ub,
            b_ub,
            integrality=np.array(kinds),
            bounds=list(zip(lo, hi, strict=True)),
            time_limit_s=self.time_limit_s,
            mip_rel_gap=self.mip_rel_gap,
            node_limit=self.node_limit,
            maximize=True,
            start=first,
        )
        seconds = time.perf_counter() - start
        out: dict[str, Placement] | None = None
        reason: str | None = None
        if res.ok and res.x is not None:
            out = self._decode(cluster, jobs, cols, res.x)
            if out is None:
                reason = "solution failed the capacity check"
        else:
            reason = f"no feasible solution ({res.status.value})"
        if out is None:
            out = {j: p for j, p in fair.items() if j in view}
        self.solves.append(
            DormSolve(
                slot, len(jobs), n, res.status, seconds, res.objective, reason, first is not None
            )
        )
        log.debug(
            "[dorm] slot %d: %d jobs, %d vars, %s in %.3f s%s",
            slot,
            len(jobs),
            n,
            res.status.value,
            seconds,
            f"; DRF fallback: {reason}" if reason else "",
        )
        return out

    def _residual(self, cluster: Cluster, fair: dict[str, Placement]) -> np.ndarray:
        free = np.array(cluster.capacity, dtype=float)
        for job_id, p in fair.items():
            d = self._jobs.get(job_id)
            if d is None:
                continue
            for s, n in p.workers:
                free[s] -= n * d.worker
            for s, n in p.ps:
                free[s] -= n * d.ps
        return free

    def _candidates(
        self,
        cluster: Cluster,
        servers: np.ndarray,
        demand: np.ndarray,
        is_worker: bool,
        residual: np.ndarray,
        drf: Placement | None,
        prev: Placement | None,
    ) -> np.ndarray:
        """The servers a job's tasks of one kind may use in the program: its DRF and
        previous servers, and the ``extra_servers`` with the most room for one task left
        by the DRF allocation (then the most room on the empty server; ties: lower index)."""
        if self.extra_servers is None or len(servers) <= self.extra_servers:
            return servers
        keep: set[int] = set()
        for p in (drf, prev):
            if p is not None:
                keep.update(s for s, _ in (p.workers if is_worker else p.ps))
        need = np.flatnonzero(demand > EPS)
        if len(need):
            left = (residual[servers][:, need] / demand[need]).min(axis=1)
            whole = (cluster.capacity[servers][:, need] / demand[need]).min(axis=1)
        else:
            left = whole = np.ones(len(servers))
        order = np.lexsort((servers, -whole, -left))
        extra: list[int] = []
        for s in servers[order[whole[order] >= 1 - EPS]].tolist():  # in C: 100s of servers
            if s not in keep:
                extra.append(s)
                if len(extra) == self.extra_servers:
                    break
        keep.update(extra)
        return np.array(sorted(keep), dtype=np.intp)

    def _decode(
        self,
        cluster: Cluster,
        jobs: list[JobDemand],
        cols: list[tuple[int, bool, int]],
        x: np.ndarray,
    ) -> dict[str, Placement] | None:
        """Placements from the solution; None if they do not fit (a numerical slip)."""
        workers: list[dict[int, int]] = [{} for _ in jobs]
        ps: list[dict[int, int]] = [{} for _ in jobs]
        for c, (i, is_worker, s) in enumerate(cols):
            n = round(float(x[c]))
            if n > 0:
                (workers[i] if is_worker else ps[i])[s] = n
        used = np.zeros_like(cluster.capacity)
        out: dict[str, Placement] = {}
        for i, d in enumerate(jobs):
            if not workers[i]:
                continue
            job = d.job
            y, z = sum(workers[i].values()), sum(ps[i].values())
            if not job.min_workers <= y <= job.worker_cap or (job.uses_ps and z < job.ps_needed(y)):
                return None
            for s, k in workers[i].items():
                used[s] += k * d.worker
            for s, k in ps[i].items():
                used[s] += k * d.ps
            out[job.job_id] = to_placement(
                dict(sorted(workers[i].items())),
                dict(sorted(ps[i].items())),
                self._alloc.get(job.job_id),
            )
        if np.any(used > cluster.capacity + 1e-6):
            return None
        return out
