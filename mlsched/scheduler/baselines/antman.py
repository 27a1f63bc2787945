"""AntMan-style baseline (spec 002 §5 "Baselines for A_online", item 3; AMB-15).

AntMan splits jobs into *resource-guarantee* jobs, scheduled first and never preempted once
running, and *opportunistic* jobs, which use what the guarantee jobs leave idle and are
preempted when a guarantee job needs the room. The paper leaves the classes and the delay
threshold unstated; spec 002 AMB-15 fixes them, and so does this policy:

* a job is guarantee when its weight is in the top ``guarantee_share`` (50 %) of the
  weights: the run's catalogue (the workload's public job set in simulation), else the
  weights seen so far;
* an opportunistic job that has waited (since arrival, not done) more than
  ``promote_after`` (2) times its ideal duration is promoted to guarantee for good. The
  ideal duration is the runtime model's estimate, in slots, of the job's fixed counts on
  the placement admission found on the empty cluster.

Each slot, from an empty cluster, jobs are placed in this order: running guarantee jobs
(they keep their servers), waiting guarantee jobs by arrival, running opportunistic jobs,
waiting opportunistic jobs by arrival; a job that does not fit is skipped and later ones
may still run. Counts, admission and placement are `tiresias`'s (fixed counts, P0, a running
job keeps its servers when they fit). Restarts are charged by the environment, as for
`tiresias` and `las2d`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mlsched.core.allocation import Allocation, Placement
from mlsched.core.job import JobSpec
from mlsched.scheduler.baselines.tiresias import TiresiasPolicy
from mlsched.scheduler.view import ClusterView, RunContext

__all__ = ["AntManPolicy"]


class AntManPolicy(TiresiasPolicy):
    name = "antman"
    description = (
        "AntMan-style (spec 002): guarantee jobs (top half by weight, or waiting over twice "
        "their ideal duration) first and never preempted; opportunistic jobs on what is left"
    )

    def __init__(
        self, *, guarantee_share: float = 0.5, promote_after: float = 2.0, **options: Any
    ) -> None:
        super().__init__(**options)
        for name, value, low, high in (
            ("guarantee_share", guarantee_share, 0.0, 1.0),
            ("promote_after", promote_after, 0.0, math.inf),
        ):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"{name} must be a number, got {value!r}")
            if not low <= value <= high or math.isnan(value):
                raise ValueError(f"{name} must be in [{low}, {high}], got {value!r}")
        self.guarantee_share = float(guarantee_share)
        self.promote_after = float(promote_after)
        self._cut: float | None = None  # the weight from which a job is guarantee
        self._seen: list[float] = []  # weights seen, without a catalogue
        self._guarantee: set[str] = set()
        self._arrival: dict[str, int] = {}
        self._ideal: dict[str, float] = {}  # ideal duration in slots

    def setup(self, context: RunContext) -> None:
        super().setup(context)
        weights = [j.weight for j in context.catalogue]
        self._cut = self._quantile(weights) if weights else None

    def _quantile(self, weights: list[float]) -> float:
        if self.guarantee_share <= 0.0:
            return math.inf
        return float(np.quantile(np.asarray(weights), 1.0 - self.guarantee_share))

    def _admitted(
        self, job: JobSpec, view: ClusterView, workers: int, ps: int, empty: Placement
    ) -> None:
        cut = self._cut
        if cut is None:
            self._seen.append(job.weight)
            cut = self._quantile(self._seen)
        if job.weight >= cut:
            self._guarantee.add(job.job_id)
        self._arrival[job.job_id] = view.slot
        # Ideal duration: slots its fixed counts need on the placement admission found.
        runtime = view.runtime
        per_s = runtime.units_per_iteration(job, empty) / runtime.iteration_time(job, empty)
        self._ideal[job.job_id] = (
            job.total_work / per_s / view.slot_seconds if per_s > 0 else math.inf
        )

    def release(self, job_id: str) -> None:
        super().release(job_id)
        self._guarantee.discard(job_id)
        self._arrival.pop(job_id, None)
        self._ideal.pop(job_id, None)

    def allocate(self, slot: int, view: ClusterView) -> Allocation:
        for job_id, arrived in self._arrival.items():  # promotions first
            if job_id not in self._guarantee and slot - arrived > (
                self.promote_after * self._ideal[job_id]
            ):
                self._guarantee.add(job_id)
        return super().allocate(slot, view)

    def rank(self, view: ClusterView, job_id: str) -> tuple[float, ...]:
        """Guarantee before opportunistic, running before waiting; ties by arrival."""
        return (
            0.0 if job_id in self._guarantee else 1.0,
            0.0 if job_id in self._running else 1.0,
        )
