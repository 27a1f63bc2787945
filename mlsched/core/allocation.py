"""Placements, per-slot allocations, committed plans, admissions and job states.

Servers are referred to by their index in :attr:`Cluster.servers` (fast on hot paths);
the gRPC edge translates indices to names.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterable, Iterator, KeysView, Mapping, ValuesView
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property
from operator import itemgetter

import numpy as np

from mlsched.core.cluster import Cluster
from mlsched.core.errors import SpecError
from mlsched.core.job import JobSpec

__all__ = [
    "FINAL_STATES",
    "TRANSITIONS",
    "Admission",
    "Allocation",
    "Decision",
    "JobState",
    "Placement",
    "Plan",
    "Quote",
    "RejectKind",
]


_count = itemgetter(1)


def _normalise(pairs: Iterable[tuple[int, int]], what: str) -> tuple[tuple[int, int], ...]:
    if type(pairs) is tuple and len(pairs) <= 1:  # none, or one task group: the common case
        if not pairs:
            return pairs
        one = pairs[0]
        if type(one) is tuple and len(one) == 2:
            server, count = one
            if type(server) is int and type(count) is int and count > 0:
                return pairs
    merged: dict[int, int] = {}
    for server, count in pairs:
        if count < 0:
            raise SpecError(what, count, "a task count >= 0")
        if count:
            merged[int(server)] = merged.get(int(server), 0) + int(count)
    return tuple(sorted(merged.items()))


@dataclass(frozen=True)
class Placement:
    """Where one job's tasks run in one slot: (server index, count) for workers and PSs.

    ``worker_type``/``ps_type`` name the typed bundle chosen (specs 002/004); ``None`` means
    the job's default demand. For a ring-all-reduce job ``ring`` may give the ring order of
    servers (spec 003); by default workers are ordered by server index.
    """

    workers: tuple[tuple[int, int], ...]
    ps: tuple[tuple[int, int], ...] = ()
    worker_type: str | None = None
    ps_type: str | None = None
    ring: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        workers = _normalise(self.workers, "workers")
        ps = _normalise(self.ps, "ps")
        object.__setattr__(self, "workers", workers)
        object.__setattr__(self, "ps", ps)
        # The counts every placement is asked for, filled in here: a cached_property's
        # first read takes a lock (Python 3.11), once per placement on the hot path.
        object.__setattr__(self, "n_workers", sum(map(_count, workers)))
        object.__setattr__(self, "n_ps", sum(map(_count, ps)))
        # Placements key every cache on the hot path: hash once.
        object.__setattr__(
            self, "_hash", hash((self.workers, self.ps, self.worker_type, self.ps_type, self.ring))
        )

    def __hash__(self) -> int:
        return self._hash  # type: ignore[attr-defined]

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Placement):
            return NotImplemented
        return (
            self._hash == other._hash  # type: ignore[attr-defined]
            and self.workers == other.workers
            and self.ps == other.ps
            and self.worker_type == other.worker_type
            and self.ps_type == other.ps_type
            and self.ring == other.ring
        )

    @classmethod
    def of(
        cls, workers: Mapping[int, int], ps: Mapping[int, int] | None = None, **kwargs: str | None
    ) -> Placement:
        return cls(tuple(workers.items()), tuple((ps or {}).items()), **kwargs)  # type: ignore[arg-type]

    # n_workers and n_ps are filled in at construction; these say what they are.
    @cached_property
    def n_workers(self) -> int:
        return sum(c for _, c in self.workers)

    @cached_property
    def n_ps(self) -> int:
        return sum(c for _, c in self.ps)

    @cached_property
    def servers(self) -> frozenset[int]:
        return frozenset(s for s, _ in self.workers) | frozenset(s for s, _ in self.ps)

    @property
    def colocated(self) -> bool:
        """All workers and PSs on one server (spec 000 Fact 1, 002 q_j, 004 q_i)."""
        return len(self.servers) <= 1

    @property
    def is_empty(self) -> bool:
        return not self.workers

    def usage(self, job: JobSpec, cluster: Cluster) -> dict[int, np.ndarray]:
        """Resource use per server index as arrays over the cluster's resource order."""
        w = cluster.demand_array(job.worker_demand(self.worker_type))
        p = cluster.demand_array(job.ps_demand(self.ps_type))
        # Fresh arrays (callers may keep or change them); servers are unique in each part.
        out = {s: w.copy() if c == 1 else c * w for s, c in self.workers}
        for s, c in self.ps:
            u = p.copy() if c == 1 else c * p
            prev = out.get(s)
            out[s] = u if prev is None else prev + u
        return out

    def describe(self, cluster: Cluster | None = None) -> str:
        def name(s: int) -> str:
            return cluster.servers[s].name if cluster is not None else str(s)

        w = ",".join(f"{name(s)}x{c}" for s, c in self.workers)
        if not self.ps:
            return f"W[{w}]"
        p = ",".join(f"{name(s)}x{c}" for s, c in self.ps)
        return f"W[{w}] PS[{p}]"


