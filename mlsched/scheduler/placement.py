"""Placement helpers shared by the policies: round-robin, packing, and feasibility checks.

All helpers work on a :class:`CapacityLedger` (a private copy of free capacity): on success
they take the resources and return the :class:`Placement`; on failure they leave the
ledger untouched and return None ("roll back the whole job", spec 001 §5.2).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence

import numpy as np

from mlsched.core.allocation import Placement
from mlsched.core.cluster import Cluster
from mlsched.core.job import JobSpec
from mlsched.scheduler.view import CapacityLedger

__all__ = [
    "EmptyFit",
    "RoundRobin",
    "can_ever_run",
    "eligible_ps_servers",
    "eligible_worker_servers",
    "pack",
]


def eligible_worker_servers(job: JobSpec, cluster: Cluster) -> list[int]:
    """Servers that may host this job's workers (pool and GPU type)."""
    return [
        i
        for i in cluster.worker_servers
        if job.gpu_type is None or cluster.servers[i].gpu_type == job.gpu_type
    ]


def eligible_ps_servers(job: JobSpec, cluster: Cluster) -> list[int]:
    return eligible_ps_servers_of(cluster)


def eligible_ps_servers_of(cluster: Cluster) -> list[int]:
    """Servers that may host parameter servers (any job's)."""
    return list(cluster.ps_servers)


def can_ever_run(
    job: JobSpec, cluster: Cluster, n_workers: int | None = None, one_ps_host: bool = False
) -> bool:
    """Whether ``n_workers`` (default ``min_workers``) and their PSs fit an empty cluster
    (all the PSs on one server with ``one_ps_host``)."""
    n = job.min_workers if n_workers is None else n_workers
    if not cluster.offers(job.worker) or (job.uses_ps and not cluster.offers(job.ps)):
        return False
    ledger = CapacityLedger(cluster)
    return pack(job, n, job.ps_needed(n), ledger, one_ps_host=one_ps_host) is not None


class EmptyFit:
    """:func:`can_ever_run`, checked once per job shape on one cluster: whether a job fits
    the empty cluster depends on its bundles, GPU type and counts only, and a trace holds
    many thousands of jobs of a few shapes. A new cluster (agents joined or left) starts
    the memo anew."""

    def __init__(self) -> None:
        self._cluster: Cluster | None = None
        self._memo: dict[tuple[object, ...], bool] = {}

    def __call__(
        self,
        job: JobSpec,
        cluster: Cluster,
        n_workers: int | None = None,
        n_ps: int | None = None,
        one_ps_host: bool = False,
    ) -> bool:
        """:func:`can_ever_run` with ``n_workers``; given ``n_ps`` (a policy's own PS
        count), also whether those workers with that many PSs pack the empty cluster."""
        if cluster is not self._cluster:
            self._cluster, self._memo = cluster, {}
        n = job.min_workers if n_workers is None else n_workers
        shape = (
            job.worker,
            job.ps,
            job.uses_ps,
            job.gpu_type,
            n,
            job.ps_needed(n),
            n_ps,
            one_ps_host,
        )
        fits = self._memo.get(shape)
        if fits is None:
            fits = can_ever_run(job, cluster, n, one_ps_host) and (
                n_ps is None
                or pack(job, n, n_ps, CapacityLedger(cluster), one_ps_host=one_ps_host) is not None
            )
            self._memo[shape] = fits
        return fits


#: Servers without room a fill's first pass looks at one by one before it looks at all.
_LOOK_ALONE = 4


