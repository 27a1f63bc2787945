"""Predicted rates a policy keeps from one slot to the next, per job, while the runtime
model's predictions for that job stay what they were.

A policy that prices many placements of each waiting job (hetero's shapes, GADGET's ring
sizes) asks the model the same questions slot after slot. The model says, per job, when an
answer may have changed (:meth:`RuntimeModel.job_version`: the job's own parameters, or the
cluster); another job's refit leaves this job's answers standing.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from mlsched.core.job import JobSpec
from mlsched.scheduler.view import ClusterView

__all__ = ["RateMemo"]


class RateMemo:
    """Per job, a dict of rates (keys of the policy's choosing) valid for one model state."""

    def __init__(self) -> None:
        self._rates: dict[str, dict[Any, float]] = {}
        self._versions: dict[str, Hashable] = {}

    def of(self, job: JobSpec, view: ClusterView) -> dict[Any, float]:
        """The job's rates found under the model's current state (empty if it changed)."""
        version = view.runtime.job_version(job)
        job_id = job.job_id
        if version is None or job_id not in self._versions or self._versions[job_id] != version:
            self._rates[job_id] = {}
            if version is None:  # the model cannot tell: nothing is kept to the next call
                self._versions.pop(job_id, None)
            else:
                self._versions[job_id] = version
        return self._rates[job_id]

    def drop(self, job_id: str) -> None:
        self._rates.pop(job_id, None)
        self._versions.pop(job_id, None)

    def clear(self) -> None:
        self._rates.clear()
        self._versions.clear()
