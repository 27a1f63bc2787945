"""Plans committed at admission (OASiS, PD-ORS): what each slot runs, and what it costs.

Both policies decide a job's whole schedule when it arrives and never change it. This holds
the table of placements per slot, the committed usage per (slot, server, resource) that
their prices read (:class:`CommittedUsage`: g and v of OASiS's Alg. 1), and the two
run-time rules the papers lack: a job that finishes early leaves its later reservations in
place unless released; a job still unfinished after its planned completion (the runtime
model was optimistic) is reported as *behind*, for the policy to run best-effort.
"""

from __future__ import annotations

import itertools
import math
import time
from abc import abstractmethod
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mlsched.core.allocation import Admission, Allocation, Placement, Plan
from mlsched.core.cluster import Cluster
from mlsched.core.job import JobSpec
from mlsched.scheduler.policy import Policy
from mlsched.scheduler.view import ClusterView

#: What ``_decide`` reports besides the admission: payoff, cost, completion slot, slots
#: examined (``-inf, nan, None, 0`` when no schedule was looked for).
DecisionFacts = tuple[float, float, int | None, int]

__all__ = [
    "ArrivalRecord",
    "CommittedPlans",
    "CommittedUsage",
    "CommittingPolicy",
    "completion_utility",
    "count_changes",
    "take_level",
]

#: Default share of a plan's payoff that a level plan may give up (``steady_slack``).
DEFAULT_STEADY_SLACK = 0.05

_TRIM_BATCH = 64


class CommittedUsage:
    """Committed amounts per slot; :meth:`window` views slots [start, stop)."""

    def __init__(self, n_servers: int, n_resources: int) -> None:
        self.base = 0
        self._rows = np.zeros((0, n_servers, n_resources))

    def _grow(self, stop: int) -> None:
        need = stop - self.base
        if need <= len(self._rows):
            return
        size = max(need, 2 * len(self._rows), 16)
        rows = np.zeros((size, *self._rows.shape[1:]))
        rows[: len(self._rows)] = self._rows
        self._rows = rows

    def window(self, start: int, stop: int) -> np.ndarray:
        """Committed usage of slots [start, stop), start >= base (a view: do not write)."""
        if start < self.base:
            raise ValueError(f"slot {start} is before the first kept slot {self.base}")
        self._grow(stop)
        return self._rows[start - self.base : stop - self.base]

    def at(self, slot: int) -> np.ndarray:
        return self.window(slot, slot + 1)[0]

    def add(self, slot: int, usage: Mapping[int, np.ndarray], sign: float = 1.0) -> None:
        """Add (``sign=-1``: remove) per-server amounts to a slot; past slots are ignored."""
        if slot < self.base:
            return
        self._grow(slot + 1)
        row = self._rows[slot - self.base]
        for server, amount in usage.items():
            row[server] += sign * amount
        if sign < 0:
            np.maximum(row, 0.0, out=row)  # float dust from add-then-remove

    def trim(self, before: int) -> None:
        """Forget slots before ``before`` (lazily: in batches, to copy rarely)."""
        drop = before - self.base
        if drop < _TRIM_BATCH:
            return
        if drop >= len(self._rows):
            self._rows = np.zeros((0, *self._rows.shape[1:]))
        else:
            self._rows = self._rows[drop:].copy()
        self.base = before


