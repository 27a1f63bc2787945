"""Gavel's FIFO, as Gavel's simulator runs it: a comparison mode, not a paper's policy.

Another simulator, Gavel (stanford-futuredata/gavel, commit c4fa400, ``policies/fifo.py``
in its base mode and the round mechanism of ``scheduler.py``), reports an average JCT of
3.06 h on its own 5,000-job trace where mlsched's FIFO gives 3.93 h. The difference is in
what "FIFO" means there, not in either runtime model (docs/traces.md). This policy
reproduces those semantics in mlsched's engine so the two can be compared like for like:

* **Types, not servers.** Each job is bound to one GPU type when the allocation is computed
  and runs only on GPUs of that type, in arrival order within the type (a job that does not
  fit is skipped, later ones may start); a started job keeps its GPUs until it is done.
* **Recomputed rarely.** The allocation (which job has which type) is recomputed only when
  jobs arrived or finished since the last computation, and then only if ``reset_s``
  seconds (Gavel's ``minimum_time_between_allocation_resets``, 1,920) have passed since the
  last one, or the last one was at time 0. A new job waits, GPUs free or not, until then.
* **The type a job gets** (``type_choice="as-gavel"``, the default): per slot of the
  computation, in job order, a finished job's type goes to the queue's head if that many
  GPUs of the type are still unclaimed; every other queued job gets the alphabetically last
  type still on the list of types with free GPUs. Gavel draws a random index among the
  types that fit but never turns it back into a type; the draw is used only to drop a
  type from the list when the chosen type fills exactly. A type can so be over-claimed, its
  jobs then waiting for its GPUs while other types idle. ``type_choice="random"`` uses the
  drawn type instead (what the code means to do).

A job's GPU count is its requested worker count (Gavel's scale factor); it may run on a
type where its speed is known (``compute_s_by_type``) or where it has no per-type speeds.
"""

from __future__ import annotations

import random
from collections import deque
from typing import Any

import numpy as np

from mlsched.core.allocation import Admission, Allocation, Placement, RejectKind
from mlsched.core.errors import SpecError
from mlsched.core.job import Arch, JobSpec
from mlsched.scheduler.policy import Policy
from mlsched.scheduler.view import CapacityLedger, ClusterView, RunContext

__all__ = ["GavelFifoPolicy"]

#: Gavel's ``minimum_time_between_allocation_resets`` default, seconds.
GAVEL_RESET_S = 1920.0
TYPE_CHOICES = ("as-gavel", "random")


