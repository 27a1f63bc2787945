"""What a policy sees: a read-only picture of the cluster, the active jobs and the model.

The engine owns the mutable job records; :class:`JobView` exposes them through read-only
properties, and :class:`ClusterView` is rebuilt cheaply every slot. What-if placement works
on a :class:`CapacityLedger`, a private copy of free capacity that a policy may fill.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from mlsched.core.allocation import JobState, Placement, Plan
from mlsched.core.cluster import Cluster
from mlsched.core.job import JobSpec
from mlsched.perfmodel.base import RuntimeModel

__all__ = ["CapacityLedger", "ClusterView", "JobRecordLike", "JobView", "RunContext"]


class JobRecordLike(Protocol):
    """The fields of an engine job record that policies may read."""

    spec: JobSpec
    state: JobState
    progress: float
    admitted_slot: int | None
    started_slot: int | None
    slots_run: int
    worker_slots: float
    last_placement: Placement | None
    plan: Plan | None
    restarts: int


class JobView:
    """Read-only view of one job's record."""

    __slots__ = ("_r",)

    def __init__(self, record: JobRecordLike) -> None:
        self._r = record

    @property
    def spec(self) -> JobSpec:
        return self._r.spec

    @property
    def job_id(self) -> str:
        return self._r.spec.job_id

    @property
    def state(self) -> JobState:
        return self._r.state

    @property
    def progress(self) -> float:
        """Work units done so far."""
        return self._r.progress

    @property
    def remaining(self) -> float:
        return max(0.0, self._r.spec.total_work - self._r.progress)

    @property
    def admitted_slot(self) -> int | None:
        return self._r.admitted_slot

    @property
    def started_slot(self) -> int | None:
        return self._r.started_slot

    @property
    def slots_run(self) -> int:
        return self._r.slots_run

    @property
    def worker_slots(self) -> float:
        """Attained service: sum over slots of the worker count (Tiresias' LAS key)."""
        return self._r.worker_slots

    @property
    def last_placement(self) -> Placement | None:
        return self._r.last_placement

    @property
    def plan(self) -> Plan | None:
        return self._r.plan

    @property
    def restarts(self) -> int:
        return self._r.restarts


@dataclass(frozen=True)
class RunContext:
    """Given to a policy once before the first slot.

    ``catalogue`` holds the public specs of the jobs the policy may expect (the whole
    generated job set in simulation, which the specs use as an oracle for price constants;
    a job catalogue or trace on the testbed). ``horizon`` is None for open-ended runs.
    """

    cluster: Cluster
    slot_seconds: float
    horizon: int | None
    seed: int
    runtime: RuntimeModel
    catalogue: Sequence[JobSpec] = ()


