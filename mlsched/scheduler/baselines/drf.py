"""DRF: dominant-resource fairness by progressive filling (spec 001 §5.2 item 2).

Every job is admitted unless its ``min_workers`` workers and their PSs can never fit the
empty cluster (rejected as infeasible). At each slot that follows a job arrival or
completion, the worker and PS counts of **all** active jobs are recomputed from zero:

1. every job's first step is ``min_workers`` workers plus ``ps_needed(min_workers)`` PSs, a
   gang that fits whole or not at all (a job below ``min_workers`` gets nothing);
2. then, repeatedly, the active job with the smallest dominant share that can still grow
   gets one more worker, plus the PSs that keep ``Z >= ps_needed(Y)`` (all-reduce jobs
   have none); a job whose next step does not fit, or that reached ``worker_cap``, stops
   growing. Ties go by arrival order.

Every job starts at share 0, so step 1 runs over the jobs in arrival order before any job
gets a second step, exactly as progressive filling from zero would do it.

The dominant share of a job is its largest share of any resource. When no server hosts
both workers and PSs (separate pools, as in spec 001) the shares are per pool, 2R
dimensions: worker-pool resource r and PS-pool resource r, each over that pool's total.
Otherwise it is over the R cluster totals, workers and PSs added up.

Tasks are placed as they are granted, one at a time, so the counts always fit: first on
the servers the job used in the previous allocation (up to its previous count there, so a
job whose counts did not change keeps its placement and is not restarted), then
round-robin with one cyclic pointer per pool (spec 001 §5.2), which moves only when a
step succeeds and looks first for room that no running job will come back to. A first
step round-robin cannot place on an empty cluster is placed by
:func:`~mlsched.scheduler.placement.pack` (what admission checked), so an admitted job
always starts once it is first in line. Between events the allocation is returned
unchanged.

``one_ps_host=True`` keeps all of a job's PSs on the server of its first (spec 002's
(2i), AMB-6): a step whose PS does not fit there is refused and the job stops growing.

``placement="ring"`` is spec 003's DRF (§5 "Baselines"), for ring-all-reduce jobs only (a
PS job is rejected as infeasible): progressive filling from zero as above, each step giving
one more worker (the first step ``min_workers``) to the job with the smallest dominant share
whose enlarged ring still places under P0 with its hop reservations
(:mod:`mlsched.scheduler.ring_placement`); the job's whole ring is placed anew at each step,
and a job whose next ring does not place keeps the last one and stops growing. The dominant
share adds a bandwidth dimension: the Gbit/s its ring reserves, summed over links, over the
links' total capacity. At the count it had before, a job gets its previous placement back
when that still fits; previous placements are reserved until their job reaches that count
(or stops growing), P0 looking outside them first, so a job whose count did not change is
not restarted. Spec 003 re-plans every slot; the plan depends only on the active jobs, so
re-planning at arrivals and completions gives the same allocations.
"""

from __future__ import annotations

import heapq
import logging
from typing import Any

import numpy as np

from mlsched.core.allocation import Admission, Placement, RejectKind
from mlsched.core.cluster import Cluster
from mlsched.core.job import JobSpec
from mlsched.scheduler.baselines.common import check_one_ps_host
from mlsched.scheduler.baselines.replan import ReplanPolicy
from mlsched.scheduler.baselines.taskfill import DemandTable, JobDemand, Screen, TaskFiller
from mlsched.scheduler.baselines.taskgrow import JobTasks, grow, pack_whole
from mlsched.scheduler.placement import EmptyFit
from mlsched.scheduler.ring_placement import (
    RingLedger,
    check_placement,
    ring_infeasible,
    ring_link_load,
)
from mlsched.scheduler.view import ClusterView

__all__ = ["DrfPolicy", "dominant_share_units"]

log = logging.getLogger(__name__)


def dominant_share_units(cluster: Cluster) -> tuple[bool, np.ndarray, np.ndarray]:
    """(separate pools?, 1/total of the worker dimensions, 1/total of the PS dimensions).

    With separate pools the worker dimensions are the worker pool's totals and the PS
    dimensions the PS pool's; otherwise both are the cluster totals. A resource a pool
    lacks counts 0 (no job can hold any of it there).
    """
    cap = cluster.capacity
    separate = not set(cluster.worker_servers) & set(cluster.ps_servers)
    if separate:
        w_tot = cap[list(cluster.worker_servers)].sum(axis=0)
        p_tot = (
            cap[list(cluster.ps_servers)].sum(axis=0)
            if cluster.ps_servers
            else np.zeros(cap.shape[1])
        )
    else:
        w_tot = p_tot = cap.sum(axis=0)

    def inv(t: np.ndarray) -> np.ndarray:
        return np.divide(1.0, t, out=np.zeros_like(t, dtype=float), where=t > 0)

    return separate, inv(w_tot), inv(p_tot)