class CommittedPlans:
    """The committed plans of one run on one cluster."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.usage = CommittedUsage(*cluster.capacity.shape)
        self.plans: dict[str, Plan] = {}
        self.specs: dict[str, JobSpec] = {}
        self._table: dict[int, dict[str, Placement]] = {}

    def commit(
        self, job: JobSpec, slots: dict[int, Placement], *, cost: float, payoff: float
    ) -> Plan:
        """Record ``job``'s placements per slot and book their capacity; a slot whose
        placement only moves the job is kept on the previous slot's servers where they
        have room (:meth:`steady`)."""
        slots = self.steady(job, slots)
        for t, placement in slots.items():
            self.usage.add(t, placement.usage(job, self.cluster))
            self._table.setdefault(t, {})[job.job_id] = placement
        plan = Plan(slots=slots, cost=cost, payoff=payoff)
        self.plans[job.job_id] = plan
        self.specs[job.job_id] = job
        return plan

    def steady(self, job: JobSpec, slots: Mapping[int, Placement]) -> dict[int, Placement]:
        """``slots`` with each placement that has the same task counts, types and mode
        (co-located or not) as the job's previous planned slot replaced by that slot's
        placement, when it fits beside what is committed there.

        Per-slot choices are made independently (each slot's prices), so equal counts often
        land on other servers; on the testbed every move is a checkpoint and a restart.
        The replacement runs at the same rate by the runtime models' terms (throughput
        depends on counts, types and, for synchronous PS jobs, co-location), so the plan's
        work per slot is unchanged; its priced cost may differ slightly. Nothing beyond the
        plan is booked: keeping a larger count for a last-slot remainder would avoid one
        more restart, but the capacity it holds cost OASiS utility under contention.
        """
        out: dict[int, Placement] = {}
        prev: Placement | None = None
        capacity = self.cluster.capacity
        for t in sorted(slots):
            placement = slots[t]
            if prev is not None and placement != prev and _same_shape(prev, placement):
                free = capacity - self.usage.at(t)
                if all(
                    np.all(amount <= free[s] + 1e-9)
                    for s, amount in prev.usage(job, self.cluster).items()
                ):
                    placement = prev
            out[t] = placement
            if not placement.is_empty:
                prev = placement
        return out

    def planned(self, slot: int, view: ClusterView) -> dict[str, Placement]:
        """The placements planned for ``slot`` of the jobs still active; forgets the past."""
        for t in [t for t in self._table if t < slot]:
            del self._table[t]
        self.usage.trim(slot)
        return {j: p for j, p in self._table.get(slot, {}).items() if j in view}

    def behind(self, slot: int, view: ClusterView, planned: dict[str, Placement]) -> list[str]:
        """Active jobs past their planned completion with nothing planned in ``slot``."""
        return [
            j
            for j, plan in self.plans.items()
            if j in view and j not in planned and (plan.completion_slot or -1) < slot
        ]

    def free_beside(self, planned: dict[str, Placement]) -> np.ndarray:
        """Capacity left by ``planned`` (servers x resources)."""
        free = np.asarray(self.cluster.capacity, dtype=float).copy()
        for job_id, placement in planned.items():
            for s, amount in placement.usage(self.specs[job_id], self.cluster).items():
                free[s] -= amount
        return free

    def drop(self, job_id: str, *, after: int, release: bool) -> None:
        """Forget a job's placements after slot ``after``; with ``release`` also give back
        their committed capacity (prices fall). Idempotent."""
        plan = self.plans.pop(job_id, None)
        job = self.specs.pop(job_id, None)
        if plan is None or job is None:
            return
        for t, placement in plan.slots.items():
            if t <= after:
                continue
            self._table.get(t, {}).pop(job_id, None)
            if release:
                self.usage.add(t, placement.usage(job, self.cluster), sign=-1.0)


def _same_shape(a: Placement, b: Placement) -> bool:
    """Same worker and PS counts, bundle types, and co-location (spec 000 Fact 1)."""
    return (
        a.n_workers == b.n_workers
        and a.n_ps == b.n_ps
        and a.worker_type == b.worker_type
        and a.ps_type == b.ps_type
        and a.colocated == b.colocated
        and not a.ring
        and not b.ring
    )


def count_changes(shapes: Sequence[Hashable]) -> int:
    """How often adjacent slots' shapes differ (an idle slot between two runs counts: a
    paused job restarts from its checkpoint too)."""
    return sum(1 for a, b in itertools.pairwise(shapes) if a != b)


def take_level(*, best_cost: float, best_payoff: float, level_cost: float, slack: float) -> bool:
    """Whether a level plan (one task count from its first slot to the same completion
    slot) replaces the cheapest one: it is feasible and costs at most ``slack`` x the
    cheapest plan's payoff more.

    With per-slot prices alone a plan is indifferent to count changes: 1 + 4 workers costs
    what 3 + 2 does on an idle cluster, and the dynamic programs' ties often land there.
    On the testbed every change is a checkpoint and a restart, so a plan that keeps one
    count is worth a little more priced cost. Bounding the extra by a share of the payoff
    makes it free where prices are low (an idle cluster: costs are small beside utility)
    and refused where capacity is contended (costs near utility): the spare capacity a
    level plan books would be refused to later jobs there.
    """
    if slack <= 0 or best_payoff <= 0 or not math.isfinite(level_cost):
        return False
    return level_cost - best_cost <= slack * best_payoff


def completion_utility(job: JobSpec, first: int) -> Callable[[int], float]:
    """Utility of completing in slot ``first + i``, as a function of i (duration counted
    from the job's arrival slot; a progress utility is worth its value at the whole work
    whenever the job finishes)."""
    u = job.utility
    if u.over_progress:
        worth = u(job.total_work)
        return lambda i: worth
    offset = first - job.arrival_slot
    return lambda i: u(offset + i)


@dataclass(frozen=True)
class ArrivalRecord:
    """One admission decision, for reports: payoff is -inf when no schedule was feasible."""

    job_id: str
    slot: int
    admitted: bool
    payoff: float
    cost: float
    completion_slot: int | None
    seconds: float
    slots_examined: int


class CommittingPolicy(Policy):
    """A policy that commits each admitted job's whole schedule at its arrival (OASiS,
    PD-ORS): subclasses decide (:meth:`_decide`) and may run jobs behind their plans
    (:meth:`_best_effort`); the slot loop, the records and the release rules are here."""

    def __init__(
        self,
        *,
        release_on_early_finish: bool = False,
        best_effort: bool = True,
        steady_slack: float = DEFAULT_STEADY_SLACK,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        if not (
            isinstance(steady_slack, (int, float))
            and not isinstance(steady_slack, bool)
            and 0 <= steady_slack <= 1
        ):
            raise ValueError(f"steady_slack must be a number in [0, 1], got {steady_slack!r}")
        #: Share of a plan's payoff a level plan may give up (:func:`take_level`; 0: never).
        self.steady_slack = float(steady_slack)
        for flag, value in (
            ("release_on_early_finish", release_on_early_finish),
            ("best_effort", best_effort),
        ):
            if not isinstance(value, bool):
                raise ValueError(f"{flag} must be true or false, got {value!r}")
        self.release_on_early_finish = release_on_early_finish
        self.best_effort = best_effort
        #: Every admission decision in arrival order.
        self.decisions: list[ArrivalRecord] = []
        self._committed: CommittedPlans | None = None
        self._next_slot = 0

    @abstractmethod
    def _decide(self, job: JobSpec, view: ClusterView) -> tuple[Admission, DecisionFacts]:
        """Admit (committing the plan) or reject ``job``."""

    def _best_effort(
        self, slot: int, view: ClusterView, planned: dict[str, Placement]
    ) -> dict[str, Placement]:
        """Placements for jobs behind their plans on what ``planned`` leaves (none here)."""
        return {}

    def on_arrival(self, job: JobSpec, view: ClusterView) -> Admission:
        start = time.perf_counter()
        admission, (payoff, cost, completion, examined) = self._decide(job, view)
        self.decisions.append(
            ArrivalRecord(
                job.job_id,
                view.slot,
                admission.is_admitted(),
                payoff,
                cost,
                completion,
                time.perf_counter() - start,
                examined,
            )
        )
        return admission

    def allocate(self, slot: int, view: ClusterView) -> Allocation:
        assert self._committed is not None, "setup() first"
        self._next_slot = slot + 1
        planned = self._committed.planned(slot, view)
        if self.best_effort:
            planned.update(self._best_effort(slot, view, planned))
        return Allocation(slot, planned)

    def on_completion(self, job_id: str, view: ClusterView) -> None:
        if self._committed is not None:
            self._committed.drop(job_id, after=view.slot, release=self.release_on_early_finish)

    def release(self, job_id: str) -> None:
        if self._committed is not None:
            self._committed.drop(job_id, after=self._next_slot - 1, release=True)
