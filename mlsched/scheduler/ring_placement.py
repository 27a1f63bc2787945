"""Spec 003's ring placement heuristic P0, with hop reservations (the baselines' placement).

P0 (spec 003 §5 "Baselines") places ``k`` workers of a ring-all-reduce job:

1. if one server has room for all ``k``, the best fit among those: the fewest worker slots
   to spare after (ties: the lower server index);
2. else the rack with the most free worker slots, its servers in decreasing free-slot
   order, then the next racks, by decreasing free slots (ties: rack order, then server
   index);
3. the ring visits the servers in that fill order, so each rack's servers are contiguous
   (the ring crosses a rack's uplink once each way) and each server's workers adjacent;
4. the job's ``hop_gbps`` (b_i; None reserves nothing) is reserved on every link of every
   inter-server hop (:meth:`~mlsched.core.links.Links.ring_load`); when a link lacks the
   residual bandwidth, or the workers do not fit, the job is not placed (None). P0 does not
   look for another layout: the spec's baselines are not topology-aware.

Workers go only to servers that host workers and, for a job with a ``gpu_type``, to servers
of that type. :func:`p0_ring` is pure (free capacities in, a placement out);
:class:`RingLedger` keeps a policy's free server and link capacity during a pass.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mlsched.core.allocation import Placement
from mlsched.core.cluster import Cluster
from mlsched.core.job import JobSpec
from mlsched.perfmodel.paths import ring_order
from mlsched.scheduler.placement import eligible_worker_servers

__all__ = [
    "PLACEMENTS",
    "RingLedger",
    "check_placement",
    "p0_ring",
    "ring_infeasible",
    "ring_link_load",
    "worker_room",
]

#: The ``placement`` option of fifo, drf and tiresias: each policy's own placement
#: (``default``) or P0 with hop reservations (``ring``, spec 003 §5).
PLACEMENTS = ("default", "ring")

_EPS = 1e-9


def check_placement(value: object) -> str:
    """The ``placement`` option, checked (ValueError naming it otherwise)."""
    if not isinstance(value, str) or value not in PLACEMENTS:
        raise ValueError(f"placement must be one of {', '.join(PLACEMENTS)}, got {value!r}")
    return value


def worker_room(cluster: Cluster, free: np.ndarray, job: JobSpec, hosts: np.ndarray) -> np.ndarray:
    """How many of ``job``'s workers each of ``hosts`` takes on ``free`` capacity (a demand
    of nothing counts as room for any number: 1 << 30)."""
    demand = cluster.demand_array(job.worker_demand())
    need = np.flatnonzero(demand > _EPS)
    if not len(need):
        return np.full(len(hosts), 1 << 30, dtype=np.int64)
    room = free[np.ix_(hosts, need)] / demand[need]
    return np.floor(room.min(axis=1).clip(min=0.0) + _EPS).astype(np.int64)


def ring_link_load(cluster: Cluster, job: JobSpec, placement: Placement) -> dict[int, float]:
    """Gbit/s ``job`` reserves per link under ``placement`` (link index -> Gbit/s)."""
    hop = job.hop_gbps or 0.0
    if hop <= 0 or len(placement.workers) < 2:
        return {}
    return cluster.links.ring_load(ring_order(placement), hop)


def p0_ring(
    cluster: Cluster,
    free: np.ndarray,
    link_free: np.ndarray,
    job: JobSpec,
    k: int,
    hosts: Sequence[int] | np.ndarray | None = None,
) -> Placement | None:
    """``k`` workers of ``job`` placed by P0 (module docstring) on ``free`` server capacity
    (servers x resources) and ``link_free`` Gbit/s per link; None when they do not fit.
    ``hosts``: the servers that may hold its workers (default: pool and GPU type). Reads
    its arguments only."""
    if k < 1 or not cluster.offers(job.worker_demand()):
        return None  # (a GPU demand on a cluster without GPUs would drop out of the arrays)
    servers = np.asarray(
        eligible_worker_servers(job, cluster) if hosts is None else hosts, dtype=np.intp
    )
    if not len(servers):
        return None
    room = worker_room(cluster, free, job, servers)
    whole = np.flatnonzero(room >= k)
    if len(whole):
        best = int(servers[whole[int(np.argmin(room[whole]))]])  # first minimum: lowest index
        return Placement(((best, k),), ring=(best,))
    if int(room.sum()) < k:
        return None
    racks = np.asarray(cluster.links.rack_of, dtype=np.intp)[servers]
    rack_room = np.bincount(racks, weights=room)
    # Primary key last: rack room (desc), rack (keeps a rack's servers together when two
    # racks have equal room), server room (desc), server index.
    order = np.lexsort((servers, -room, racks, -rack_room[racks]))
    workers: list[tuple[int, int]] = []
    left = k
    for i in order:
        c = min(left, int(room[i]))
        if c > 0:
            workers.append((int(servers[i]), c))
            left -= c
            if not left:
                break
    ring = tuple(s for s, _ in workers)
    placement = Placement(tuple(workers), ring=ring)
    for link, gbps in ring_link_load(cluster, job, placement).items():
        if gbps > link_free[link] + _EPS:
            return None
    return placement


def ring_infeasible(job: JobSpec, cluster: Cluster, k: int) -> str | None:
    """Why the ring baselines reject ``job`` with ``k`` workers as infeasible, or None.

    A PS job has no ring. A ring P0 cannot place on the empty cluster is rejected too (the
    baselines' admission rule: their own placement on the empty cluster), so an admitted
    job always starts once it is alone; on a busier cluster P0 might have picked other
    servers, but a job that only fits there could wait forever.
    """
    if job.uses_ps:
        return "placement=ring places ring-all-reduce jobs only"
    free = np.array(cluster.capacity, dtype=float)
    if p0_ring(cluster, free, cluster.links.capacity, job, k) is None:
        return f"P0 places {k} workers and their ring hops nowhere on the empty cluster"
    return None


class RingLedger:
    """Free server capacity (servers x resources) and free Gbit/s per link during a pass.

    Reservations steer where P0 looks, never whether a placement fits: a policy reserves
    the previous placements of the jobs that ran in the previous slot, and :meth:`place`
    tries P0 on the room outside them first (so a job placed earlier in the pass does not
    push a running job off its servers and links), then on all free capacity.
    """

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.free = np.array(cluster.capacity, dtype=float)
        self.link_free = np.array(cluster.links.capacity, dtype=float)
        self.reserved = np.zeros_like(self.free)
        self.link_reserved = np.zeros_like(self.link_free)
        self._has_reserved = False
        self._hosts: dict[str | None, np.ndarray] = {}

    def reset(self) -> None:
        """Back to the empty cluster, nothing reserved."""
        self.free[:] = self.cluster.capacity
        self.link_free[:] = self.cluster.links.capacity
        self.reserved[:] = 0.0
        self.link_reserved[:] = 0.0
        self._has_reserved = False

    def hosts(self, job: JobSpec) -> np.ndarray:
        """The servers that may hold ``job``'s workers (cached per GPU type)."""
        hosts = self._hosts.get(job.gpu_type)
        if hosts is None:
            hosts = np.array(eligible_worker_servers(job, self.cluster), dtype=np.intp)
            self._hosts[job.gpu_type] = hosts
        return hosts

    def place(self, job: JobSpec, k: int) -> Placement | None:
        """P0 for ``k`` workers, outside the reservations first, then on all that is free;
        taken. None (nothing taken) if it fails on all that is free."""
        hosts = self.hosts(job)
        placement = None
        if self._has_reserved:
            spare = self.free - np.maximum(self.reserved, 0.0)
            link_spare = self.link_free - np.maximum(self.link_reserved, 0.0)
            placement = p0_ring(self.cluster, spare, link_spare, job, k, hosts)
        if placement is None:
            placement = p0_ring(self.cluster, self.free, self.link_free, job, k, hosts)
        if placement is not None:
            self._apply(job, placement, -1.0)
        return placement

    def fits(self, job: JobSpec, placement: Placement) -> bool:
        """Whether ``placement``'s workers and ring reservations fit what is free."""
        demand = self.cluster.demand_array(job.worker_demand(placement.worker_type))
        if any(not (self.free[s] >= c * demand - _EPS).all() for s, c in placement.workers):
            return False
        load = ring_link_load(self.cluster, job, placement)
        return all(gbps <= self.link_free[link] + _EPS for link, gbps in load.items())

    def take(self, job: JobSpec, placement: Placement) -> bool:
        """Take ``placement`` if it fits (see :meth:`fits`); else change nothing."""
        if not self.fits(job, placement):
            return False
        self._apply(job, placement, -1.0)
        return True

    def release(self, job: JobSpec, placement: Placement) -> None:
        """Give back what ``placement`` took."""
        self._apply(job, placement, 1.0)

    def reserve(self, job: JobSpec, placement: Placement, sign: float = 1.0) -> None:
        """Reserve ``placement``'s servers and links (``sign=-1``: drop the reservation)."""
        demand = self.cluster.demand_array(job.worker_demand(placement.worker_type))
        for s, c in placement.workers:
            self.reserved[s] += sign * c * demand
        for link, gbps in ring_link_load(self.cluster, job, placement).items():
            self.link_reserved[link] += sign * gbps
        self._has_reserved = True

    def _apply(self, job: JobSpec, placement: Placement, sign: float) -> None:
        demand = self.cluster.demand_array(job.worker_demand(placement.worker_type))
        for s, c in placement.workers:
            self.free[s] += sign * c * demand
        for link, gbps in ring_link_load(self.cluster, job, placement).items():
            self.link_free[link] += sign * gbps
