"""FIFO: strict first-in first-out with fixed task counts (spec 001 §5.2 item 1).

Every job is admitted (unless it could never fit the empty cluster) and queued in arrival
order. Each slot, queued jobs start head-first while the whole job fits; there is no
backfilling, so a head that does not fit blocks the queue. A started job keeps its
round-robin placement, unchanged, until it is done.

``ps_rule="needed"`` runs each job with the fewest PSs it needs, ceil(W / gamma) under a
worker:PS ratio (spec 000's FIFO); the default draws them (spec 001's).
``one_ps_host=True`` puts all of a job's PSs on one server (spec 002's (2i), AMB-6): the
PSs there cover every worker placed elsewhere, since ``ps_needed(W)`` covers all W.

``placement="ring"`` is spec 003's FIFO (§5 "Baselines"): ring-all-reduce jobs only (a PS
job is rejected as infeasible), each placed by P0 with its hop reservations
(:mod:`mlsched.scheduler.ring_placement`) with its fixed count (``max_workers=10`` gives
the spec's U{1..10} capped at N_i). Queued jobs are tried in arrival order every slot; one
that does not fit waits and later jobs may still start (the spec's FIFO backfills). A
started job keeps its placement until done.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from mlsched.core.allocation import Admission, Allocation, Placement, RejectKind
from mlsched.core.job import JobSpec
from mlsched.scheduler.baselines.common import (
    check_count_rules,
    check_one_ps_host,
    fixed_counts,
)
from mlsched.scheduler.placement import EmptyFit, RoundRobin, pack
from mlsched.scheduler.policy import Policy
from mlsched.scheduler.ring_placement import RingLedger, check_placement, ring_infeasible
from mlsched.scheduler.view import CapacityLedger, ClusterView, RunContext

__all__ = ["FifoPolicy"]


class FifoPolicy(Policy):
    name = "fifo"
    ring_placement = True
    description = "first-in first-out, fixed worker/PS counts, round-robin, no backfilling"

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
        check_count_rules(ps_rule, worker_rule)
        self.one_ps_host = check_one_ps_host(one_ps_host)
        self.max_workers = max_workers
        self.max_ps = max_ps
        self.ps_rule = ps_rule
        self.worker_rule = worker_rule
        self.placement = check_placement(placement)
        self._ring: RingLedger | None = None
        # Ring mode: queued jobs that failed since capacity was last released (free
        # capacity has only shrunk since, so they would fail again).
        self._stuck: set[str] = set()
        self._queue: deque[str] = deque()
        self._specs: dict[str, JobSpec] = {}
        self._counts: dict[str, tuple[int, int]] = {}
        self._running: dict[str, Placement] = {}
        self._ledger: CapacityLedger | None = None
        self._rr: RoundRobin | None = None
        self._fits_empty = EmptyFit()
        # The head that did not fit, until capacity is released: the same attempt on the
        # same free capacity fails again (a blocked queue costs nothing per slot).
        self._blocked: str | None = None

    def setup(self, context: RunContext) -> None:
        super().setup(context)
        self._ledger = CapacityLedger(context.cluster)
        self._rr = RoundRobin(context.cluster)
        self._blocked = None
        if self.placement == "ring":
            self._ring = RingLedger(context.cluster)

    def on_arrival(self, job: JobSpec, view: ClusterView) -> Admission:
        seed = self.context.seed if self.context else 0
        w, p = fixed_counts(
            job,
            seed,
            max_workers=self.max_workers,
            max_ps=self.max_ps,
            ps_rule=self.ps_rule,
            worker_rule=self.worker_rule,
        )
        if self.placement == "ring":
            return self._ring_arrival(job, view, w)
        if not self._fits_empty(job, view.cluster, w, p, self.one_ps_host):  # once per shape
            return Admission.reject(
                RejectKind.INFEASIBLE, f"{w} workers and {p} PSs never fit the cluster"
            )
        self._specs[job.job_id] = job
        self._counts[job.job_id] = (w, p)
        self._queue.append(job.job_id)
        return Admission.admit(reason=f"queued with {w} workers, {p} PSs")

    def _ring_arrival(self, job: JobSpec, view: ClusterView, w: int) -> Admission:
        why = ring_infeasible(job, view.cluster, w)
        if why:
            return Admission.reject(RejectKind.INFEASIBLE, why)
        self._specs[job.job_id] = job
        self._counts[job.job_id] = (w, 0)
        self._queue.append(job.job_id)
        return Admission.admit(reason=f"queued with {w} workers (P0 ring placement)")

    def _ring_allocate(self, slot: int) -> Allocation:
        ring = self._ring
        assert ring is not None
        for job_id in list(self._queue):
            if job_id in self._stuck:
                continue
            placement = ring.place(self._specs[job_id], self._counts[job_id][0])
            if placement is None:
                self._stuck.add(job_id)  # waits; later jobs may still start
                continue
            self._running[job_id] = placement
            self._queue.remove(job_id)
        return Allocation(slot, self._running)

    def allocate(self, slot: int, view: ClusterView) -> Allocation:
        if self._ring is not None:
            return self._ring_allocate(slot)
        assert self._ledger is not None and self._rr is not None
        while self._queue:
            job_id = self._queue[0]
            if job_id == self._blocked:
                break
            w, p = self._counts[job_id]
            job = self._specs[job_id]
            one = self.one_ps_host
            placement = self._rr.place(job, w, p, self._ledger, one_ps_host=one)
            if placement is None and not self._running:
                # Round-robin spreading can miss a layout that packing finds (admission
                # checked with packing): on an empty cluster the head must still start.
                placement = pack(job, w, p, self._ledger, one_ps_host=one)
            if placement is None:
                self._blocked = job_id
                break  # strict FIFO: the head blocks the queue
            self._running[job_id] = placement
            self._queue.popleft()
        return Allocation(slot, self._running)

    def on_completion(self, job_id: str, view: ClusterView) -> None:
        self.release(job_id)

    def release(self, job_id: str) -> None:
        placement = self._running.pop(job_id, None)
        if placement is not None and self._ring is not None:
            self._ring.release(self._specs[job_id], placement)
            self._stuck.clear()
        elif placement is not None and self._ledger is not None:
            self._ledger.release(self._specs[job_id], placement)
            self._blocked = None
        if job_id in self._queue:
            self._queue.remove(job_id)
        self._stuck.discard(job_id)
        self._specs.pop(job_id, None) if placement is not None else None
