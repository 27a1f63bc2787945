"""The cluster as the controller reports it to clients (``mlsched status``): each agent's
liveness, capacity and use, the slot, the policy, the runtime model's error and the market."""

from __future__ import annotations

import time

from mlsched.controller.agents import AgentInfo, AgentRegistry
from mlsched.controller.config import ControllerConfig
from mlsched.controller.pricing import market
from mlsched.controller.status import AgentGpu, AgentStatus, ClusterStatus
from mlsched.engine.engine import Engine

__all__ = ["cluster_status"]


def cluster_status(
    engine: Engine | None,
    agents: AgentRegistry,
    cfg: ControllerConfig,
    model_error: tuple[float, int] = (0.0, 0),
) -> ClusterStatus:
    """Now's picture; before the first plan (no engine) the agents alone. ``model_error``
    is the sum of the runtime model's absolute relative errors and their count, kept as
    they come (the engine's list of them grows by every running job every slot)."""
    used: dict[str, dict[str, float]] = {}
    if engine is not None:
        names = engine.cluster.resource_names
        in_use = engine.used.tolist()  # one copy, not one per server and resource
        for i, server in enumerate(engine.cluster.servers):
            used[server.name] = {n: float(in_use[i][r]) for r, n in enumerate(names)}
    now = time.monotonic()
    statuses = tuple(
        AgentStatus(
            agent_id=a.agent_id,
            host=a.host,
            alive=a.alive,
            last_heartbeat_age_s=now - a.last_seen,
            tasks=len(a.tasks),
            capacity=dict(a.capacity),
            used=used.get(a.agent_id, {}),
            gpu_type=a.gpu_type or "",
            gpus=_gpus(a),
        )
        for a in agents.all()
    )
    total, count = model_error
    return ClusterStatus(
        slot=engine.slot if engine else 0,
        slot_seconds=cfg.slot_seconds,
        policy=cfg.policy,
        agents=statuses,
        model_error_mean_abs=total / count if count else 0.0,
        model_error_samples=count,
        **(market(list(engine.records.values())) if engine is not None else {}),
    )


def _gpus(agent: AgentInfo) -> tuple[AgentGpu, ...]:
    """The agent's GPUs as its last telemetry had them, with the model it registered."""
    t = agent.telemetry
    if t is None:
        return ()
    return tuple(
        AgentGpu(
            index=g.index,
            uuid=g.uuid,
            model=agent.gpu_model(g.uuid),
            util_percent=g.util_percent,
            mem_used_bytes=g.mem_used_bytes,
            mem_total_bytes=g.mem_total_bytes,
            power_w=g.power_w,
        )
        for g in t.gpus
    )
