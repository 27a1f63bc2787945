"""The executor contract: run one slot's allocation and report what happened.

The simulator (:mod:`mlsched.engine.simulator`) and the gRPC cluster executor implement it;
the engine cannot tell them apart.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Container, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from mlsched.core.allocation import Allocation, Placement
from mlsched.core.job import JobSpec
from mlsched.perfmodel.base import Measurement

__all__ = ["Executor", "JobFailure", "JobProgress", "SlotReport", "SteadySlot"]


class JobProgress(NamedTuple):
    """One job's outcome in one slot.

    ``units`` is the work done (never more than what remained); ``finished`` says the job's
    work is complete, ``finish_offset_s`` when within the slot; ``restart_s`` is time lost
    to checkpoint + restart because the placement changed; ``startup_s`` the time its first
    launch took to its first iteration (a simulator charges it over the slots it spans, a
    cluster reports it once, when the last computing task has begun).
    """

    units: float
    finished: bool = False
    finish_offset_s: float | None = None
    restart_s: float = 0.0
    startup_s: float = 0.0


class JobFailure(NamedTuple):
    """A job's processes failed in the slot. Not ``fatal``: the job is placed again (the
    reason is shown meanwhile). ``fatal``: it failed too often or cannot run at all; the
    engine ends it, keeping only the work up to ``checkpoint_units`` (None: all of it)."""

    reason: str
    fatal: bool = False
    checkpoint_units: float | None = None


class SteadySlot(NamedTuple):
    """A slot that repeats the one before it, known in advance (see
    :meth:`Executor.steady`): the job keeps its placement, owes no start-up or restart, and
    its work and measurement are the same as last slot's while the slot does not finish it.
    The slot that does finish it (``units`` >= what remains, less 1e-9) does the remaining
    ``left`` units in ``left / rate`` seconds, measured at the same seconds per iteration.
    """

    units: float  # work done in the slot
    #: The measurement's fields after (job id, slot, placement); None: nothing measured.
    measurement_tail: tuple[Any, ...] | None
    iteration_s: float  # measured seconds per iteration
    compute_s: float
    comm_s: float
    rate: float  # units per second


@dataclass
class SlotReport:
    slot: int
    progress: dict[str, JobProgress] = field(default_factory=dict)
    measurements: list[Measurement] = field(default_factory=list)
    failures: dict[str, JobFailure] = field(default_factory=dict)


class Executor(ABC):
    @abstractmethod
    def apply(
        self,
        slot: int,
        allocation: Allocation,
        jobs: Mapping[str, JobSpec],
        remaining: Mapping[str, float],
    ) -> None:
        """Start (or keep running) the slot's allocation. ``remaining`` is each allocated
        job's outstanding work in units."""

    @abstractmethod
    def collect(self, slot: int) -> SlotReport:
        """Block until ``slot`` is over and report progress and measurements."""

    def coasts(self) -> bool:
        """Whether :meth:`steady` can tell slots in advance (default: never)."""
        return False

    def steady(self, job_id: str, placement: Placement) -> SteadySlot | None:
        """The next slot of ``job_id`` under ``placement`` if it will repeat the last one
        (and, if it finishes the job, end it as :class:`SteadySlot` says), else None. The
        engine then accounts such slots itself, in order, and leaves them out of
        :meth:`apply_except`."""
        return None

    def apply_except(
        self,
        slot: int,
        allocation: Allocation,
        jobs: Mapping[str, JobSpec],
        remaining: Mapping[str, float],
        skip: Container[str],
    ) -> None:
        """:meth:`apply`, with the jobs in ``skip`` running their steady slot (reported
        by the engine, not in this slot's report); ``jobs`` and ``remaining`` hold the
        others only, in allocation order. Only an executor that :meth:`coasts` is given any."""
        if skip:
            raise NotImplementedError(f"{type(self).__name__} does not coast")
        self.apply(slot, allocation, jobs, remaining)

    def close(self) -> None:  # noqa: B027
        """Release processes or connections."""