class CapacityLedger:
    """Free capacity per server (a copy a policy may fill while deciding)."""

    __slots__ = ("cluster", "free")

    def __init__(self, cluster: Cluster, free: np.ndarray | None = None) -> None:
        self.cluster = cluster
        self.free = cluster.capacity.copy() if free is None else free.copy()

    def copy(self) -> CapacityLedger:
        return CapacityLedger(self.cluster, self.free)

    def fits(self, server: int, demand: np.ndarray, count: int = 1) -> bool:
        need = demand if count == 1 else demand * count
        # The same comparisons as numpy's, over a few floats: several times faster than
        # three array operations on a row of a handful of resources.
        for n, f in zip(need.tolist(), self.free[server].tolist(), strict=True):
            if not n <= f + 1e-9:
                return False
        return True

    def fits_each(self, demand: np.ndarray) -> list[bool]:
        """:meth:`fits` of one task on every server, in one look at every row."""
        return np.logical_and.reduce(demand <= self.free + 1e-9, axis=1).tolist()

    def max_count(self, server: int, demand: np.ndarray) -> int:
        """How many tasks of ``demand`` fit on ``server``."""
        # numpy's divisions and minimum over the demanded resources, on a few floats.
        least: float | None = None
        for d, f in zip(demand.tolist(), self.free[server].tolist(), strict=True):
            if d > 0:
                ratio = f / d
                if least is None or ratio < least:
                    least = ratio
        if least is None:
            return 1 << 30
        return math.floor(least + 1e-9)

    def max_counts(self, servers: np.ndarray, demand: np.ndarray) -> Iterator[int]:
        """:meth:`max_count` of each of ``servers`` (an index array), in order, from their
        rows as they are at the first read; each found as it is read (a caller that stops
        at the first with room reads no further)."""
        need = [(j, d) for j, d in enumerate(demand.tolist()) if d > 0]
        if not need:
            yield from [1 << 30] * len(servers)
        elif len(need) == 1:  # one demanded resource (GPUs): its column alone
            j, d = need[0]
            for f in self.free[servers, j].tolist():
                yield math.floor(f / d + 1e-9)
        else:  # numpy's divisions and minimum per row, on a few floats
            for row in self.free[servers].tolist():
                yield math.floor(min(row[j] / d for j, d in need) + 1e-9)

    def take(self, server: int, demand: np.ndarray, count: int = 1) -> None:
        self.free[server] -= demand if count == 1 else demand * count  # x * 1 is x: no copy

    def give(self, server: int, demand: np.ndarray, count: int = 1) -> None:
        self.free[server] += demand if count == 1 else demand * count

    def place(self, job: JobSpec, placement: Placement) -> bool:
        """Take ``placement``'s resources if they all fit; leave the ledger unchanged if not."""
        usage = placement.usage(job, self.cluster)
        if any(np.any(u > self.free[s] + 1e-9) for s, u in usage.items()):
            return False
        for s, u in usage.items():
            self.free[s] -= u
        return True

    def release(self, job: JobSpec, placement: Placement) -> None:
        for s, u in placement.usage(job, self.cluster).items():
            self.free[s] += u


class ClusterView(Mapping[str, JobView]):
    """The cluster, the active jobs (in admission order) and the estimated runtime model.

    As a mapping it is job id -> :class:`JobView` over *active* jobs (admitted, not done).
    """

    def __init__(
        self,
        *,
        slot: int,
        slot_seconds: float,
        horizon: int | None,
        cluster: Cluster,
        runtime: RuntimeModel,
        jobs: Mapping[str, JobRecordLike],
        used: np.ndarray | None = None,
        done: Mapping[str, float] | None = None,
    ) -> None:
        self.slot = slot
        self.slot_seconds = slot_seconds
        self.horizon = horizon
        self.cluster = cluster
        self.runtime = runtime
        self._jobs = jobs
        self._used = used
        self._done = done or {}

    def __getitem__(self, job_id: str) -> JobView:
        return JobView(self._jobs[job_id])

    def __iter__(self) -> Iterator[str]:
        return iter(self._jobs)

    def __len__(self) -> int:
        return len(self._jobs)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._jobs

    def done_work(self, job_id: str) -> float:
        """Work units already done by a job offered to ``on_arrival`` again (admitted
        before a reconfiguration or a controller restart), so that a policy plans its
        remainder; 0 for a new arrival."""
        return self._done.get(job_id, 0.0)

    def readmitted(self, job_id: str) -> bool:
        """Whether ``on_arrival`` is offered a job admitted before (a reconfiguration or a
        controller restart) rather than a new arrival: its price, if any, was agreed then."""
        return job_id in self._done

    def active(self) -> list[JobView]:
        return [JobView(r) for r in self._jobs.values()]

    def ledger(self) -> CapacityLedger:
        """Full capacity, for policies that decide every slot from scratch."""
        return CapacityLedger(self.cluster)

    def rate_per_slot(self, job: JobSpec, placement: Placement) -> float:
        """Work units per slot under ``placement``, by the estimated runtime model."""
        return self.runtime.throughput(job, placement) * self.slot_seconds

    def slots_needed(self, job: JobSpec, placement: Placement, work: float | None = None) -> int:
        """Whole slots to finish ``work`` (default: all of the job) at ``placement``."""
        rate = self.rate_per_slot(job, placement)
        if rate <= 0:
            return 1 << 30
        return max(1, math.ceil((job.total_work if work is None else work) / rate - 1e-9))
