"""Optimus-style greedy allocator: the next task goes where remaining time falls the most.

Optimus (Peng et al., EuroSys'18) sizes each job by the marginal gain of one more worker
or PS, using a fitted model of its speed. This baseline keeps that greedy and uses the
engine's runtime model (``view.runtime``). Every job is admitted unless ``min_workers``
workers and their PSs can never fit the empty cluster (rejected as infeasible).

**When.** The allocation is recomputed at each slot that follows a job arrival or
completion, from zero, and returned unchanged in between (no needless re-layout; the
runtime model's refits between events do not trigger a re-plan).

**Rule.** Every active job starts at 0 tasks. Then, until nothing fits:

* a job with no worker can only take its *first step*: ``min_workers`` workers and
  ``ps_needed(min_workers)`` PSs, all or nothing. Its gain is treated as a large finite
  number, larger than any other, so first steps come before every other increment, in
  order of smallest total work (``JobSpec.total_work``), ties by arrival;
* a job with workers has up to two candidate increments: +1 worker, with PSs topped up to
  ``ps_needed(Y + 1)`` (up to ``worker_cap`` workers), and, for a PS job, +1 PS (up to
  ``max(Y, ps_needed(Y))`` PSs);
* ``gain = remaining_time(current) - remaining_time(candidate)``, where
  ``remaining_time(p) = JobView.remaining / view.runtime.throughput(job, p)`` at the
  placement ``p`` the tasks would get; ``cost = sum over resources r of added demand_r /
  cluster total_r``. The candidate with the largest ``gain / cost`` wins (ties: the
  earlier arrival, then the worker increment); candidates with ``gain <= 0`` are never
  taken, so a job stops growing where one more task would not speed it up.

At most ``max_increments`` increments after the first steps are made per re-plan (a time
bound for very large clusters; the default is far above what the benchmark uses).

**Placement.** Tasks are packed as :func:`mlsched.scheduler.placement.pack` packs them: a
job's next worker goes to a server it already uses, else to the server with the most free
capacity; a PS goes next to the job's workers when that server hosts PSs, then next to
its other PSs, else to the PS server with the most free capacity, so small PS jobs end up
co-located. Before any of that, a task goes back to a server the job used in the
previous allocation (up to its count there), so a job whose counts did not change keeps
its placement and is not restarted; and the other choices prefer room that no running
job will come back to (the previous placements are reserved at the start of a re-plan),
so a small newcomer planned first does not push a running job off its servers. A first
step these rules cannot place on an empty cluster is placed by ``pack`` itself (what
admission checked), so an admitted job always starts once it comes first.
"""

from __future__ import annotations

import heapq
import logging
import math
from typing import Any

import numpy as np

from mlsched.core.allocation import Admission, Placement, RejectKind
from mlsched.core.cluster import Cluster
from mlsched.core.job import JobSpec
from mlsched.scheduler.baselines.replan import ReplanPolicy
from mlsched.scheduler.baselines.taskfill import DemandTable, JobDemand, Screen, TaskFiller
from mlsched.scheduler.baselines.taskgrow import JobTasks, grow, pack_whole, undo
from mlsched.scheduler.placement import EmptyFit
from mlsched.scheduler.view import ClusterView

__all__ = ["OptimusPolicy", "packed_server"]

log = logging.getLogger(__name__)

_WORKER, _PS = 0, 1  # candidate kinds; the worker increment wins ties


def packed_server(f: TaskFiller, tasks: JobTasks, is_worker: bool) -> int:
    """Where the job's next task goes when packing (see the module docstring); -1: nowhere.

    Unreserved room comes first (a server the job already uses, else the most free one),
    so that a task does not take the place of a running job planned after it."""
    dem = tasks.dem
    if is_worker:
        demand, servers, own = dem.worker, dem.worker_servers, list(tasks.w)
    else:
        demand, servers = dem.ps, dem.ps_servers
        own = [s for s in tasks.w if f.hosts_ps[s]] + list(tasks.p)
    for s in own:
        if f.fits(s, demand, spare=True):
            return s
    if f.has_reserved:
        s = f.most_free(servers, demand, spare_only=True)
        if s >= 0:
            return s
        for s in own:
            if f.fits(s, demand):
                return s
    return f.most_free(servers, demand)


