"""The controller's picture of its agents: registration, heartbeats, liveness.

An agent is known by its name (``agent_id``), stable across agent and controller restarts,
so a re-registering agent keeps its place. Servers of the engine's cluster are the live
agents in first-registration order; :meth:`AgentRegistry.cluster` builds that cluster.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from mlsched.core.cluster import Cluster, Pool, Server, Topology
from mlsched.core.device_types import TypeCatalogue
from mlsched.core.reports import Heartbeat, TaskReport, Telemetry
from mlsched.core.resources import ResourceVector

__all__ = ["AgentInfo", "AgentRegistry"]

DEFAULT_NIC_GBPS = 10.0


@dataclass
class AgentInfo:
    agent_id: str
    host: str
    capacity: dict[str, float]
    pool: str = "both"
    rack: str = "rack0"
    gpu_type: str | None = None
    nic_gbps: float = DEFAULT_NIC_GBPS
    real_gpus: bool = False
    gpu_count: int = 0
    port_lo: int = 29500
    port_hi: int = 29999
    version: str = ""
    gpus: list[dict[str, Any]] = field(default_factory=list)  # index, uuid, model, memory_bytes
    seq: int = 0
    alive: bool = True
    returning: bool = False  # known before a controller restart, not registered again yet
    last_seen: float = field(default_factory=time.monotonic)
    tasks: dict[str, TaskReport] = field(default_factory=dict)  # as last reported
    telemetry: Telemetry | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "capacity": self.capacity,
            "pool": self.pool,
            "rack": self.rack,
            "gpu_type": self.gpu_type,
            "nic_gbps": self.nic_gbps,
            "real_gpus": self.real_gpus,
            "gpu_count": self.gpu_count,
            "port_lo": self.port_lo,
            "port_hi": self.port_hi,
            "version": self.version,
            "gpus": self.gpus,
        }

    @classmethod
    def from_dict(cls, agent_id: str, seq: int, raw: dict[str, Any], alive: bool) -> AgentInfo:
        return cls(agent_id=agent_id, seq=seq, alive=alive, **raw)

    def gpu_model(self, uuid: str) -> str:
        """The model the agent registered for its device ``uuid`` (else its GPU type)."""
        model = next((g.get("model", "") for g in self.gpus if g.get("uuid") == uuid), "")
        return model or self.gpu_type or ""

    def server(self) -> Server:
        return Server(
            name=self.agent_id,
            capacity=ResourceVector(self.capacity),
            pool=Pool(self.pool),
            gpu_type=self.gpu_type,
            rack=self.rack,
            uplink_gbps=self.nic_gbps or DEFAULT_NIC_GBPS,
        )


class AgentRegistry:
    """Thread-safe: gRPC handlers write, the slot loop reads."""

    def __init__(self, *, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._lock = threading.RLock()
        self._agents: dict[str, AgentInfo] = {}
        self._next_seq = 0
        self._changed = True  # membership changed since the last cluster() call

    def load(self, agents: list[AgentInfo]) -> None:
        """Agents known before a controller restart: not alive until they register again,
        and not lost (their tasks may still run) until the timeout passes without that."""
        with self._lock:
            now = time.monotonic()
            for a in agents:
                a.alive, a.returning, a.last_seen = False, True, now
                self._agents[a.agent_id] = a
                self._next_seq = max(self._next_seq, a.seq + 1)

    def register(self, info: AgentInfo) -> AgentInfo:
        with self._lock:
            old = self._agents.get(info.agent_id)
            info.seq = old.seq if old is not None else self._next_seq
            if old is None:
                self._next_seq += 1
            if old is None or not old.alive or old.to_dict() != info.to_dict():
                self._changed = True
            if old is not None:
                info.tasks = old.tasks
            info.alive, info.last_seen = True, time.monotonic()
            self._agents[info.agent_id] = info
            return info

    def heartbeat(self, beat: Heartbeat) -> AgentInfo | None:
        """Record a heartbeat; None if the agent is unknown or was declared lost (it must
        register again, so that the controller re-plans with it deliberately)."""
        with self._lock:
            agent = self._agents.get(beat.agent_id)
            if agent is None or not agent.alive:
                return None
            agent.last_seen = time.monotonic()
            agent.tasks = {t.task_id: t for t in beat.tasks}
            if beat.telemetry is not None:
                agent.telemetry = beat.telemetry
            return agent

    def expire(self) -> list[str]:
        """Declare agents silent for longer than the timeout lost; their ids."""
        now = time.monotonic()
        lost: list[str] = []
        gone: list[str] = []  # never came back after a restart: no change to the cluster
        with self._lock:
            for a in self._agents.values():
                if a.returning and now - a.last_seen > self.timeout_s:
                    a.returning = False
                    gone.append(a.agent_id)
                elif a.alive and now - a.last_seen > self.timeout_s:
                    a.alive = False
                    a.tasks = {}
                    lost.append(a.agent_id)
            if lost:
                self._changed = True
        return lost + gone

    def returning(self) -> list[str]:
        """Agents known before a controller restart that may still come back."""
        with self._lock:
            return [a.agent_id for a in self._agents.values() if a.returning]

    def get(self, agent_id: str) -> AgentInfo | None:
        with self._lock:
            return self._agents.get(agent_id)

    def all(self) -> list[AgentInfo]:
        with self._lock:
            return sorted(self._agents.values(), key=lambda a: a.seq)

    def alive(self) -> list[AgentInfo]:
        return [a for a in self.all() if a.alive]

    def mark_changed(self) -> None:
        """Look at the membership again at the next slot boundary."""
        with self._lock:
            self._changed = True

    def take_changed(self) -> bool:
        with self._lock:
            changed, self._changed = self._changed, False
            return changed

    def cluster(
        self, topology: Topology | None = None, types: TypeCatalogue | None = None
    ) -> Cluster | None:
        """The live agents as a cluster with the controller's topology and type catalogue
        (None when there are none)."""
        servers = [a.server() for a in self.alive()]
        if not servers:
            return None
        return Cluster(tuple(servers), topology or Topology(), types or TypeCatalogue())