class GavelFifoPolicy(Policy):
    name = "gavel-fifo"
    description = (
        "Gavel's FIFO as its simulator runs it: jobs bound to a GPU type, allocation "
        "recomputed at most every 1,920 s (comparison mode)"
    )
    #: Gavel's jobs are data-parallel over their GPUs; there are no parameter servers.
    archs = frozenset({Arch.ALLREDUCE})

    def __init__(
        self, *, reset_s: float = GAVEL_RESET_S, type_choice: str = "as-gavel", **options: Any
    ) -> None:
        super().__init__(**options)
        if not (isinstance(reset_s, int | float) and reset_s >= 0):
            raise SpecError("reset_s", reset_s, "a number of seconds >= 0")
        if type_choice not in TYPE_CHOICES:
            raise SpecError("type_choice", type_choice, f"one of {', '.join(TYPE_CHOICES)}")
        self.reset_s = float(reset_s)
        self.type_choice = type_choice
        self._specs: dict[str, JobSpec] = {}
        self._order: dict[str, int] = {}  # admission order: Gavel's job ids
        self._unclaimed: deque[str] = deque()  # admitted, no type yet
        self._type_of: dict[str, str] = {}  # Gavel's allocation (finished jobs stay until
        self._finished: set[str] = set()  # the next computation replaces them)
        self._running: dict[str, Placement] = {}
        self._gpus: dict[str, int] = {}  # GPUs per type
        self._servers: dict[str, list[int]] = {}  # worker servers per type
        self._ledger: CapacityLedger | None = None
        self._rng = random.Random(0)
        self._changed = False
        self._last_reset: float | None = None
        self._next = 0
        # Per GPU type: releases so far, and, since the last, the smallest scale per worker
        # bundle that did not fit (capacity only shrinks between releases: a job as large
        # fails again, and a waiting job costs nothing per slot).
        self._releases: dict[str, int] = {}
        self._full: dict[str, tuple[int, dict[object, int]]] = {}
        self._kind_of: dict[int, str] = {}  # server -> its type
        self._index: dict[str, np.ndarray] = {}  # _servers as index arrays

    def setup(self, context: RunContext) -> None:
        super().setup(context)
        cluster = context.cluster
        self._ledger = CapacityLedger(cluster)
        self._rng = random.Random(context.seed)
        self._gpus, self._servers = {}, {}
        self._releases, self._full, self._kind_of = {}, {}, {}
        for i in cluster.worker_servers:
            server = cluster.servers[i]
            kind = server.gpu_type or ""
            self._servers.setdefault(kind, []).append(i)
            self._kind_of[i] = kind
            # Gavel counts workers: a server's GPUs, or one worker where it names none.
            count = int(server.capacity.get("gpu", 0)) or 1
            self._gpus[kind] = self._gpus.get(kind, 0) + count
        self._index = {k: np.array(v, dtype=np.intp) for k, v in self._servers.items()}

    # Jobs -------------------------------------------------------------------------------
    def _scale(self, job: JobSpec) -> int:
        return job.requested_workers or job.min_workers

    def _runs_on(self, job: JobSpec, kind: str) -> bool:
        if job.gpu_type is not None:
            return job.gpu_type == kind
        return not job.compute_s_by_type or kind in job.compute_s_by_type

    def on_arrival(self, job: JobSpec, view: ClusterView) -> Admission:
        scale = self._scale(job)
        if not self.supports(job):
            return Admission.reject(RejectKind.INFEASIBLE, "Gavel's jobs have no PSs")
        if not any(self._runs_on(job, k) and n >= scale for k, n in self._gpus.items()):
            return Admission.reject(
                RejectKind.INFEASIBLE, f"no GPU type it runs on has {scale} GPUs"
            )
        self._specs[job.job_id] = job
        self._order[job.job_id] = self._next
        self._next += 1
        self._unclaimed.append(job.job_id)
        self._changed = True
        return Admission.admit(reason=f"waits for a GPU type ({scale} GPUs)")

    def on_completion(self, job_id: str, view: ClusterView) -> None:
        self._stop(job_id)
        if job_id in self._type_of:
            self._finished.add(job_id)  # its type is handed on at the next computation
        self._changed = True

    def release(self, job_id: str) -> None:
        self._stop(job_id)
        self._type_of.pop(job_id, None)
        self._finished.discard(job_id)
        if job_id in self._unclaimed:
            self._unclaimed.remove(job_id)
        self._specs.pop(job_id, None)

    def _stop(self, job_id: str) -> None:
        placement = self._running.pop(job_id, None)
        if placement is not None and self._ledger is not None:
            self._ledger.release(self._specs[job_id], placement)
            for s, _ in placement.workers:
                kind = self._kind_of[s]
                self._releases[kind] = self._releases.get(kind, 0) + 1

    # The allocation (which type each job has) -------------------------------------------
    def _due(self, now: float) -> bool:
        if not self._changed:
            return False
        last = self._last_reset
        return last is None or last == 0.0 or now - last >= self.reset_s

    def _compute_types(self) -> None:
        free = dict(self._gpus)
        queue = list(self._unclaimed)
        for job_id in sorted(self._type_of, key=self._order.__getitem__):
            kind = self._type_of[job_id]
            if job_id not in self._finished:
                free[kind] -= self._scale(self._specs[job_id])
                continue
            if queue:  # the head takes the finished job's type where it still fits
                head = self._specs[queue[0]]
                if self._scale(head) <= free[kind]:
                    queue.pop(0)
                    self._type_of[head.job_id] = kind
                    free[kind] -= self._scale(head)
            del self._type_of[job_id]
            self._finished.discard(job_id)
            self._specs.pop(job_id, None)
        kinds = sorted(k for k, n in free.items() if n > 0)
        while queue and kinds:
            job = self._specs[queue.pop(0)]
            scale = self._scale(job)
            fitting = [i for i, k in enumerate(kinds) if free[k] >= scale]
            if not fitting:
                break
            drawn = self._rng.randrange(len(fitting))
            kind = kinds[fitting[drawn]] if self.type_choice == "random" else kinds[-1]
            if not self._runs_on(job, kind):
                continue  # Gavel leaves it without a type until the next computation
            self._type_of[job.job_id] = kind
            free[kind] -= scale
            if free[kind] == 0:
                kinds.pop(fitting[drawn])
        self._unclaimed = deque(j for j in self._unclaimed if j not in self._type_of)

    # The slot -----------------------------------------------------------------------------
    def allocate(self, slot: int, view: ClusterView) -> Allocation:
        now = slot * view.slot_seconds
        if self._due(now):
            self._compute_types()
            self._last_reset = now
            self._changed = False
        ledger = self._ledger
        assert ledger is not None
        waiting = sorted(
            (j for j in self._type_of if j not in self._running and j not in self._finished),
            key=self._order.__getitem__,
        )
        for job_id in waiting:
            job = self._specs[job_id]
            kind, scale = self._type_of[job_id], self._scale(job)
            released = self._releases.get(kind, 0)
            full = self._full.get(kind)
            if full is None or full[0] != released:
                full = self._full[kind] = (released, {})
            if full[1].get(job.worker, scale + 1) <= scale:
                continue  # one as large did not fit since the type's last release
            placement = self._place(job, kind, ledger)
            if placement is not None:
                self._running[job_id] = placement
            else:
                full[1][job.worker] = scale
        return Allocation(slot, self._running)

    def _place(self, job: JobSpec, kind: str, ledger: CapacityLedger) -> Placement | None:
        """The job's GPUs on servers of its type, fewest servers first (packed)."""
        left, taken = self._scale(job), []
        demand = ledger.cluster.demand_array(job.worker)
        servers = self._servers.get(kind, [])
        index = self._index.get(kind, np.zeros(0, dtype=np.intp))
        for s, room in zip(servers, ledger.max_counts(index, demand), strict=True):
            k = min(left, room)
            if k > 0:
                taken.append((s, k))
                left -= k
            if left == 0:
                break
        if left:
            return None
        for s, k in taken:  # the room max_counts found, taken (not looked for again)
            ledger.take(s, demand, k)
        return Placement(tuple(taken))
