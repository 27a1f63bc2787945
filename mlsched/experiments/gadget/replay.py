"""Q4: every slot's allocation replayed apart from the engine's own checks.

Server loads are recomputed from the job specs and the placements, link loads from each
ring's order (``Links.ring_load``: b_i on every link of every inter-server hop), and each
multi-server ring must name every server that hosts a worker exactly once (one cycle over
the hosts, each server's workers adjacent). A job may not run more than N_i workers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from mlsched.core.allocation import Allocation, Placement
from mlsched.core.cluster import Cluster
from mlsched.core.job import JobSpec

__all__ = ["Replay"]

_TOLERANCE = 1e-6
#: Problems quoted in a run's record (the count covers them all).
_EXAMPLES = 3


class Replay:
    """Checks allocations of one run, slot by slot, and counts what is wrong."""

    def __init__(self, cluster: Cluster, jobs: Mapping[str, JobSpec]) -> None:
        self.cluster = cluster
        self.jobs = jobs
        self.slots = 0
        self.placements = 0
        self.multi_server = 0
        self.problems = 0
        self.examples: list[str] = []

    def _ring_problem(self, p: Placement) -> str:
        servers = [s for s, _ in p.workers]
        ring = list(p.ring) if p.ring is not None else None
        if len(servers) == 1:
            return "" if ring in (None, servers) else f"ring {ring} on one server {servers}"
        if ring is None:
            return f"no ring order over servers {servers}"
        if len(ring) != len(set(ring)) or set(ring) != set(servers):
            return f"ring {ring} does not visit each of its servers {servers} once"
        return ""

    def _note(self, slot: int, what: str) -> None:
        self.problems += 1
        if len(self.examples) < _EXAMPLES:
            self.examples.append(f"slot {slot}: {what}")

    def check(self, allocation: Allocation) -> None:
        c = self.cluster
        used = np.zeros_like(c.capacity, dtype=float)
        link_used = np.zeros(len(c.links))
        self.slots += 1
        for job_id, p in allocation.items():
            job = self.jobs[job_id]
            self.placements += 1
            if p.n_workers > job.worker_cap:
                self._note(allocation.slot, f"{job_id}: {p.n_workers} workers > N_i")
            demand = c.demand_array(job.worker_demand(p.worker_type))
            for s, count in p.workers:
                used[s] += count * demand
            why = self._ring_problem(p)
            if why:
                self._note(allocation.slot, f"{job_id}: {why}")
            elif len(p.workers) > 1:
                self.multi_server += 1
                assert p.ring is not None
                for link, gbps in c.links.ring_load(p.ring, job.hop_gbps or 0.0).items():
                    link_used[link] += gbps
        for s, r in np.argwhere(used - c.capacity > _TOLERANCE):
            self._note(
                allocation.slot,
                f"server {c.servers[s].name} {c.resource_names[r]} {used[s, r]:g} > "
                f"{c.capacity[s, r]:g}",
            )
        for k in np.flatnonzero(link_used - c.links.capacity > _TOLERANCE):
            self._note(
                allocation.slot,
                f"link {c.links.links[k].name} {link_used[k]:g} > {c.links.capacity[k]:g} Gbit/s",
            )

    def report(self) -> dict[str, Any]:
        return {
            "slots": self.slots,
            "placements": self.placements,
            "multi_server": self.multi_server,
            "problems": self.problems,
            "examples": list(self.examples),
        }
