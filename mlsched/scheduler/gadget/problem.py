"""One slot's G-VNE (spec 003 (12)-(19)): which ring of which size for which job, where.

A :class:`SlotProblem` holds the active jobs' gains pi_{i,k} for ring sizes k = 1..q_i,
their per-worker demands and hop reservations, and what the slot offers: free server
capacity and free link capacity (GADGET replans every slot on the full cluster). A
solution maps job ids to placements with a ring order; :meth:`SlotProblem.check` says
whether one fits, :meth:`SlotProblem.value` what it is worth. LP-RS-MDE, the exact MILP and
the tests share this one description.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from mlsched.core.allocation import Placement
from mlsched.core.cluster import Cluster
from mlsched.core.links import Links
from mlsched.perfmodel.paths import ring_order

__all__ = ["RingJob", "SlotProblem", "log_gains_of"]

_TOLERANCE = 1e-6


def log_gains_of(gains: Sequence[float]) -> tuple[float, ...]:
    """ln of each gain, -inf where it is not positive."""
    return tuple(math.log(g) if g > 0 else -math.inf for g in gains)


@dataclass(frozen=True)
class RingJob:
    """One active job in one slot: ``gains[k - 1]`` is pi_{i,k}, what k workers this slot
    add to its utility (non-decreasing in k; its length is q_i); ``demand`` one worker's
    resources over the cluster's resource order; ``hosts`` the servers that may hold its
    workers (pool, GPU type, and room for one worker).

    ``log_gains`` are the same gains' logarithms, exact where a gain underflows to 0.0 in
    double precision (a sigmoid far below its rise; spec 003's objective counts every
    positive gain): they rank the jobs, decide which rings are worth placing, and rescale
    the gains of :mod:`.tiers`. Left empty, they are the logarithms of ``gains``."""

    job_id: str
    gains: tuple[float, ...]
    demand: np.ndarray
    hop_gbps: float
    hosts: tuple[int, ...]
    #: Fewest workers it may run (its ``min_workers``); smaller rings gain nothing.
    min_ring: int = 1
    log_gains: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if not self.log_gains:
            object.__setattr__(self, "log_gains", log_gains_of(self.gains))
        elif len(self.log_gains) != len(self.gains):
            raise ValueError(f"{self.job_id}: {len(self.log_gains)} log gains for "
                             f"{len(self.gains)} gains")  # fmt: skip

    @cached_property
    def host_array(self) -> np.ndarray:
        return np.asarray(self.hosts, dtype=int)

    @property
    def max_ring(self) -> int:
        return len(self.gains)

    def gain(self, k: int) -> float:
        return self.gains[k - 1] if 1 <= k <= len(self.gains) else 0.0

    def log_gain(self, k: int) -> float:
        return self.log_gains[k - 1] if 1 <= k <= len(self.log_gains) else -math.inf

    @cached_property
    def best_log_gain(self) -> float:
        """The largest of its sizes' log gains (-inf: no ring is worth anything)."""
        sizes = range(self.min_ring, self.max_ring + 1)
        return max((self.log_gain(k) for k in sizes), default=-math.inf)

    def worth(self, k: int) -> bool:
        """Whether a ring of k workers is worth placing: it may run, and its gain is
        positive, however small."""
        return k >= self.min_ring and self.log_gain(k) > -math.inf

    def rescaled(self, log_offset: float) -> RingJob:
        """The same job with every gain divided by e^log_offset (computed from the logs)."""
        logs = tuple(g - log_offset for g in self.log_gains)
        gains = tuple(math.exp(g) for g in logs)  # e^-inf is 0.0
        return dataclasses.replace(self, gains=gains, log_gains=logs)


@dataclass(frozen=True)
class SlotProblem:
    cluster: Cluster
    jobs: tuple[RingJob, ...]
    #: Free capacity (servers x resources) this slot.
    capacity: np.ndarray
    #: Free Gbit/s per link (``cluster.links`` order) this slot.
    link_capacity: np.ndarray

    @classmethod
    def full(cls, cluster: Cluster, jobs: Sequence[RingJob]) -> SlotProblem:
        """The problem on the whole, empty cluster."""
        return cls(cluster, tuple(jobs), cluster.capacity, cluster.links.capacity)

    def minus(self, used: np.ndarray, link_used: np.ndarray) -> SlotProblem:
        """The same jobs on what is left once ``used`` (servers x resources) and
        ``link_used`` (Gbit/s per link) are taken."""
        return SlotProblem(
            self.cluster,
            self.jobs,
            np.maximum(self.capacity - used, 0.0),
            np.maximum(self.link_capacity - link_used, 0.0),
        )

    @property
    def links(self) -> Links:
        return self.cluster.links

    def value(self, placements: Mapping[str, Placement]) -> float:
        """Sum of the gains of the ring sizes placed."""
        by_id = {j.job_id: j for j in self.jobs}
        return sum(by_id[j].gain(p.n_workers) for j, p in placements.items() if j in by_id)

    def loads(self, placements: Mapping[str, Placement]) -> tuple[np.ndarray, np.ndarray]:
        """(server x resource use, per-link Gbit/s) of ``placements``."""
        by_id = {j.job_id: j for j in self.jobs}
        used = np.zeros_like(self.capacity, dtype=float)
        link_used = np.zeros(len(self.links))
        for job_id, p in placements.items():
            job = by_id[job_id]
            for s, c in p.workers:
                used[s] += c * job.demand
            if job.hop_gbps > 0 and len(p.workers) > 1:
                for link, gbps in self.links.ring_load(ring_order(p), job.hop_gbps).items():
                    link_used[link] += gbps
        return used, link_used

    def check(self, placements: Mapping[str, Placement]) -> list[str]:
        """What is wrong with ``placements`` (empty: it fits and every ring is valid)."""
        by_id = {j.job_id: j for j in self.jobs}
        problems: list[str] = []
        for job_id, p in placements.items():
            job = by_id.get(job_id)
            if job is None:
                problems.append(f"{job_id}: not an active job of this slot")
                continue
            if not job.min_ring <= p.n_workers <= job.max_ring:
                problems.append(
                    f"{job_id}: {p.n_workers} workers, allowed {job.min_ring}..{job.max_ring}"
                )
            servers = [s for s, _ in p.workers]
            if p.ring is not None and sorted(p.ring) != servers:
                problems.append(f"{job_id}: ring {list(p.ring)} is not its servers {servers}")
            if not set(servers) <= set(job.hosts):
                problems.append(f"{job_id}: servers {servers} not all among its hosts")
        if problems:
            return problems
        used, link_used = self.loads(placements)
        for s, r in np.argwhere(used - self.capacity > _TOLERANCE):
            name = self.cluster.resource_names[r]
            problems.append(
                f"server {self.cluster.servers[s].name} over on {name}: "
                f"{used[s, r]:g} of {self.capacity[s, r]:g}"
            )
        for link in np.flatnonzero(link_used - self.link_capacity > _TOLERANCE):
            problems.append(
                f"link {self.links.links[link].name} over: "
                f"{link_used[link]:g} of {self.link_capacity[link]:g} Gbit/s"
            )
        return problems
