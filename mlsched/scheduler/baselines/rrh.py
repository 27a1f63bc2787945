"""RRH: the risk-reward heuristic (spec 001 §5.2 item 3, with the spec's concrete rule).

The paper's baseline (its ref. [34], likely Irwin, Grit & Chase, HPDC'04) admits a job iff
its utility minus the *delay cost* its admission causes exceeds a threshold, and at each
arrival or completion lets every unfinished job either continue with the same counts or
pause, by its future utility gain. The spec's recommended rule, implemented here:

**Counts.** Fixed at arrival by :func:`~mlsched.scheduler.baselines.common.fixed_counts`
(the user's request, else drawn like FIFO's; options ``max_workers``/``max_ps``, default
30); all-reduce jobs have no PS. A job whose counts can never fit the empty cluster is
rejected as infeasible.

**Estimates.** A job's remaining duration is ``ceil(remaining work / rate)`` whole slots,
``rate`` being the work units per slot of its counts by the engine's runtime model
(``view.rate_per_slot``) at its current placement, or, for a job not running, at the
placement admission found for it (the spec's ``ceil(Work_i / W_i)``, in the runtime
model's units). Its *gain* at a completion slot ``C`` is ``f(C - a)``, and 0 when ``C`` is
at or past the horizon (a job not finished by T earns 0, spec 001 §5.2). Its *reward
density* is ``gain(now + d - 1) / (d * dominant share)``: utility if it ran from now on,
per unit of resource-time (``d`` the remaining slots; the dominant share of its fixed
counts is DRF's, :func:`~mlsched.scheduler.baselines.drf.dominant_share_units`).

**List schedule.** The projected completion slots of a set of jobs come from a simulated
list schedule on *aggregate* capacity (per pool when the pools are separate, as for DRF's
shares): jobs ordered by reward density (highest first, ties by arrival), each starting at
the first event where its whole demand fits the free aggregate capacity, and running its
``d`` slots without preemption.

**Admission.** The delay cost of a newcomer is the utility the admitted unfinished jobs lose
when it is inserted into that list schedule: the sum over them of ``gain`` without it minus
``gain`` with it (never below 0 per job). The job is admitted iff its own projected gain
minus the delay cost is above ``threshold`` (default 0); otherwise it is rejected as
unprofitable.

**Pause rule.** At the slot following each admission or completion, the unfinished jobs are
ranked by reward density and run greedily, whole with their fixed counts, while they fit
(a job that does not fit is skipped and later ones may still run); the others pause, and
so does every job with no gain left (``gain(now + d - 1) == 0``, e.g. it can no longer
finish by the horizon). Between events the allocation is unchanged.

**Placement.** Round-robin with one cyclic pointer per pool, a task at a time, as DRF's; a
job that ran before first gets its previous servers back (its previous placement is
reserved until it is reached in the ranking, so a newcomer ranked ahead of it goes
elsewhere first), so a continuing job keeps its placement. A job round-robin cannot place
on an empty cluster is placed by :func:`~mlsched.scheduler.placement.pack` (what admission
checked), so an admitted job always starts once it is first in line.
"""

from __future__ import annotations

import heapq
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mlsched.core.allocation import Admission, Placement, RejectKind
from mlsched.core.cluster import Cluster
from mlsched.core.job import JobSpec
from mlsched.scheduler.baselines.common import fixed_counts
from mlsched.scheduler.baselines.drf import dominant_share_units
from mlsched.scheduler.baselines.replan import ReplanPolicy
from mlsched.scheduler.baselines.taskfill import JobDemand, TaskFiller
from mlsched.scheduler.baselines.taskgrow import JobTasks, grow, pack_whole
from mlsched.scheduler.placement import can_ever_run, pack
from mlsched.scheduler.view import CapacityLedger, ClusterView

__all__ = ["AggregateCapacity", "RrhPolicy", "list_schedule"]

log = logging.getLogger(__name__)

_EPS = 1e-9


class AggregateCapacity:
    """Whole-cluster capacity as one vector: per pool (worker-pool r, PS-pool r) when no
    server hosts both, else the cluster totals; and a job's demand and dominant share in
    the same dimensions (the ones DRF uses)."""

    def __init__(self, cluster: Cluster) -> None:
        self.separate, self._w_unit, self._p_unit = dominant_share_units(cluster)
        cap = cluster.capacity
        if self.separate:
            w_tot = cap[list(cluster.worker_servers)].sum(axis=0)
            p_tot = (
                cap[list(cluster.ps_servers)].sum(axis=0)
                if cluster.ps_servers
                else np.zeros(cap.shape[1])
            )
            self.capacity = np.concatenate([w_tot, p_tot])
        else:
            self.capacity = cap.sum(axis=0)

    def demand(self, dem: JobDemand, workers: int, ps: int) -> np.ndarray:
        if self.separate:
            return np.concatenate([workers * dem.worker, ps * dem.ps])
        return workers * dem.worker + ps * dem.ps

    def share(self, dem: JobDemand, workers: int, ps: int) -> float:
        if self.separate:
            return max(
                workers * float((dem.worker * self._w_unit).max()),
                ps * float((dem.ps * self._p_unit).max()),
            )
        return float(((workers * dem.worker + ps * dem.ps) * self._w_unit).max())


