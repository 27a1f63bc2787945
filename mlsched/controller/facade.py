"""What the controller's endpoints (gRPC services, Prometheus metrics) need of it.

:class:`mlsched.controller.server.Controller` is the one implementation; the endpoints
depend on this protocol, so they sit below the controller in the import graph.
"""

from __future__ import annotations

from typing import Protocol

from mlsched.controller.agents import AgentInfo, AgentRegistry
from mlsched.controller.cluster_executor import ClusterExecutor
from mlsched.controller.config import ControllerConfig
from mlsched.controller.probes import Probes, ProbeStatus
from mlsched.controller.status import ClusterStatus, JobStatus
from mlsched.controller.store import Store
from mlsched.controller.tenancy import Tenancy
from mlsched.core.reports import Heartbeat
from mlsched.net.users import User

__all__ = ["ControllerFacade"]


class ControllerFacade(Protocol):
    """The controller as its endpoints see it."""

    @property
    def cfg(self) -> ControllerConfig: ...
    @property
    def agents(self) -> AgentRegistry: ...
    @property
    def executor(self) -> ClusterExecutor: ...
    @property
    def probes(self) -> Probes: ...

    def register_agent(self, info: AgentInfo) -> AgentInfo: ...
    def heartbeat(self, beat: Heartbeat) -> AgentInfo | None: ...
    @property
    def tenancy(self) -> Tenancy: ...

    @property
    def store(self) -> Store: ...

    def submit(self, document: str, user: User = ..., *, dry_run: bool = ...) -> list[str]: ...
    def cancel(self, job_id: str, user: User = ...) -> JobStatus: ...
    def job(self, job_id: str) -> JobStatus: ...
    def jobs(self) -> list[JobStatus]: ...
    def cluster_status(self) -> ClusterStatus: ...
    def revenue(self) -> float: ...
    def probe(self, document: str, placement: str, steps: int, warmup: int,
              timeout_s: float, seconds: float = 10.0) -> ProbeStatus: ...  # fmt: skip
