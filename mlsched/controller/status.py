"""What the controller tells its clients, as plain data: a job's status, the cluster's.

The controller builds these; the job service turns them into messages (``serde.py``). The
fields and their defaults are those of ``jobs.proto``'s ``JobStatus``, ``AgentStatus`` and
``GetClusterStatusResponse``, so that the conversion is one-to-one.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from mlsched.core.allocation import FINAL_STATES, JobState

if TYPE_CHECKING:
    from mlsched.controller.executor_jobs import JobView

__all__ = [
    "FINAL_STATES",
    "AgentGpu",
    "AgentStatus",
    "ClusterStatus",
    "JobStatus",
    "PlacementEntry",
    "placement_entries",
    "refined_status",
]


@dataclass(frozen=True)
class PlacementEntry:
    agent_id: str
    workers: int
    ps: int


@dataclass(frozen=True)
class JobStatus:
    job_id: str
    state: str  # a JobState's value (core/allocation.py), live states included
    reason: str = ""
    arrival_slot: int = 0
    progress: float = 0.0  # work units done
    total_work: float = 0.0
    completion_slot: int = 0  # -1 until done
    utility: float = 0.0
    placement: tuple[PlacementEntry, ...] = ()
    restarts: int = 0
    predicted_iteration_s: float = 0.0
    measured_iteration_s: float = 0.0
    price: float = 0.0
    slots_run: int = 0
    iterations: int = 0  # trainer steps (async PS: pushes; sync: rounds)
    admitted: bool = False
    admitted_slot: int = 0  # -1 if never admitted
    failed_generations: int = 0  # launches that ended in a failure (lost agent, crash)
    lost_steps: int = 0  # trainer steps those failures threw away
    checkpoint_step: int = 0  # where the next launch would resume
    launch: str = ""  # how its processes start: ps, torchrun, horovod, direct
    quote_decision: str = ""  # accepted, declined, or "" (no price put to the user)
    owner: str = ""  # the user who submitted it ("": stored before owners were recorded)
    price_paid: float = 0.0
    worker_price: float = 0.0  # the quote's unit prices
    ps_price: float = 0.0


@dataclass(frozen=True)
class AgentGpu:
    """One GPU of an agent as its last telemetry had it (None: NVML did not say)."""

    index: int
    uuid: str = ""
    model: str = ""
    util_percent: float | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    power_w: float | None = None


@dataclass(frozen=True)
class AgentStatus:
    agent_id: str
    host: str
    alive: bool
    last_heartbeat_age_s: float
    tasks: int  # tasks it last reported
    capacity: dict[str, float] = field(default_factory=dict)
    used: dict[str, float] = field(default_factory=dict)  # allocated this slot
    gpu_type: str = ""
    gpus: tuple[AgentGpu, ...] = ()  # from its last telemetry (none: no NVML)


@dataclass(frozen=True)
class ClusterStatus:
    slot: int
    slot_seconds: float
    policy: str
    agents: tuple[AgentStatus, ...] = ()
    model_error_mean_abs: float = 0.0  # mean |predicted - measured| / measured
    model_error_samples: int = 0
    revenue: float = 0.0  # what accepted quotes charged
    quotes: int = 0  # prices put to users
    quotes_accepted: int = 0


# The engine's states the executor's live view may refine (with a live state, or running).
_REFINED = tuple(
    s.value for s in (JobState.PENDING, JobState.ADMITTED, JobState.RUNNING, JobState.PAUSED)
)


def refined_status(out: JobStatus, view: JobView) -> JobStatus:
    """A job's status as of the last slot boundary, with what its processes do now."""
    changes: dict[str, Any] = {}
    if view.live is not None:
        units, steps = view.live
        changes["iterations"] = max(out.iterations, steps)
        if out.state in _REFINED:
            changes["progress"] = max(out.progress, min(out.total_work, units))
    if view.facts is not None:
        changes["failed_generations"] = view.facts.failed_generations
        changes["lost_steps"] = view.facts.lost_steps
        changes["checkpoint_step"] = view.facts.checkpoint_step
    doing = view.doing
    if doing is not None and out.state in _REFINED:
        # The engine's snapshot is taken at slot boundaries; the executor knows what the
        # processes do now (a job launched this slot runs, where it was launched; a lost
        # agent's job waits to be re-placed).
        changes["state"] = doing.state.value
        changes["reason"] = doing.reason or out.reason
        changes["placement"] = placement_entries(doing.layout)
    return replace(out, **changes) if changes else out


def placement_entries(layout: tuple[tuple[str, int, int], ...]) -> tuple[PlacementEntry, ...]:
    return tuple(PlacementEntry(agent, w, k) for agent, w, k in layout)