def list_schedule(
    start: int, jobs: Sequence[tuple[int, np.ndarray]], capacity: np.ndarray
) -> list[float]:
    """Completion slots of a list schedule on aggregate ``capacity`` from slot ``start``.

    ``jobs`` are (duration in whole slots, demand vector) in priority order. At each event
    (``start``, then every finish) the waiting jobs are scanned in order and each one whose
    demand fits the free capacity starts; a job started at slot ``s`` completes in slot
    ``s + d - 1`` and frees its demand at ``s + d``. A job that never fits gets ``inf``.
    """
    free = np.array(capacity, dtype=float)
    done: list[float] = [math.inf] * len(jobs)
    waiting = list(range(len(jobs)))
    running: list[tuple[int, int]] = []  # (slot its demand is freed, job index)
    t = start
    while waiting:
        left = []
        for i in waiting:
            d, need = jobs[i]
            if bool((need <= free + _EPS).all()):
                free -= need
                done[i] = t + d - 1
                heapq.heappush(running, (t + d, i))
            else:
                left.append(i)
        waiting = left
        if not running or not waiting:
            break
        t, i = heapq.heappop(running)
        free += jobs[i][1]
        while running and running[0][0] == t:
            free += jobs[heapq.heappop(running)[1]][1]
    return done


@dataclass
class _Job:
    """What RRH keeps per admitted job."""

    dem: JobDemand
    workers: int
    ps: int
    reference: Placement  # where admission found room: the rate estimate of a waiting job
    share: float