class Allocation(Mapping[str, Placement]):
    """One slot's decision: job id -> placement. Jobs absent from it do not run."""

    __slots__ = ("_placements", "slot")

    def __init__(self, slot: int, placements: Mapping[str, Placement] | None = None) -> None:
        self.slot = slot
        self._placements: dict[str, Placement] = {
            j: p
            for j, p in (placements or {}).items()
            if p.workers  # not p.is_empty, inlined: once per job and slot
        }

    def __getitem__(self, job_id: str) -> Placement:
        return self._placements[job_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._placements)

    def __len__(self) -> int:
        return len(self._placements)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._placements

    # The Mapping mixins go through __getitem__ per item; the engine iterates every slot.
    def items(self) -> ItemsView[str, Placement]:
        return self._placements.items()

    def keys(self) -> KeysView[str]:
        return self._placements.keys()

    def values(self) -> ValuesView[Placement]:
        return self._placements.values()

    def get(self, job_id: str, default: Placement | None = None) -> Placement | None:  # type: ignore[override]
        return self._placements.get(job_id, default)

    def __repr__(self) -> str:
        return f"Allocation(slot={self.slot}, jobs={len(self._placements)})"


@dataclass(frozen=True)
class Plan:
    """A committed schedule: placement per slot (OASiS, PD-ORS, DPS decide it at arrival)."""

    slots: Mapping[int, Placement]
    cost: float = 0.0
    payoff: float = 0.0

    @property
    def completion_slot(self) -> int | None:
        """Last slot with at least one worker (spec 001 (8))."""
        used = [t for t, p in self.slots.items() if not p.is_empty]
        return max(used) if used else None

    @property
    def first_slot(self) -> int | None:
        used = [t for t, p in self.slots.items() if not p.is_empty]
        return min(used) if used else None

    def at(self, slot: int) -> Placement | None:
        return self.slots.get(slot)


class Decision(str, Enum):
    ADMIT = "admit"
    REJECT = "reject"


class RejectKind(str, Enum):
    """Why a job was turned away: 'not now' (capacity) is not 'never' (infeasible)."""

    CAPACITY = "capacity"  # not enough free capacity in the window it could use
    INFEASIBLE = "infeasible"  # can never run (demand exceeds any server, bad spec, ...)
    UNPROFITABLE = "unprofitable"  # priced out: best payoff <= 0 (primal-dual policies)
    DECLINED = "declined"  # the user declined the quoted price


@dataclass(frozen=True)
class Quote:
    """A posted price: the total charge and, for reporting, the unit prices behind it."""

    total: float
    unit_prices: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.total >= 0:
            raise SpecError("quote.total", self.total, "a price >= 0")