class _Candidate:
    """A job's best increment: its ratio, the servers it was evaluated on, its new time."""

    __slots__ = ("dy", "dz", "kind", "new_time", "ratio", "servers")

    def __init__(
        self,
        ratio: float,
        kind: int,
        dy: int,
        dz: int,
        servers: list[tuple[bool, int]],
        new_time: float,
    ) -> None:
        self.ratio = ratio
        self.kind = kind
        self.dy = dy
        self.dz = dz
        self.servers = servers
        self.new_time = new_time


class OptimusPolicy(ReplanPolicy[JobDemand]):
    name = "optimus"
    description = (
        "Optimus-style greedy: each next worker or PS goes to the job whose "
        "estimated remaining time falls most per unit of resource"
    )

    def __init__(self, *, max_increments: int = 4096, **options: Any) -> None:
        super().__init__(**options)
        if not isinstance(max_increments, int) or max_increments < 0:
            raise TypeError(f"max_increments must be an integer >= 0, got {max_increments!r}")
        self.max_increments = max_increments
        self._cost: dict[str, tuple[float, float]] = {}  # normalised cost of a worker, a PS
        self._table: DemandTable | None = None
        self._unit = np.zeros(0)
        self._fits_empty = EmptyFit()

    def _on_bind(self, cluster: Cluster) -> None:
        self._table = DemandTable(len(cluster.resource_names))
        total = cluster.total
        self._unit = np.divide(1.0, total, out=np.zeros_like(total, dtype=float), where=total > 0)

    def on_arrival(self, job: JobSpec, view: ClusterView) -> Admission:
        f = self._bind(view.cluster)
        if not self._fits_empty(job, view.cluster):
            return Admission.reject(
                RejectKind.INFEASIBLE,
                f"{job.min_workers} workers and their PSs never fit the cluster",
            )
        dem = f.demand(job, self._seq)
        assert self._table is not None
        self._table.add(dem, job.min_workers, job.ps_needed(job.min_workers))
        self._cost[job.job_id] = (float(dem.worker @ self._unit), float(dem.ps @ self._unit))
        self._add(job.job_id, dem)
        return Admission.admit(reason="admitted; sized greedily by marginal gain")

    def _forget(self, job_id: str) -> None:
        self._cost.pop(job_id, None)

    def _plan(self, slot: int, view: ClusterView) -> dict[str, Placement]:
        return self._greedy(view)

    # The greedy ---------------------------------------------------------------------------
    def _peek(self, t: JobTasks, is_worker: bool) -> int:
        """The server :func:`grow` would give one more task of the job now; -1: none."""
        assert self._filler is not None
        demand = t.dem.worker if is_worker else t.dem.ps
        for s in t.sticky_w if is_worker else t.sticky_p:
            if self._filler.fits(s, demand):
                return s
        return packed_server(self._filler, t, is_worker)

    def _best(
        self, view: ClusterView, t: JobTasks, rem: float, cur_time: float
    ) -> _Candidate | None:
        """The job's best positive-gain increment at the current free capacity, or None."""
        assert self._filler is not None
        f = self._filler
        job = t.dem.job
        w_cost, p_cost = self._cost[job.job_id]
        best: _Candidate | None = None
        steps = []
        if t.y < job.worker_cap:
            steps.append((_WORKER, 1, max(0, job.ps_needed(t.y + 1) - t.z)))
        if job.uses_ps and t.z < max(t.y, job.ps_needed(t.y)):
            steps.append((_PS, 0, 1))
        for kind, dy, dz in steps:
            if dy + dz == 1:  # one task: where it would go, without taking it
                s = self._peek(t, dy == 1)
                if s < 0:
                    continue
                taken = [(dy == 1, s)]
                w, p = dict(t.w), dict(t.p)
                counts = w if dy else p
                counts[s] = counts.get(s, 0) + 1
                placement = Placement(tuple(w.items()), tuple(p.items()))
            else:
                step = grow(f, t, dy, dz, packed_server)
                if step is None:
                    continue
                taken = step.taken
                placement = Placement(tuple(t.w.items()), tuple(t.p.items()))
                undo(f, t, step)
            thr = view.runtime.throughput(job, placement)
            if thr <= 0:
                continue
            new_time = rem / thr
            gain = cur_time - new_time
            if not gain > 0:
                continue
            ratio = gain / max(dy * w_cost + dz * p_cost, 1e-12)
            if best is None or ratio > best.ratio:
                best = _Candidate(ratio, kind, dy, dz, taken, new_time)
        return best

    def _greedy(self, view: ClusterView) -> dict[str, Placement]:
        f, table = self._filler, self._table
        assert f is not None and table is not None, "setup() binds the cluster"
        f.reset()
        jobs = sorted(
            (d for d in self._jobs.values() if d.job.job_id in view),
            key=lambda d: (d.job.total_work, d.seq),
        )
        tasks: dict[int, JobTasks] = {}  # jobs that ran before (reserved) or get a step
        for i, d in enumerate(jobs):
            prev = self._alloc.get(d.job.job_id)
            if prev is not None:
                tasks[i] = JobTasks(d, prev)
        JobTasks.reserve_all(f, tasks.values())
        screen = Screen(f, table, [d.seq for d in jobs])
        taken = False
        i = screen.next(-1)
        while i >= 0:  # first steps: smallest total work first
            d = jobs[i]
            t = tasks.get(i) or JobTasks(d, None)
            first, first_ps = (int(n) for n in table.request[d.seq])
            if grow(f, t, first, first_ps, packed_server) is not None or (
                f.empty and pack_whole(f, t, first, first_ps)
            ):
                tasks[i] = t
                taken = True
            else:
                t.release(f)
                tasks.pop(i, None)
                if taken:
                    screen.refresh(i + 1)
                    taken = False
            i = screen.next(i)
        for i in [i for i, t in tasks.items() if not t.y]:  # screened out: no first step
            tasks.pop(i).release(f)
        rem: dict[int, float] = {}
        cur: dict[int, float] = {}
        version: dict[int, int] = {}
        heap: list[tuple[float, int, int, int, int]] = []
        cands: dict[int, _Candidate] = {}

        def push(i: int) -> None:
            c = self._best(view, tasks[i], rem[i], cur[i])
            version[i] = version.get(i, 0) + 1
            if c is None:
                tasks[i].release(f)  # it stops growing: its reservations go back
            else:
                cands[i] = c
                heapq.heappush(heap, (-c.ratio, jobs[i].seq, c.kind, i, version[i]))

        for i, t in tasks.items():
            rem[i] = view[t.dem.job.job_id].remaining
            thr = view.runtime.throughput(t.dem.job, t.placement(None))
            cur[i] = rem[i] / thr if thr > 0 else math.inf
            push(i)
        made = 0
        while heap and made < self.max_increments:
            *_, i, ver = heapq.heappop(heap)
            if ver != version[i]:
                continue
            t, c = tasks[i], cands[i]
            step = grow(f, t, c.dy, c.dz, packed_server)
            if step is not None and step.taken != c.servers:
                undo(f, t, step)  # capacity moved since it was evaluated: re-evaluate
                step = None
            if step is not None:
                made += 1
                cur[i] = c.new_time
            push(i)
        out = {
            t.dem.job.job_id: t.placement(self._alloc.get(t.dem.job.job_id)) for t in tasks.values()
        }
        log.debug("[optimus] %d active jobs: %d running, %d increments", len(jobs), len(out), made)
        return out
