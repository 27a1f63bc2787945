"""Per-slot link reservations of ring-all-reduce jobs, and the rings' validity (spec 003).

The engine hands every changed placement to :class:`LinkLedger`; a job that reserves
``hop_gbps`` holds it on each link of each inter-server hop of its ring for as long as the
placement stands. A ring order (``Placement.ring``) must list each of the job's worker
servers exactly once: the workers of one server are then adjacent, and the inter-server hops
form one cycle over the job's servers (spec 003 A1, valid by construction).
"""

from __future__ import annotations

import numpy as np

from mlsched.core.allocation import Placement
from mlsched.core.cluster import Cluster
from mlsched.core.job import JobSpec
from mlsched.perfmodel.paths import ring_order

__all__ = ["LinkLedger", "ring_problem"]

_TOLERANCE = 1e-6


def ring_problem(job: JobSpec, p: Placement) -> str | None:
    """Why ``p``'s ring order is not a valid ring for ``job``, or None."""
    if p.ring is None:
        return None
    if job.uses_ps:
        return "a parameter-server job got a ring order"
    servers = [s for s, _ in p.workers]  # sorted and distinct (Placement normalises)
    if sorted(p.ring) != servers:
        return f"ring {list(p.ring)} must list each of its worker servers {servers} exactly once"
    return None


class LinkLedger:
    """Gbit/s reserved on each directed link of one cluster by the placements in force."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.used = np.zeros(len(cluster.links))
        self._loads: dict[tuple[str, Placement], tuple[tuple[int, float], ...]] = {}
        self._touched = False

    def load(self, job: JobSpec, p: Placement) -> tuple[tuple[int, float], ...]:
        """(link, Gbit/s) that ``job`` reserves under ``p``; empty when it reserves none."""
        if not job.hop_gbps or len(p.workers) < 2:
            return ()
        key = (job.job_id, p)
        load = self._loads.get(key)
        if load is None:
            links = self.cluster.links.ring_load(ring_order(p), job.hop_gbps)
            load = tuple(sorted(links.items()))
            if len(self._loads) > 100_000:
                self._loads.clear()
            self._loads[key] = load
        return load

    def change(self, job: JobSpec, prev: Placement | None, new: Placement | None) -> None:
        """``job`` moves from ``prev`` to ``new`` (either may be None)."""
        if not job.hop_gbps:
            return
        used = self.used
        if prev is not None:
            for link, gbps in self.load(job, prev):
                used[link] -= gbps
                self._touched = True
        if new is not None:
            for link, gbps in self.load(job, new):
                used[link] += gbps
                self._touched = True

    def overload(self) -> str | None:
        """The first over-reserved link, described, or None (checked only after a change)."""
        if not self._touched:
            return None
        self._touched = False
        capacity = self.cluster.links.capacity
        over = self.used - capacity
        bad = np.flatnonzero(over > _TOLERANCE)
        if not len(bad):
            return None
        i = int(bad[0])
        return (
            f"link {self.cluster.links.links[i].name} over-reserved: "
            f"{self.used[i]:g} of {capacity[i]:g} Gbit/s"
        )
