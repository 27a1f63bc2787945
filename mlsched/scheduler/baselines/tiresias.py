"""Tiresias-style LAS: least attained service first, fixed counts, preemptive (spec 003 §5).

Continuous LAS as spec 003 §5 "Baselines" defines it, rather than Tiresias' discretised
2D-LAS queues. Every job is admitted unless its fixed counts can never fit the empty
cluster (rejected as infeasible). Its counts are fixed at arrival with
:func:`~mlsched.scheduler.baselines.common.fixed_counts` (the user's request, else drawn
like FIFO's, PSs drawn or, with ``ps_rule="needed"``, the fewest the workers' bandwidth
needs; all-reduce jobs have no PS).

Each slot, from an empty cluster:

1. active jobs are sorted by attained service ascending, ties by arrival. Attained service
   is in GPU-slots: ``JobView.worker_slots`` times the job's GPUs per worker, or
   worker-slots for a job whose workers use no GPU;
2. in that order, each job is placed whole with its fixed counts if it fits; a job that
   does not fit is skipped this slot and later jobs may still be placed. Jobs left out are
   preempted.

Placement: a job that ran before first gets its previous placement back when that still
fits (so a job that keeps running is not re-laid-out). Otherwise P0 (spec 003 §5): one
server when one has room for all the workers (the best fit: the fewest spare worker
slots), else the servers of the rack with the most room, most room first, then the next
racks. PSs go next to the job's workers when those servers host PSs, else to the PS
server with the most free capacity. "Room" is first counted outside the places of the
jobs that ran in the previous slot (reserved at the start of the slot and released as
each is placed or skipped), so a newcomer sorted ahead of them does not push them off
their servers; only when that room is too small is all free capacity used. A job P0
cannot place on an empty cluster is placed by :func:`~mlsched.scheduler.placement.pack`
(what admission checked) when it is first in line. This default P0 reserves no link
bandwidth; ``placement="ring"`` is spec 003's LAS in full: ring-all-reduce jobs only (a PS
job is rejected as infeasible), each placed by P0 with its hop reservations and a ring
order (:mod:`mlsched.scheduler.ring_placement`): its previous placement first when its
servers and links still have room, P0 looking first outside the previous places (servers
and links) of the jobs that ran in the previous slot, as above; admission checks that P0
places the job on the empty cluster, so a job first in line always starts.

``one_ps_host=True`` puts all of a job's PSs on one server (spec 002's (2i), AMB-6): the
first of the job's worker servers that holds them all, else the PS server with the most
room among those that do.

Restart cost: preemption is what LAS does, and it is not free. The simulator charges
``TruthConfig.restart_s`` (checkpoint + restart) in every slot in which a job's placement
differs from its previous slot's, including a resume after a pause; on the testbed the
agents measure it. Keeping previous placements avoids the gratuitous part of it.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from mlsched.core.allocation import Admission, Allocation, Placement, RejectKind
from mlsched.core.cluster import Cluster
from mlsched.core.job import JobSpec
from mlsched.scheduler.baselines.common import (
    check_count_rules,
    check_one_ps_host,
    fixed_counts,
)
from mlsched.scheduler.baselines.replan import FillerPolicy
from mlsched.scheduler.baselines.taskfill import DemandTable, JobDemand, Screen, TaskFiller
from mlsched.scheduler.baselines.taskgrow import pack_placement
from mlsched.scheduler.ring_placement import RingLedger, check_placement, ring_infeasible
from mlsched.scheduler.view import ClusterView

__all__ = ["TiresiasPolicy", "p0_place"]

log = logging.getLogger(__name__)


def p0_place(
    f: TaskFiller, dem: JobDemand, n_workers: int, n_ps: int, rack_of: np.ndarray
) -> Placement | None:
    """Place a whole job by P0 (see the module docstring) and take it from ``f``; None,
    with ``f`` unchanged, when it does not fit. ``rack_of`` maps server -> rack number."""
    if n_ps:
        ps_room = f.fit_counts(dem.ps_servers, dem.ps)
        if int(ps_room.max() if dem.one_ps_host else ps_room.sum()) < n_ps:
            return None  # the PSs cannot fit even before the workers take their share
    servers = dem.worker_servers
    room = f.fit_counts(servers, dem.worker, spare=True)  # unreserved room first
    if int(room.sum()) < n_workers:
        room = f.fit_counts(servers, dem.worker)
    whole = np.flatnonzero(room >= n_workers)
    workers: dict[int, int] = {}
    if len(whole):
        workers[int(servers[whole[int(np.argmin(room[whole]))]])] = n_workers
    else:
        if int(room.sum()) < n_workers:
            return None
        racks = rack_of[servers]
        rack_room = np.bincount(racks, weights=room)
        order = np.lexsort((servers, -room, -rack_room[racks]))
        left = n_workers
        for k in order:
            if not left:
                break
            c = min(left, int(room[k]))
            if c > 0:
                workers[int(servers[k])] = c
                left -= c
    for s, c in workers.items():
        f.take(s, dem.worker, c)
    ps: dict[int, int] = {}
    near = [s for s in workers if f.hosts_ps[s]] if dem.job.uses_ps else []
    if dem.one_ps_host and n_ps:
        host = _one_ps_host(f, dem, n_ps, near)
        if host < 0:
            for w_s, c in workers.items():
                f.give(w_s, dem.worker, c)
            return None
        f.take(host, dem.ps, n_ps)
        return Placement(tuple(workers.items()), ((host, n_ps),))
    for _ in range(n_ps):
        s = next((s for s in near if f.fits(s, dem.ps)), -1)
        if s < 0:
            s = f.most_free(dem.ps_servers, dem.ps)
        if s < 0:
            for w_s, c in workers.items():
                f.give(w_s, dem.worker, c)
            for p_s, c in ps.items():
                f.give(p_s, dem.ps, c)
            return None
        f.take(s, dem.ps)
        ps[s] = ps.get(s, 0) + 1
    return Placement(tuple(workers.items()), tuple(ps.items()))


def _one_ps_host(f: TaskFiller, dem: JobDemand, n_ps: int, near: list[int]) -> int:
    """The server for all ``n_ps`` PSs: the first of the job's worker servers that holds
    them, else the PS server with the most free capacity among those that do; -1: none."""
    if near:
        servers = np.array(near, dtype=np.intp)
        holds = np.flatnonzero(f.fit_counts(servers, dem.ps) >= n_ps)
        if len(holds):
            return int(servers[holds[0]])
    room = f.fit_counts(dem.ps_servers, dem.ps)
    able = dem.ps_servers[room >= n_ps]
    return f.most_free(able, dem.ps) if len(able) else -1


def _reserve(f: TaskFiller, dem: JobDemand, placement: Placement, sign: int) -> None:
    for s, c in placement.workers:
        f.reserve(s, dem.worker, sign * c)
    for s, c in placement.ps:
        f.reserve(s, dem.ps, sign * c)


class TiresiasPolicy(FillerPolicy[JobDemand]):
    name = "tiresias"
    ring_placement = True
    description = (
        "Tiresias-style continuous LAS: least attained GPU service first, fixed counts, preemptive"
    )

    def __init__(
        self,
        *,
        max_workers: int = 30,
        max_ps: int = 30,
        ps_rule: str = "drawn",
        worker_rule: str = "drawn",
        placement: str = "default",
        one_ps_host: bool = False,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        for name, value in (("max_workers", max_workers), ("max_ps", max_ps)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise TypeError(f"{name} must be an integer >= 1, got {value!r}")
        check_count_rules(ps_rule, worker_rule)
        self.max_workers = max_workers
        self.max_ps = max_ps
        self.ps_rule = ps_rule
        self.worker_rule = worker_rule
        self.placement = check_placement(placement)
        self.one_ps_host = check_one_ps_host(one_ps_host)
        self._ring: RingLedger | None = None
        self._last: dict[str, Placement] = {}  # each job's latest placement
        self._running: set[str] = set()  # the jobs allocated in the previous slot
        self._gpus: dict[str, float] = {}  # GPUs per worker, 1 for GPU-less workers
        self._table: DemandTable | None = None
        self._rack_of = np.zeros(0, dtype=np.intp)

    def _on_bind(self, cluster: Cluster) -> None:
        self._table = DemandTable(len(cluster.resource_names))
        rack_no = {r: i for i, r in enumerate(cluster.racks)}
        self._rack_of = np.array([rack_no[s.rack] for s in cluster.servers], dtype=np.intp)
        if self.placement == "ring":
            self._ring = RingLedger(cluster)

    def counts(self, job: JobSpec) -> tuple[int, int]:
        """The fixed (workers, PSs) this policy runs ``job`` with."""
        seed = self.context.seed if self.context else 0
        return fixed_counts(
            job,
            seed,
            max_workers=self.max_workers,
            max_ps=self.max_ps,
            ps_rule=self.ps_rule,
            worker_rule=self.worker_rule,
        )

    def on_arrival(self, job: JobSpec, view: ClusterView) -> Admission:
        f = self._bind(view.cluster)
        w, p = self.counts(job)
        dem = f.demand(job, self._seq, self.one_ps_host)
        empty = TaskFiller(view.cluster)
        offered = view.cluster.offers(job.worker) and (
            not job.uses_ps or view.cluster.offers(job.ps)
        )
        placement = None
        if self._ring is not None:
            why = ring_infeasible(job, view.cluster, w)
            if why:
                return Admission.reject(RejectKind.INFEASIBLE, why)
            placement = RingLedger(view.cluster).place(job, w)
        elif offered:
            placement = p0_place(empty, dem, w, p, self._rack_of) or pack_placement(
                empty, dem, w, p
            )
        if placement is None:
            return Admission.reject(
                RejectKind.INFEASIBLE, f"{w} workers and {p} PSs never fit the cluster"
            )
        assert self._table is not None
        self._table.add(dem, w, p)
        self._add(job.job_id, dem)
        self._gpus[job.job_id] = job.worker["gpu"] or 1.0
        self._admitted(job, view, w, p, placement)
        return Admission.admit(reason=f"LAS with {w} workers, {p} PSs")

    def _admitted(
        self, job: JobSpec, view: ClusterView, workers: int, ps: int, empty: Placement
    ) -> None:
        """What a variant keeps of an admitted job: its fixed counts and the placement
        admission found for them on the empty cluster."""

    def release(self, job_id: str) -> None:
        self._jobs.pop(job_id, None)
        self._last.pop(job_id, None)
        self._running.discard(job_id)
        self._gpus.pop(job_id, None)

    def rank(self, view: ClusterView, job_id: str) -> tuple[float, ...]:
        """The sort key, smallest first (ties by arrival): attained service in GPU-slots
        (worker-slots for GPU-less workers)."""
        return (view[job_id].worker_slots * self._gpus[job_id],)

    def _ring_allocate(self, slot: int, view: ClusterView, ring: RingLedger) -> Allocation:
        """Ring mode: in rank order, the previous placement if its servers and links still
        have room, else P0 with the fixed count; a job that does not place waits. The jobs
        that ran in the previous slot have their places reserved until they are reached."""
        table = self._table
        assert table is not None
        jobs = [d for d in self._jobs.values() if d.job.job_id in view]
        jobs.sort(key=lambda d: (self.rank(view, d.job.job_id), d.seq))
        ring.reset()
        for d in jobs:
            if d.job.job_id in self._running:
                ring.reserve(d.job, self._last[d.job.job_id])
        out: dict[str, Placement] = {}
        for d in jobs:
            job_id = d.job.job_id
            prev = self._last.get(job_id)
            if job_id in self._running:
                ring.reserve(d.job, self._last[job_id], -1.0)
            placement = prev if prev is not None and ring.take(d.job, prev) else None
            if placement is None:
                placement = ring.place(d.job, int(table.request[d.seq][0]))
            if placement is not None:
                out[job_id] = self._last[job_id] = placement
        self._running = set(out)
        log.debug("[tiresias] ring slot %d: %d of %d active jobs run", slot, len(out), len(jobs))
        return Allocation(slot, out)

    def allocate(self, slot: int, view: ClusterView) -> Allocation:
        if self._ring is not None:
            return self._ring_allocate(slot, view, self._ring)
        f = self._filler
        table = self._table
        assert f is not None and table is not None, "setup() binds the cluster"
        jobs = [d for d in self._jobs.values() if d.job.job_id in view]
        jobs.sort(key=lambda d: (self.rank(view, d.job.job_id), d.seq))
        f.reset()
        for d in jobs:  # running jobs' places: jobs placed before them go elsewhere first
            if d.job.job_id in self._running:
                _reserve(f, d, self._last[d.job.job_id], 1)
        screen = Screen(f, table, [d.seq for d in jobs])
        out: dict[str, Placement] = {}
        taken = False
        i = screen.next(-1)
        while i >= 0:
            d = jobs[i]
            job_id = d.job.job_id
            prev = self._last.get(job_id)
            if job_id in self._running:
                _reserve(f, d, self._last[job_id], -1)
            placement = prev if prev is not None and f.take_placement(d, prev) else None
            if placement is None:
                w, p = (int(n) for n in table.request[d.seq])
                was_empty = f.empty
                placement = p0_place(f, d, w, p, self._rack_of)
                if placement is None and was_empty:  # first in line: what admission found
                    placement = pack_placement(f, d, w, p)
            if placement is not None:
                out[job_id] = self._last[job_id] = placement
                taken = True
            elif taken:
                screen.refresh(i + 1)
                taken = False
            i = screen.next(i)
        self._running = set(out)
        log.debug("[tiresias] slot %d: %d of %d active jobs run", slot, len(out), len(jobs))
        return Allocation(slot, out)