def _fill(
    servers: Sequence[int],
    demand: np.ndarray,
    count: int,
    ledger: CapacityLedger,
    taken: dict[int, int],
    one_at_a_time: bool,
) -> bool:
    """Place ``count`` tasks over ``servers`` in order; record them in ``taken``."""
    if count <= 0:
        return True
    if not servers:
        return False
    left = count
    if one_at_a_time:
        # Cycle over the servers, one task per visit (round-robin spreading).
        live: Sequence[int] = servers
        if len(servers) > 1:
            # The first pass: a server that cannot take one task now cannot later in this
            # fill either (it only loses capacity), so the later passes skip it; and a
            # server's room when the pass reaches it is its room before the fill (no task
            # went to it yet). The first few are looked at one by one (a small job finds
            # room at once), the rest in one vectorised look at every server's row (cheaper
            # than indexing the rows of ``servers``).
            room: list[bool] | None = None
            misses = 0
            live = []
            for s in servers:
                if not left:
                    break
                if room is None:
                    fits = ledger.fits(s, demand)
                    if not fits:
                        misses += 1
                        if misses == _LOOK_ALONE:
                            room = ledger.fits_each(demand)
                else:
                    fits = room[s]
                if fits:
                    ledger.take(s, demand)
                    taken[s] = taken.get(s, 0) + 1
                    left -= 1
                    live.append(s)
        while left and live:
            nxt = []
            for s in live:
                if not left:
                    break
                if ledger.fits(s, demand):
                    ledger.take(s, demand)
                    taken[s] = taken.get(s, 0) + 1
                    left -= 1
                    nxt.append(s)
            live = nxt
    else:
        for s in servers:
            if not left:
                break
            k = min(left, ledger.max_count(s, demand))
            if k > 0:
                ledger.take(s, demand, k)
                taken[s] = taken.get(s, 0) + k
                left -= k
    return left == 0


def _fill_one(
    servers: Sequence[int],
    demand: np.ndarray,
    count: int,
    ledger: CapacityLedger,
    taken: dict[int, int],
) -> bool:
    """All ``count`` tasks on the first of ``servers`` that holds them together."""
    if count <= 0:
        return True
    for s in servers:
        if ledger.max_count(s, demand) >= count:
            ledger.take(s, demand, count)
            taken[s] = taken.get(s, 0) + count
            return True
    return False


def _first_with_room(
    servers: Iterable[int], demand: np.ndarray, ledger: CapacityLedger
) -> int | None:
    """The first of ``servers`` with room for one task of ``demand``: what :func:`_fill`'s
    first pass gives a single task (the first few looked at one by one, then every server's
    room in one look), without a copy of the order or of the ledger."""
    room: list[bool] | None = None
    misses = 0
    for s in servers:
        if room is None:
            if ledger.fits(s, demand):
                return s
            misses += 1
            if misses == _LOOK_ALONE:
                room = ledger.fits_each(demand)
        elif room[s]:
            return s
    return None


def _place(
    job: JobSpec,
    n_workers: int,
    n_ps: int,
    ledger: CapacityLedger,
    worker_order: Sequence[int],
    ps_order: Sequence[int],
    spread: bool,
    worker_type: str | None,
    ps_type: str | None,
    one_ps_host: bool = False,
) -> Placement | None:
    cluster = ledger.cluster
    wd = cluster.demand_array(job.worker_demand(worker_type))
    pd = cluster.demand_array(job.ps_demand(ps_type))
    snapshot = ledger.free.copy()
    w_taken: dict[int, int] = {}
    p_taken: dict[int, int] = {}
    ok = _fill(worker_order, wd, n_workers, ledger, w_taken, spread)
    if ok and job.uses_ps:
        if one_ps_host:
            ok = _fill_one(ps_order, pd, n_ps, ledger, p_taken)
        else:
            ok = _fill(ps_order, pd, n_ps, ledger, p_taken, spread)
    if not ok:
        ledger.free[:] = snapshot
        return None
    return Placement(
        tuple(w_taken.items()), tuple(p_taken.items()), worker_type=worker_type, ps_type=ps_type
    )


