"""What a run leaves: each job's record, the runtime model's errors, and the run's result.

The engine (:mod:`mlsched.engine.engine`) fills them slot by slot; metrics, reports, the
controller's state file and the experiments read them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from mlsched.core.allocation import JobState, Placement, Plan, Quote, RejectKind
from mlsched.core.job import JobSpec
from mlsched.engine.executor import SlotReport

__all__ = ["JobRecord", "ModelError", "RunResult", "SlotOutcome", "StateChange"]


@dataclass(slots=True)  # slots: the engine updates every running job's record each slot
class JobRecord:
    """Everything the engine knows about one job (mutable; policies see a read-only view)."""

    spec: JobSpec
    state: JobState = JobState.PENDING
    progress: float = 0.0
    admitted_slot: int | None = None
    started_slot: int | None = None
    completion_slot: int | None = None
    completion_time_s: float | None = None
    slots_run: int = 0
    worker_slots: float = 0.0
    last_placement: Placement | None = None
    plan: Plan | None = None
    restarts: int = 0
    restart_s: float = 0.0
    startup_s: float = 0.0  # the first launch's, to its first iteration
    quote: Quote | None = None
    reject_kind: RejectKind | None = None
    reason: str = ""

    @property
    def job_id(self) -> str:
        return self.spec.job_id

    @property
    def price_paid(self) -> float:
        return self.quote.total if (self.quote and self.state is not JobState.REJECTED) else 0.0

    @property
    def quote_decision(self) -> str:
        """The user's answer to the job's price: ``accepted``, ``declined``, or "" when no
        price was put to the user (none quoted, or one on a rejection)."""
        if self.quote is None:
            return ""
        if self.admitted_slot is not None:
            return "accepted"
        return "declined" if self.reject_kind is RejectKind.DECLINED else ""

    def utility(self) -> float:
        """Duration utilities pay f(completion - arrival) when done, else 0 (spec 001 A20);
        progress utilities pay mu(progress)."""
        u = self.spec.utility
        if u.over_progress:
            return u(self.progress) if self.state is not JobState.REJECTED else 0.0
        if self.state is JobState.DONE and self.completion_slot is not None:
            return u(self.completion_slot - self.spec.arrival_slot)
        return 0.0


class ModelError(NamedTuple):
    """Predicted vs measured iteration time of one job in one slot (a tuple: one is kept per
    measurement, hundreds of thousands in a long simulation)."""

    job_id: str
    slot: int
    predicted_s: float
    measured_s: float

    @property
    def relative(self) -> float:
        return (self.predicted_s - self.measured_s) / self.measured_s if self.measured_s else 0.0


@dataclass
class RunResult:
    """The outcome of a run: final job records and per-slot series."""

    policy: str
    records: dict[str, JobRecord]
    slots: int
    slot_seconds: float
    resource_names: tuple[str, ...]
    utilization: np.ndarray  # (slots, resources): used / total capacity
    model_errors: Sequence[ModelError] = field(default_factory=list)
    wall_seconds: float = 0.0
    stalled: bool = False
    horizon: int | None = None  # the run's horizon in slots (None: open-ended)


class StateChange(NamedTuple):
    """A job moved from ``old`` to ``new`` (``old`` is pending for a decision at arrival)."""

    job_id: str
    old: JobState
    new: JobState


@dataclass(frozen=True)
class SlotOutcome:
    """What one :meth:`Engine.step` did: the executor's report of the slot, every state
    change it decided (in order), and the runtime model's errors measured in the slot."""

    report: SlotReport
    changes: tuple[StateChange, ...] = ()
    model_errors: tuple[ModelError, ...] = ()

    @property
    def slot(self) -> int:
        return self.report.slot

    @property
    def decided(self) -> tuple[StateChange, ...]:
        """The admission decisions (admitted or rejected at arrival)."""
        return tuple(c for c in self.changes if c.old is JobState.PENDING)