@dataclass(frozen=True)
class Admission:
    """A policy's answer to an arrival: admit (optionally with a plan or a price) or reject.

    Exactly one of the two holds: an admitted job has no ``reject_kind``; a rejected one has
    no plan.
    """

    decision: Decision
    reason: str = ""
    reject_kind: RejectKind | None = None
    quote: Quote | None = None
    plan: Plan | None = None

    def __post_init__(self) -> None:
        if self.decision is Decision.ADMIT and self.reject_kind is not None:
            raise ValueError("an admitted job cannot carry a reject_kind")
        if self.decision is Decision.REJECT:
            if self.reject_kind is None:
                object.__setattr__(self, "reject_kind", RejectKind.CAPACITY)
            if self.plan is not None:
                raise ValueError("a rejected job cannot carry a plan")

    @classmethod
    def admit(
        cls, *, plan: Plan | None = None, quote: Quote | None = None, reason: str = ""
    ) -> Admission:
        return cls(Decision.ADMIT, reason=reason, plan=plan, quote=quote)

    @classmethod
    def reject(cls, kind: RejectKind, reason: str = "", *, quote: Quote | None = None) -> Admission:
        return cls(Decision.REJECT, reason=reason, reject_kind=kind, quote=quote)

    def is_admitted(self) -> bool:
        return self.decision is Decision.ADMIT


class JobState(str, Enum):
    """A job's lifecycle: one state machine for the engine, the controller, its store and
    the status it reports (:data:`TRANSITIONS` lists every allowed move)::

        pending --> admitted --> running <--> paused
           |           |           |
           v           |           +--> done
        rejected       +-----------+--> failed | cancelled   (from any active state)

    The engine moves a job at slot boundaries. Between boundaries the controller's status
    refines an active job with what its processes are doing; these *live* states are
    reported, never stored, and the next boundary replaces them: ``re-placing`` (a launch
    failed or an agent was lost; placed again at the next boundary), ``stopping`` (moving
    to a new layout: its processes checkpoint and stop) and ``cancelling`` (a cancel was
    asked for; the job ends at the next boundary). done, rejected, failed and cancelled
    are final.
    """

    PENDING = "pending"
    ADMITTED = "admitted"
    RUNNING = "running"
    PAUSED = "paused"
    REPLACING = "re-placing"
    STOPPING = "stopping"
    CANCELLING = "cancelling"
    DONE = "done"
    REJECTED = "rejected"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_final(self) -> bool:
        return not TRANSITIONS[self]

    @property
    def is_active(self) -> bool:
        """Admitted and not finished: the policy may allocate to it."""
        return self is not JobState.PENDING and not self.is_final

    @property
    def is_live(self) -> bool:
        """A state only the controller's status reports, between slot boundaries."""
        return self in _LIVE

    def can_become(self, other: JobState) -> bool:
        """Whether a job in this state may move to ``other`` (staying is always allowed)."""
        return other is self or other in TRANSITIONS[self]


_ENDS = frozenset({JobState.DONE, JobState.FAILED, JobState.CANCELLED})
_LIVE = frozenset({JobState.REPLACING, JobState.STOPPING, JobState.CANCELLING})
_RUNS = frozenset({JobState.RUNNING, JobState.PAUSED}) | _ENDS | _LIVE

#: Every allowed move of a job's state; a final state has none.
TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    JobState.PENDING: frozenset({JobState.ADMITTED, JobState.REJECTED, JobState.CANCELLED}),
    JobState.ADMITTED: _RUNS,
    JobState.RUNNING: _RUNS,
    JobState.PAUSED: _RUNS,
    JobState.REPLACING: _RUNS,
    JobState.STOPPING: _RUNS,
    JobState.CANCELLING: _ENDS,
    JobState.DONE: frozenset(),
    JobState.REJECTED: frozenset(),
    JobState.FAILED: frozenset(),
    JobState.CANCELLED: frozenset(),
}

#: The values of the final states (what a client reading status strings compares with).
FINAL_STATES: tuple[str, ...] = tuple(s.value for s in JobState if s.is_final)
