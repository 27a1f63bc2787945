"""An executor that reports what a recorded run reported, slot by slot.

Given a testbed run's history (each slot's progress and measurements, as the controller's
state file keeps them), the engine with the same policy, cluster and jobs should make the
same admissions and allocations: the slot loop, the policy and the runtime model are the
same code in both. This executor makes that checkable: it hands back, for each job the
replayed engine allocated, exactly what the real run reported for it in that slot. A job
the replay allocates where the real run did not gets no progress (the sequences have
diverged by then, which the caller reports).
"""

from __future__ import annotations

from collections.abc import Mapping

from mlsched.core.allocation import Allocation
from mlsched.core.job import JobSpec
from mlsched.engine.executor import Executor, SlotReport

__all__ = ["ReplayExecutor"]


class ReplayExecutor(Executor):
    def __init__(self, slots: Mapping[int, SlotReport]) -> None:
        self._slots = dict(slots)
        self._allocated: dict[int, frozenset[str]] = {}

    def apply(
        self,
        slot: int,
        allocation: Allocation,
        jobs: Mapping[str, JobSpec],
        remaining: Mapping[str, float],
    ) -> None:
        self._allocated[slot] = frozenset(allocation)

    def collect(self, slot: int) -> SlotReport:
        if slot not in self._allocated:
            raise RuntimeError(f"collect({slot}) without apply({slot})")
        ran = self._allocated.pop(slot)
        recorded = self._slots.get(slot, SlotReport(slot))
        return SlotReport(
            slot,
            progress={j: p for j, p in recorded.progress.items() if j in ran},
            measurements=[m for m in recorded.measurements if m.job_id in ran],
            failures={j: f for j, f in recorded.failures.items() if j in ran},
        )
