"""Fast what-if placement, one task at a time, for the baselines that re-plan every event.

:mod:`mlsched.scheduler.placement` places whole jobs with Python loops over servers, right
for policies that place a job once. DRF, LAS and Optimus rebuild the layout of *every*
active job at each event or slot, a task at a time: thousands of what-if placements per slot
at the benchmark scale. :class:`TaskFiller` keeps free capacity as one numpy matrix and finds
a server for one more task with one vectorised test; :class:`Screen` drops, in one
vectorised pass, the queued jobs that cannot fit any more (free capacity only shrinks
during a pass, so a job screened out stays out for the rest of it). Sticky quotas (a job's
previous per-server counts, tried first; see :mod:`.taskgrow`) give a job whose counts did
not change its previous placement back, so it is not restarted.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mlsched.core.allocation import Placement
from mlsched.core.cluster import Cluster
from mlsched.core.job import JobSpec

__all__ = ["EPS", "DemandTable", "JobDemand", "Screen", "TaskFiller", "to_placement"]

EPS = 1e-9


@dataclass(frozen=True, eq=False)
class JobDemand:
    """A job's per-task demands over the cluster's resource order, and where it may run.

    ``seq`` is the arrival order (every baseline's tie-breaker) and the job's row in its
    policy's :class:`DemandTable`.
    """

    job: JobSpec
    seq: int
    worker: np.ndarray
    ps: np.ndarray
    worker_servers: np.ndarray  # sorted indices of servers that may host its workers
    ps_servers: np.ndarray  # sorted indices of servers that may host its PSs
    worker_list: tuple[int, ...]  # the same, for bisect
    ps_list: tuple[int, ...]
    #: Every PS on one server (spec 002's (2i) with a single PS host, AMB-6): a policy's
    #: ``one_ps_host`` option.
    one_ps_host: bool = False

    def servers(self, is_worker: bool) -> tuple[np.ndarray, tuple[int, ...]]:
        if is_worker:
            return self.worker_servers, self.worker_list
        return self.ps_servers, self.ps_list


def to_placement(
    workers: dict[int, int], ps: dict[int, int], previous: Placement | None
) -> Placement:
    """The placement of these counts; ``previous`` itself when equal (the engine's fast
    path skips re-checking an unchanged placement object)."""
    w, z = tuple(workers.items()), tuple(ps.items())
    if (
        previous is not None
        and previous.workers == w
        and previous.ps == z
        and previous.worker_type is None
        and previous.ps_type is None
        and previous.ring is None
    ):
        return previous  # unchanged counts (most jobs at most events): no new object
    placement = Placement(w, z)
    return previous if previous is not None and previous == placement else placement


class TaskFiller:
    """Free capacity per server (numpy, servers x resources) with per-task take and search."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.free = np.array(cluster.capacity, dtype=float)
        self.reserved = np.zeros_like(self.free)
        self.has_reserved = False
        self.held = 0  # tasks taken and not given back since the last reset
        top = cluster.capacity.max(axis=0)
        # "Most free" compares servers by free capacity normalised per resource.
        self._scale = 1.0 / np.where(top > 0, top, 1.0)
        self.worker_pool = np.array(cluster.worker_servers, dtype=np.intp)
        self.ps_pool = np.array(cluster.ps_servers, dtype=np.intp)
        self.hosts_ps = np.array([s.pool.hosts_ps() for s in cluster.servers])
        self._ps_list = tuple(int(s) for s in self.ps_pool)
        # GPU type -> the servers that may host it, as an array and as a tuple (bisect).
        self._by_gpu: dict[str | None, tuple[np.ndarray, tuple[int, ...]]] = {}

    def reset(self) -> None:
        """Back to an empty cluster with nothing reserved."""
        self.free[:] = self.cluster.capacity
        self.reserved[:] = 0.0
        self.has_reserved = False
        self.held = 0

    def demand(self, job: JobSpec, seq: int, one_ps_host: bool = False) -> JobDemand:
        """The job's :class:`JobDemand` (default worker/PS bundles, no typed bundles)."""
        servers = self._by_gpu.get(job.gpu_type)
        if servers is None:  # once per GPU type: arrays and tuples shared by its jobs
            gpus = [s.gpu_type for s in self.cluster.servers]
            eligible = np.array(
                [
                    i
                    for i in self.cluster.worker_servers
                    if job.gpu_type is None or gpus[i] == job.gpu_type
                ],
                dtype=np.intp,
            )
            servers = self._by_gpu[job.gpu_type] = (eligible, tuple(int(s) for s in eligible))
        if job.uses_ps:
            ps_servers, ps_list = self.ps_pool, self._ps_list
            ps = self.cluster.demand_array(job.ps)
        else:
            ps_servers, ps_list = self.ps_pool[:0], ()
            ps = np.zeros(self.free.shape[1])
        return JobDemand(
            job,
            seq,
            self.cluster.demand_array(job.worker),
            ps,
            servers[0],
            ps_servers,
            servers[1],
            ps_list,
            one_ps_host,
        )

    # Single-server operations --------------------------------------------------------------
    def fits(self, server: int, demand: np.ndarray, spare: bool = False) -> bool:
        # numpy's comparisons (room >= demand - EPS, room less the positive reservations
        # with ``spare``) on a server's few floats: several times faster than on the row.
        room = self.free[server].tolist()
        if spare and self.has_reserved:
            reserved = self.reserved[server].tolist()
            room = [f - (r if r > 0.0 else 0.0) for f, r in zip(room, reserved, strict=True)]
        return all(f >= d - EPS for f, d in zip(room, demand.tolist(), strict=True))

    @property
    def empty(self) -> bool:
        """Nothing is taken: the whole cluster is free."""
        return self.held == 0

    def take(self, server: int, demand: np.ndarray, count: int = 1) -> None:
        self.free[server] -= demand if count == 1 else demand * count
        self.held += count

    def give(self, server: int, demand: np.ndarray, count: int = 1) -> None:
        self.free[server] += demand if count == 1 else demand * count
        self.held -= count

    # Reservations: capacity that jobs placed later in a pass are expected to take back
    # (their previous placement). They never decide whether a task fits, only where a task
    # without a previous place goes: to unreserved room first, so it does not displace a
    # running job that is placed after it.
    def reserve(self, server: int, demand: np.ndarray, count: int = 1) -> None:
        self.reserved[server] += demand if count == 1 else demand * count
        self.has_reserved = True

    def unreserve(self, server: int, demand: np.ndarray, count: int = 1) -> None:
        self.reserved[server] -= demand if count == 1 else demand * count

    def _room(self, servers: np.ndarray, spare: bool) -> np.ndarray:
        room = self.free[servers]
        return room - np.maximum(self.reserved[servers], 0.0) if spare else room

    # Searches ----------------------------------------------------------------------------
    def fitting(self, servers: np.ndarray, demand: np.ndarray, spare: bool = False) -> np.ndarray:
        """The servers (subset of ``servers``, same order) with room for one more task;
        with ``spare``, room outside the reservations."""
        if not len(servers):
            return servers
        return servers[(self._room(servers, spare) >= demand - EPS).all(axis=1)]

    def round_robin(
        self, servers: np.ndarray, ordered: tuple[int, ...], demand: np.ndarray, start: int
    ) -> int:
        """First of ``servers`` at index >= ``start`` (cyclically) with room, unreserved room
        first; -1 if none. ``ordered`` is ``servers`` as a tuple (a cheap first look)."""
        if not ordered:
            return -1
        k = bisect_left(ordered, start)
        if k < len(ordered) and self.fits(ordered[k], demand, spare=True):
            return ordered[k]
        for spare in (True, False) if self.has_reserved else (False,):
            ok = self.fitting(servers, demand, spare)
            if len(ok):
                k = int(np.searchsorted(ok, start))
                return int(ok[k]) if k < len(ok) else int(ok[0])
        return -1

    def most_free(
        self, servers: np.ndarray, demand: np.ndarray, *, spare_only: bool = False
    ) -> int:
        """The server with room and the most unreserved free capacity (normalised), among
        those with unreserved room when there are any (only those with ``spare_only``);
        -1 when none has room."""
        modes = (True,) if spare_only else (True, False)
        for spare in modes if self.has_reserved else (False,):
            ok = self.fitting(servers, demand, spare)
            if len(ok):
                score = (self._room(ok, self.has_reserved) * self._scale).sum(axis=1)
                return int(ok[int(np.argmax(score))])
        return -1

    def fit_counts(
        self, servers: np.ndarray, demand: np.ndarray, spare: bool = False
    ) -> np.ndarray:
        """How many tasks of ``demand`` each of ``servers`` takes (vectorised max_count)."""
        need = np.flatnonzero(demand > EPS)
        if not len(need):
            return np.full(len(servers), 1 << 30, dtype=np.int64)
        room = self._room(servers, spare and self.has_reserved)[:, need]
        return np.floor((room / demand[need]).min(axis=1).clip(min=0.0) + EPS).astype(np.int64)

    # Whole placements --------------------------------------------------------------------
    def take_placement(self, dem: JobDemand, placement: Placement) -> bool:
        """Take ``placement``'s resources if every server has room; else change nothing."""
        need: dict[int, np.ndarray] = {}
        for s, c in placement.workers:
            need[s] = c * dem.worker
        for s, c in placement.ps:
            need[s] = need[s] + c * dem.ps if s in need else c * dem.ps
        if any(not (self.free[s] >= u - EPS).all() for s, u in need.items()):
            return False
        for s, u in need.items():
            self.free[s] -= u
        self.held += placement.n_workers + placement.n_ps
        return True


class DemandTable:
    """Rows of per-task demands and of one whole-job request (workers, PSs) per job, kept in
    growing numpy buffers indexed by ``JobDemand.seq`` so screens are vectorised."""

    def __init__(self, n_resources: int) -> None:
        self.worker = np.zeros((64, n_resources))
        self.ps = np.zeros((64, n_resources))
        self.request = np.zeros((64, 2))

    def add(self, dem: JobDemand, n_workers: int, n_ps: int) -> None:
        row = dem.seq
        if row >= len(self.worker):
            size = max(2 * len(self.worker), row + 1)
            for name in ("worker", "ps", "request"):
                old = getattr(self, name)
                new = np.zeros((size, old.shape[1]))
                new[: len(old)] = old
                setattr(self, name, new)
        self.worker[row] = dem.worker
        self.ps[row] = dem.ps
        self.request[row] = (n_workers, n_ps)


class Screen:
    """Necessary-condition screen of whole-job requests against a shrinking filler.

    ``rows`` are :class:`DemandTable` rows in the order the policy will try them. Request
    ``i`` (``table.request[rows[i]]`` workers and PSs) can only fit if one task of each kind
    fits the largest free amount of each resource over its pool, and its tasks together fit
    the pool's total free capacity. Free capacity only shrinks during a pass, so a request
    screened out stays out; :meth:`refresh` re-screens the live requests after ``start``.
    """

    def __init__(self, filler: TaskFiller, table: DemandTable, rows: Sequence[int]) -> None:
        self.filler = filler
        idx = np.asarray(rows, dtype=np.intp)
        self._w = table.worker[idx]
        self._p = table.ps[idx]
        req = table.request[idx]
        self._tw = self._w * req[:, :1]
        self._tp = self._p * req[:, 1:]
        self._has_ps = req[:, 1] > 0
        # The live requests, ascending (a list: searched once per request tried; a policy
        # refreshes after taking).
        self._live: list[int] = list(range(len(idx)))

    def next(self, after: int) -> int:
        """The first live request after position ``after``; -1 when none is left."""
        live = self._live
        k = bisect_right(live, after)
        return live[k] if k < len(live) else -1

    def refresh(self, start: int) -> None:
        live = self._live
        k = bisect_left(live, start)
        sub = np.array(live[k:], dtype=np.intp)
        if len(sub):
            f = self.filler
            sub = sub[self._pool_ok(sub, f.free[f.worker_pool], self._w, self._tw)]
            has_ps = self._has_ps[sub]
            if has_ps.any():
                ok = self._pool_ok(sub[has_ps], f.free[f.ps_pool], self._p, self._tp)
                keep = np.ones(len(sub), dtype=bool)
                keep[np.flatnonzero(has_ps)[~ok]] = False
                sub = sub[keep]
        self._live = live[:k] + sub.tolist()

    @staticmethod
    def _pool_ok(
        sub: np.ndarray, free: np.ndarray, one: np.ndarray, total: np.ndarray
    ) -> np.ndarray:
        """Which requests in ``sub`` pass: one task fits the largest free amount of each
        resource over the pool, and the pool's total free capacity covers all the tasks.

        (A per-server test of one task is stronger but costs more than the failed
        placements it saves at the benchmark scale.)"""
        if not len(free):
            return np.zeros(len(sub), dtype=bool)
        return (one[sub] <= free.max(axis=0) + EPS).all(axis=1) & (
            total[sub] <= free.sum(axis=0) + EPS
        ).all(axis=1)