class RrhPolicy(ReplanPolicy[_Job]):
    name = "rrh"
    description = (
        "risk-reward heuristic: admit if utility beats the delay cost it causes; "
        "fixed counts, run or pause by reward density"
    )

    def __init__(
        self,
        *,
        max_workers: int = 30,
        max_ps: int = 30,
        threshold: float = 0.0,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        for name, value in (("max_workers", max_workers), ("max_ps", max_ps)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise TypeError(f"{name} must be an integer >= 1, got {value!r}")
        if (
            isinstance(threshold, bool)
            or not isinstance(threshold, (int, float))
            or not math.isfinite(threshold)
        ):
            raise TypeError(f"threshold must be a finite number, got {threshold!r}")
        self.max_workers = max_workers
        self.max_ps = max_ps
        self.threshold = float(threshold)
        self._agg: AggregateCapacity | None = None
        self._next_worker = 0
        self._next_ps = 0

    def _on_bind(self, cluster: Cluster) -> None:
        self._agg = AggregateCapacity(cluster)

    def counts(self, job: JobSpec) -> tuple[int, int]:
        """The fixed (workers, PSs) this policy runs ``job`` with."""
        seed = self.context.seed if self.context else 0
        return fixed_counts(job, seed, max_workers=self.max_workers, max_ps=self.max_ps)

    # Estimates ---------------------------------------------------------------------------
    @staticmethod
    def gain(job: JobSpec, completion: float, horizon: int | None) -> float:
        """Utility of finishing in slot ``completion``: 0 at or past the horizon."""
        if not math.isfinite(completion) or (horizon is not None and completion >= horizon):
            return 0.0
        if job.utility.over_progress:
            return job.utility(job.total_work)
        return job.utility(completion - job.arrival_slot)

    def _slots_left(self, view: ClusterView, job_id: str, entry: _Job, work: float) -> int:
        placement = self._alloc.get(job_id, entry.reference)
        rate = view.rate_per_slot(entry.dem.job, placement)
        if rate <= 0:
            return 1 << 30
        return max(1, math.ceil(work / rate - _EPS))

    def _ranked(
        self, view: ClusterView, extra: tuple[str, _Job, int] | None = None
    ) -> list[tuple[str, _Job, int, float]]:
        """Unfinished jobs with gain left, by reward density (highest first, ties by
        arrival): (job id, entry, remaining slots, gain if run from now on)."""
        rows: list[tuple[float, int, str, _Job, int, float]] = []
        items: list[tuple[str, _Job, int]] = [
            (j, e, self._slots_left(view, j, e, view[j].remaining))
            for j, e in self._jobs.items()
            if j in view
        ]
        if extra is not None:
            items.append(extra)
        for job_id, entry, d in items:
            g = self.gain(entry.dem.job, view.slot + d - 1, view.horizon)
            if g <= 0:
                continue  # no gain left: paused
            density = g / (d * max(entry.share, _EPS))
            rows.append((-density, entry.dem.seq, job_id, entry, d, g))
        rows.sort(key=lambda r: (r[0], r[1]))
        return [(r[2], r[3], r[4], r[5]) for r in rows]

    def projected(
        self, view: ClusterView, extra: tuple[str, _Job, int] | None = None
    ) -> dict[str, float]:
        """Projected gain of every unfinished job (and ``extra``) under the list schedule."""
        assert self._agg is not None
        ranked = self._ranked(view, extra)
        jobs = [(d, self._agg.demand(e.dem, e.workers, e.ps)) for _, e, d, _ in ranked]
        done = list_schedule(view.slot, jobs, self._agg.capacity)
        return {
            job_id: self.gain(e.dem.job, c, view.horizon)
            for (job_id, e, _, _), c in zip(ranked, done, strict=True)
        }

    # Policy ------------------------------------------------------------------------------
    def on_arrival(self, job: JobSpec, view: ClusterView) -> Admission:
        f = self._bind(view.cluster)
        assert self._agg is not None
        w, p = self.counts(job)
        reference = (
            pack(job, w, p, CapacityLedger(view.cluster))
            if can_ever_run(job, view.cluster, w)
            else None
        )
        rate = view.rate_per_slot(job, reference) if reference is not None else 0.0
        if reference is None or rate <= 0:
            return Admission.reject(
                RejectKind.INFEASIBLE, f"{w} workers and {p} PSs never fit the cluster"
            )
        dem = f.demand(job, self._seq)
        entry = _Job(dem, w, p, reference, self._agg.share(dem, w, p))
        left = max(0.0, job.total_work - view.done_work(job.job_id))  # admitted again
        d = max(1, math.ceil(left / rate - _EPS))
        before = self.projected(view)
        after = self.projected(view, (job.job_id, entry, d))
        cost = sum(max(0.0, g - after.get(j, 0.0)) for j, g in before.items())
        reward = after.get(job.job_id, 0.0)
        if not reward - cost > self.threshold:
            return Admission.reject(
                RejectKind.UNPROFITABLE,
                f"utility {reward:.4g} minus delay cost {cost:.4g} is not above {self.threshold:g}",
            )
        self._add(job.job_id, entry)
        return Admission.admit(
            reason=f"utility {reward:.4g} minus delay cost {cost:.4g}; {w} workers, {p} PSs"
        )

    def _plan(self, slot: int, view: ClusterView) -> dict[str, Placement]:
        return self._run_or_pause(view)

    def _round_robin(self, f: TaskFiller, tasks: JobTasks, is_worker: bool) -> int:
        servers, ordered = tasks.dem.servers(is_worker)
        demand = tasks.dem.worker if is_worker else tasks.dem.ps
        start = self._next_worker if is_worker else self._next_ps
        s = f.round_robin(servers, ordered, demand, start)
        if s >= 0:
            if is_worker:
                self._next_worker = s + 1
            else:
                self._next_ps = s + 1
        return s

    def _run_or_pause(self, view: ClusterView) -> dict[str, Placement]:
        """The pause rule (see the module docstring)."""
        f = self._filler
        assert f is not None
        f.reset()
        ranked = self._ranked(view)
        tasks: dict[str, JobTasks] = {}
        for job_id, entry, _, _ in ranked:
            prev = self._alloc.get(job_id)
            tasks[job_id] = JobTasks(entry.dem, prev)
        JobTasks.reserve_all(f, tasks.values())
        out: dict[str, Placement] = {}
        for job_id, entry, _, _ in ranked:
            t = tasks[job_id]
            pointers = self._next_worker, self._next_ps
            ok = grow(f, t, entry.workers, entry.ps, self._round_robin) is not None
            if not ok:
                self._next_worker, self._next_ps = pointers
                ok = f.empty and pack_whole(f, t, entry.workers, entry.ps)
            if ok:
                out[job_id] = t.placement(self._alloc.get(job_id))
            t.release(f)  # placed or paused: its reservations go back to the others
        log.debug(
            "[rrh] slot %d: %d of %d unfinished jobs run", view.slot, len(out), len(self._jobs)
        )
        return out