def pack(
    job: JobSpec,
    n_workers: int,
    n_ps: int,
    ledger: CapacityLedger,
    *,
    worker_type: str | None = None,
    ps_type: str | None = None,
    order: Sequence[int] | None = None,
    one_ps_host: bool = False,
) -> Placement | None:
    """Fill servers in ``order`` (default: most free first) as full as possible: few servers.
    ``one_ps_host``: every PS on one server (spec 002's (2i) with a single PS host, AMB-6),
    the first in the PS order that holds them all."""
    cluster = ledger.cluster
    w_servers = eligible_worker_servers(job, cluster)
    p_servers = eligible_ps_servers(job, cluster)
    if order is None:
        free = ledger.free.sum(axis=1)
        w_servers = sorted(w_servers, key=lambda s: (-free[s], s))
        # PSs next to the workers first, so small jobs end up co-located.
        p_servers = sorted(p_servers, key=lambda s: (-free[s], s))
    else:
        rank = {s: i for i, s in enumerate(order)}
        w_servers = sorted(w_servers, key=lambda s: rank.get(s, len(rank) + s))
        p_servers = sorted(p_servers, key=lambda s: rank.get(s, len(rank) + s))
    placement = _place(job, n_workers, 0, ledger, w_servers, p_servers, False, worker_type, ps_type)
    if placement is None or not job.uses_ps:
        return placement
    # PSs next to the job's workers first (co-location), where those servers host PSs.
    used = [s for s, _ in placement.workers if s in p_servers]
    p_servers = used + [s for s in p_servers if s not in used]
    ps = _place(
        job, 0, n_ps, ledger, w_servers, p_servers, False, worker_type, ps_type, one_ps_host
    )
    if ps is None:
        ledger.release(job, placement)
        return None
    return Placement(placement.workers, ps.ps, worker_type=worker_type, ps_type=ps_type)


class RoundRobin:
    """Round-robin placement with one cyclic pointer per pool (spec 001 §5.2): tasks go one
    at a time to successive servers that have room, starting after the last one used."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._next_worker = 0
        self._next_ps = 0
        # Eligible worker servers per GPU type (None: any): the same for every job of it.
        self._workers_of: dict[str | None, list[int]] = {}
        self._ps = eligible_ps_servers_of(cluster)

    @staticmethod
    def _rotate(servers: list[int], start: int) -> list[int]:
        """``servers`` (ascending) from the first at or after ``start``, then the rest."""
        k = bisect.bisect_left(servers, start)
        return servers[k:] + servers[:k] if k < len(servers) else servers[:]

    def place(
        self,
        job: JobSpec,
        n_workers: int,
        n_ps: int,
        ledger: CapacityLedger,
        *,
        worker_type: str | None = None,
        ps_type: str | None = None,
        one_ps_host: bool = False,
    ) -> Placement | None:
        """``one_ps_host``: every PS on the first server of the PS rotation that holds them
        all (the pointer moves past it), as :func:`pack` does."""
        servers = self._workers_of.get(job.gpu_type)
        if servers is None:
            servers = self._workers_of[job.gpu_type] = eligible_worker_servers(job, self.cluster)
        if n_workers == 1 and n_ps == 0:  # one task (most trace jobs): the first with room
            demand = self.cluster.demand_array(job.worker_demand(worker_type))
            n, k = len(servers), bisect.bisect_left(servers, self._next_worker)
            s = _first_with_room((servers[(k + i) % n] for i in range(n)), demand, ledger)
            if s is None:
                return None
            ledger.take(s, demand)
            self._next_worker = s + 1
            return Placement(((s, 1),), (), worker_type=worker_type, ps_type=ps_type)
        w_order = self._rotate(servers, self._next_worker)
        p_order = self._rotate(self._ps, self._next_ps) if job.uses_ps else []
        placement = _place(
            job, n_workers, n_ps, ledger, w_order, p_order, True, worker_type, ps_type, one_ps_host
        )
        if placement is not None:
            if placement.workers:
                self._next_worker = max(s for s, _ in placement.workers) + 1
            if placement.ps:
                self._next_ps = max(s for s, _ in placement.ps) + 1
        return placement