class DrfPolicy(ReplanPolicy[JobDemand]):
    name = "drf"
    ring_placement = True
    description = (
        "dominant-resource fairness: progressive filling at each arrival and "
        "completion, round-robin placement"
    )

    def __init__(
        self, *, placement: str = "default", one_ps_host: bool = False, **options: Any
    ) -> None:
        super().__init__(**options)
        self.placement = check_placement(placement)
        self.one_ps_host = check_one_ps_host(one_ps_host)
        self._table: DemandTable | None = None
        self._units: tuple[bool, np.ndarray, np.ndarray] | None = None
        self._next_worker = 0
        self._next_ps = 0
        self._ring: RingLedger | None = None
        self._fits_empty = EmptyFit()
        self._unit_shares: dict[JobDemand, tuple[float, float]] = {}
        self._bw_unit = 0.0  # 1 / total link capacity (ring mode's bandwidth dimension)

    def _on_bind(self, cluster: Cluster) -> None:
        self._table = DemandTable(len(cluster.resource_names))
        self._units = dominant_share_units(cluster)
        if self.placement == "ring":
            self._ring = RingLedger(cluster)
            total = float(cluster.links.capacity.sum())
            self._bw_unit = 1.0 / total if total > 0 else 0.0

    def on_arrival(self, job: JobSpec, view: ClusterView) -> Admission:
        filler = self._bind(view.cluster)
        if self._ring is not None:
            why = ring_infeasible(job, view.cluster, job.min_workers)
            if why:
                return Admission.reject(RejectKind.INFEASIBLE, why)
        elif not self._fits_empty(job, view.cluster, one_ps_host=self.one_ps_host):
            return Admission.reject(
                RejectKind.INFEASIBLE,
                f"{job.min_workers} workers and their PSs never fit the cluster",
            )
        dem = filler.demand(job, self._seq, self.one_ps_host)
        assert self._table is not None
        self._table.add(dem, job.min_workers, job.ps_needed(job.min_workers))
        self._add(job.job_id, dem)
        return Admission.admit(reason="admitted; counts by progressive filling")

    def _plan(self, slot: int, view: ClusterView) -> dict[str, Placement]:
        plan = self._ring_refill() if self._ring is not None else self._refill()
        return {j: p for j, p in plan.items() if j in view}

    def dominant_share(self, job: JobSpec, workers: int, ps: int) -> float:
        """The dominant share of ``workers`` workers and ``ps`` PSs of ``job``."""
        if self._filler is None:
            raise RuntimeError("dominant_share() needs a cluster: call setup() first")
        return self._share(self._filler.demand(job, 0), workers, ps)

    def _share(self, d: JobDemand, y: int, z: int) -> float:
        assert self._units is not None
        separate, w_unit, p_unit = self._units
        if separate:
            units = self._unit_shares.get(d)
            if units is None:  # one worker's and one PS's share: once per job, not per step
                units = float((d.worker * w_unit).max()), float((d.ps * p_unit).max())
                if len(self._unit_shares) > 4 * len(self._jobs) + 64:
                    self._unit_shares.clear()  # finished jobs' entries: bounded memory
                self._unit_shares[d] = units
            return max(y * units[0], z * units[1])
        return float((y * d.worker * w_unit + z * d.ps * p_unit).max())

    def _round_robin(self, f: TaskFiller, tasks: JobTasks, is_worker: bool) -> int:
        servers, ordered = tasks.dem.servers(is_worker)
        demand = tasks.dem.worker if is_worker else tasks.dem.ps
        if is_worker:
            s = f.round_robin(servers, ordered, demand, self._next_worker)
            if s >= 0:
                self._next_worker = s + 1
        else:
            s = f.round_robin(servers, ordered, demand, self._next_ps)
            if s >= 0:
                self._next_ps = s + 1
        return s

    def _grow(self, tasks: JobTasks, dy: int, dz: int) -> bool:
        """One step for a job; the round-robin pointers move only when it succeeds."""
        assert self._filler is not None
        pointers = self._next_worker, self._next_ps
        if grow(self._filler, tasks, dy, dz, self._round_robin) is not None:
            return True
        self._next_worker, self._next_ps = pointers
        return False

    def _refill(self) -> dict[str, Placement]:
        """Progressive filling from zero over every active job (see the module docstring)."""
        assert self._filler is not None and self._table is not None
        f = self._filler
        f.reset()
        jobs = list(self._jobs.values())
        tasks: dict[int, JobTasks] = {}  # jobs that ran before (reserved) or get a step
        for i, d in enumerate(jobs):
            prev = self._alloc.get(d.job.job_id)
            if prev is not None:
                tasks[i] = JobTasks(d, prev)
        JobTasks.reserve_all(f, tasks.values())
        screen = Screen(f, self._table, [d.seq for d in jobs])
        heap: list[tuple[float, int, int]] = []
        taken = False
        i = screen.next(-1)
        while i >= 0:  # step 1: every share is 0, so arrival order
            d = jobs[i]
            t = tasks.get(i) or JobTasks(d, None)
            first, first_ps = (int(n) for n in self._table.request[d.seq])
            if self._grow(t, first, first_ps) or (f.empty and pack_whole(f, t, first, first_ps)):
                tasks[i] = t
                heap.append((self._share(d, t.y, t.z), d.seq, i))
                taken = True
            else:
                t.release(f)
                if taken:
                    screen.refresh(i + 1)
                    taken = False
            i = screen.next(i)
        for i in [i for i, t in tasks.items() if not t.y]:  # screened out: no first step
            tasks.pop(i).release(f)
        heapq.heapify(heap)
        while heap:  # step 2: +1 worker to the smallest dominant share that can grow
            _, seq, i = heapq.heappop(heap)
            t = tasks[i]
            job = t.dem.job
            dz = max(0, job.ps_needed(t.y + 1) - t.z) if job.uses_ps else 0
            if t.y < job.worker_cap and self._grow(t, 1, dz):
                heapq.heappush(heap, (self._share(t.dem, t.y, t.z), seq, i))
            else:
                t.release(f)  # it stops growing: its reservations go back to the others
        out = {
            t.dem.job.job_id: t.placement(self._alloc.get(t.dem.job.job_id)) for t in tasks.values()
        }
        log.debug("[drf] refilled %d active jobs: %d running", len(jobs), len(out))
        return out

    def _ring_share(self, d: JobDemand, placement: Placement) -> float:
        """Dominant share with the bandwidth dimension (ring mode): the workers' largest
        share of any resource, or the ring's reserved Gbit/s over the links' total."""
        ring = self._ring
        assert ring is not None
        nodes = placement.n_workers * self._share(d, 1, 0)
        bw = sum(ring_link_load(ring.cluster, d.job, placement).values()) * self._bw_unit
        return max(nodes, bw)

    def _ring_refill(self) -> dict[str, Placement]:
        """Progressive filling from zero with P0 rings (ring mode; module docstring)."""
        ring = self._ring
        assert ring is not None
        ring.reset()
        jobs = list(self._jobs.values())
        before: dict[int, Placement] = {}  # previous placements, reserved until reached
        for i, d in enumerate(jobs):
            prev = self._alloc.get(d.job.job_id)
            if prev is not None:
                before[i] = prev
                ring.reserve(d.job, prev)
        placed: dict[int, Placement] = {}
        heap = [(0.0, d.seq, i) for i, d in enumerate(jobs)]  # arrival order: a heap
        while heap:
            _, seq, i = heapq.heappop(heap)
            job = jobs[i].job
            current = placed.get(i)
            k = job.min_workers if current is None else current.n_workers + 1
            grown = None
            if k <= job.worker_cap:
                if current is not None:
                    ring.release(job, current)  # the enlarged ring is placed anew
                prev = before.get(i)
                if prev is not None and prev.n_workers == k:
                    # Its previous count: its previous placement when that still fits, so
                    # a job whose count did not change is not restarted.
                    ring.reserve(job, before.pop(i), -1.0)
                    grown = prev if ring.take(job, prev) else None
                if grown is None:
                    grown = ring.place(job, k)
                if grown is None and current is not None:
                    ring.take(job, current)  # what it gave back is still free
            if grown is None:  # it stops growing
                if i in before:
                    ring.reserve(job, before.pop(i), -1.0)
                continue
            placed[i] = grown
            heapq.heappush(heap, (self._ring_share(jobs[i], grown), seq, i))
        out = {jobs[i].job.job_id: p for i, p in placed.items()}
        log.debug("[drf] ring refill of %d active jobs: %d running", len(jobs), len(out))
        return out
