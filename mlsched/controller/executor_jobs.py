"""What the cluster executor keeps and answers about each job, and its view of the live
agents (:mod:`mlsched.controller.cluster_executor` holds the executor itself)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from mlsched.controller.agents import AgentRegistry
from mlsched.controller.runs import JobRun, Layout
from mlsched.core.allocation import JobState
from mlsched.core.job import JobSpec
from mlsched.engine.executor import JobFailure

__all__ = ["ExecutorJob", "JobView", "LiveAgents", "LiveState", "RunFacts"]


class LiveState(NamedTuple):
    state: JobState  # running, paused or a live state (re-placing, stopping)
    reason: str
    layout: Layout


class RunFacts(NamedTuple):
    failed_generations: int
    lost_steps: int
    checkpoint_step: int
    checkpoint_units: float


class JobView(NamedTuple):
    """What the executor adds to a job's status between slot boundaries."""

    live: tuple[float, int] | None  # work units and trainer steps its processes reported
    facts: RunFacts | None
    doing: LiveState | None


@dataclass
class ExecutorJob:
    """Everything the executor keeps about one job."""

    spec: JobSpec
    run: JobRun  # its generations and checkpoint (persisted)
    want: Layout | None = None  # the layout this slot's allocation gives it (None: none)
    #: Why it can never run again: reported once, as fatal, in the next slot report (the
    #: engine ends the job), and kept so that nothing launches it again.
    fatal: str = ""
    fatal_reported: bool = False
    failure: JobFailure | None = None  # a generation's failure, for the next slot report


class LiveAgents:
    """The registry's live agents, as a container (looked up, not copied)."""

    def __init__(self, agents: AgentRegistry) -> None:
        self.agents = agents

    def __contains__(self, agent_id: object) -> bool:
        agent = self.agents.get(agent_id) if isinstance(agent_id, str) else None
        return agent is not None and agent.alive
