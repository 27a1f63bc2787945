"""The scaffolding of the baselines built on a task filler (DRF, Optimus, RRH, Dorm, Tiresias).

Such a policy keeps its active jobs in arrival order and a task filler of the cluster
(:class:`FillerPolicy`). The event-triggered ones (:class:`ReplanPolicy`: all but Tiresias,
which re-plans every slot) also keep the last allocation they made; an arrival, a
completion or a release marks it dirty, and the next :meth:`allocate` re-plans once for
all the events of the slot (they all land at that slot's boundary). Subclasses
write :meth:`_plan` (the re-plan) and their own admission; :meth:`_on_bind` sets up what
they keep per cluster and :meth:`_forget` what they keep per job.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, Generic, TypeVar

from mlsched.core.allocation import Allocation, Placement
from mlsched.core.cluster import Cluster
from mlsched.scheduler.baselines.taskfill import TaskFiller
from mlsched.scheduler.policy import Policy
from mlsched.scheduler.view import ClusterView, RunContext

__all__ = ["FillerPolicy", "ReplanPolicy"]

J = TypeVar("J")


class FillerPolicy(Policy, Generic[J]):
    """Active jobs (``_jobs``: id -> the subclass's per-job record, in arrival order, and
    ``_seq``, the admission counter) and a task filler bound to the cluster."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._jobs: dict[str, J] = {}
        self._seq = 0
        self._filler: TaskFiller | None = None

    def setup(self, context: RunContext) -> None:
        super().setup(context)
        self._bind(context.cluster)

    def _bind(self, cluster: Cluster) -> TaskFiller:
        """The task filler of ``cluster`` (a new one when the cluster changed)."""
        if self._filler is None or self._filler.cluster is not cluster:
            self._filler = TaskFiller(cluster)
            self._on_bind(cluster)
        return self._filler

    def _on_bind(self, cluster: Cluster) -> None:
        """Per-cluster state of the subclass."""

    def _add(self, job_id: str, record: J) -> None:
        """An admitted job joins the active jobs."""
        self._jobs[job_id] = record
        self._seq += 1

    def on_completion(self, job_id: str, view: ClusterView) -> None:
        self.release(job_id)


class ReplanPolicy(FillerPolicy[J]):
    """A :class:`FillerPolicy` that keeps its allocation until an event marks it dirty."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._alloc: dict[str, Placement] = {}
        self._dirty = False

    def _add(self, job_id: str, record: J) -> None:
        super()._add(job_id, record)
        self._dirty = True  # the next slot re-plans

    def release(self, job_id: str) -> None:
        if self._jobs.pop(job_id, None) is not None:
            self._dirty = True
        self._alloc.pop(job_id, None)
        self._forget(job_id)

    def _forget(self, job_id: str) -> None:
        """Per-job state of the subclass, beyond ``_jobs`` and the allocation."""

    def allocate(self, slot: int, view: ClusterView) -> Allocation:
        if self._dirty:
            self._alloc = self._plan(slot, view)
            self._dirty = False
        return Allocation(slot, self._alloc)

    @abstractmethod
    def _plan(self, slot: int, view: ClusterView) -> dict[str, Placement]:
        """The placements of the active jobs from this slot until the next event."""
