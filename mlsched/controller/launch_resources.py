"""What a launch takes on its hosts besides their capacity: a rendezvous port on the
store's host and GPU indices on each agent with GPUs, both avoiding those the running
generations hold."""

from __future__ import annotations

from collections.abc import Sequence

from mlsched.controller.agents import AgentRegistry
from mlsched.controller.runs import Generation, Layout
from mlsched.core.job import JobSpec

__all__ = ["gpu_indices", "take_port"]


def gpu_indices(
    job: JobSpec, layout: Layout, agents: AgentRegistry, gens: Sequence[Generation]
) -> dict[tuple[str, int], list[int]]:
    """GPU indices per (agent, worker slot) for agents with GPUs, avoiding those in use by
    ``gens`` (the running generations)."""
    need = int(job.worker.get("gpu", 0.0))
    if need <= 0:
        return {}
    out: dict[tuple[str, int], list[int]] = {}
    for agent_id, n_workers, _ in layout:
        agent = agents.get(agent_id)
        if agent is None or agent.gpu_count <= 0:
            continue
        used = {
            i
            for gen in gens
            for t, spec in gen.tasks.items()
            if gen.agent_of[t] == agent_id
            for i in spec.gpu_indices
        }
        free = [i for i in range(agent.gpu_count) if i not in used]
        for w in range(n_workers):
            out[(agent_id, w)] = free[w * need : (w + 1) * need]
    return out


def take_port(
    host: str, lo: int, hi: int, gens: Sequence[Generation], next_port: dict[str, int]
) -> int:
    """A port in ``[lo, hi]`` on ``host`` that no generation of ``gens`` holds. The search
    rotates through the range from where the last one ended (``next_port``, updated): a
    just-closed store port may linger in TIME_WAIT."""
    used = {p for gen in gens for h, p in gen.ports if h == host}
    start = next_port.get(host, lo)
    span = hi - lo + 1
    for i in range(span):
        port = lo + (start - lo + i) % span
        if port not in used:
            next_port[host] = port + 1 if port < hi else lo
            return port
    raise RuntimeError(f"no free port in {lo}-{hi} on {host}")
