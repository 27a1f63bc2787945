"""What the current allocation charges to the cluster, and the checks before a charge.

The engine keeps one :class:`Charges` per cluster: the resources in use per server, the
bandwidth reserved per link, and the placement each running job holds. An allocation is
checked against the cluster (worker bounds, parameter servers, pools, GPU types, rings,
capacity, links) as it is charged: a bad one is a :class:`PolicyError` naming the policy,
never silently trimmed.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from mlsched.core.allocation import Allocation, Placement
from mlsched.core.cluster import Cluster
from mlsched.core.errors import PolicyError
from mlsched.core.job import JobSpec
from mlsched.engine.link_ledger import LinkLedger, ring_problem
from mlsched.engine.results import JobRecord

__all__ = ["Charges"]

Rows = list[tuple[int, np.ndarray]]


class Charges:
    """Resources, link bandwidth and placements charged by the current allocation."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        #: Resources in use per server (servers x resources); policies' views read it live.
        self.used = np.zeros_like(cluster.capacity)
        self.links = LinkLedger(cluster)
        self._placed: dict[str, Placement] = {}  # in the order the jobs were first placed
        self._total = np.where(cluster.total > 0, cluster.total, 1.0)
        self._demand_cache: dict[tuple[str, Placement], Rows] = {}
        self._worker_ok = np.array([s.pool.hosts_workers() for s in cluster.servers])
        self._ps_ok = np.array([s.pool.hosts_ps() for s in cluster.servers])
        self._util: np.ndarray | None = None  # utilization() until used changes

    @property
    def placements(self) -> dict[str, Placement]:
        """Where each job runs in the current slot (a copy)."""
        return dict(self._placed)

    def utilization(self) -> np.ndarray:
        """Used / total capacity per resource, summed over servers (the same array while
        nothing is charged or released: do not change it)."""
        if self._util is None:
            self._util = self.used.sum(axis=0) / self._total
        return self._util

    def release(self, job: JobSpec) -> None:
        """A job that ended: its resources and ring hops are free again."""
        prev = self._placed.pop(job.job_id, None)
        if prev is not None:
            self._util = None
            self.links.change(job, prev, None)  # its ring hops are free again
            for s, u in self._rows(job, prev):
                self.used[s] -= u

    def charge(
        self, policy: str, t: int, allocation: Allocation, records: Mapping[str, JobRecord]
    ) -> None:
        """Check slot ``t``'s allocation by ``policy`` and charge it in place of the last
        one (``records``: every job by id). Raises :class:`PolicyError`."""
        # Whether any server's use shrank or grew: only if some grew can one be over now
        # (demands are >= 0, and the last charge left every server within capacity).
        shrank = grew = False
        placed = self._placed
        changed: list[tuple[str, Placement]] = []
        for job_id, p in allocation.items():
            prev = placed.get(job_id)
            if prev is p:
                continue
            changed.append((job_id, p))
            if prev == p:
                continue
            job = records[job_id].spec
            self._check(policy, t, job, p)
            self.links.change(job, prev, p)
            if prev is not None:
                for s, u in self._rows(job, prev):
                    self.used[s] -= u
                    shrank = True
            for s, u in self._rows(job, p):
                self.used[s] += u
                grew = True
        gone = placed.keys() - allocation.keys()  # dict views: C-level; in charge order below
        for job_id in [j for j in placed if j in gone] if gone else ():
            prev = self._placed.pop(job_id)
            job = records[job_id].spec
            self.links.change(job, prev, None)
            for s, u in self._rows(job, prev):
                self.used[s] -= u
                shrank = True
        for job_id, p in changed:  # a kept placement object is already there
            placed[job_id] = p
        if shrank or grew:
            self._util = None
        if grew:
            self._check_capacity(policy, t)
        over_link = self.links.overload()
        if over_link:
            raise PolicyError(policy, f"slot {t}: {over_link}")

    def _rows(self, job: JobSpec, p: Placement) -> Rows:
        key = (job.job_id, p)
        rows = self._demand_cache.get(key)
        if rows is None:
            rows = list(p.usage(job, self.cluster).items())
            if len(self._demand_cache) > 100_000:
                self._demand_cache.clear()
            self._demand_cache[key] = rows
        return rows

    def _check(self, name: str, t: int, job: JobSpec, p: Placement) -> None:
        job_id, n_servers = job.job_id, len(self.cluster)
        n_w = p.n_workers
        if n_w > job.worker_cap or n_w < job.min_workers:
            raise PolicyError(
                name,
                f"slot {t}: job {job_id!r} got {n_w} workers, allowed "
                f"{job.min_workers}..{job.worker_cap}",
            )
        if job.uses_ps and p.n_ps < 1:
            raise PolicyError(name, f"slot {t}: PS job {job_id!r} got no parameter server")
        if not job.uses_ps and p.n_ps:
            raise PolicyError(name, f"slot {t}: all-reduce job {job_id!r} got {p.n_ps} PSs")
        for s, _ in p.workers:
            if not 0 <= s < n_servers or not self._worker_ok[s]:
                raise PolicyError(
                    name,
                    f"slot {t}: job {job_id!r} has workers on server "
                    f"{s}, which does not host workers",
                )
            gpu = self.cluster.servers[s].gpu_type
            if job.gpu_type is not None and gpu != job.gpu_type:
                raise PolicyError(
                    name,
                    f"slot {t}: job {job_id!r} needs GPU type {job.gpu_type}, server {s} has {gpu}",
                )
        for s, _ in p.ps:
            if not 0 <= s < n_servers or not self._ps_ok[s]:
                raise PolicyError(
                    name,
                    f"slot {t}: job {job_id!r} has PSs on server {s}, which does not host PSs",
                )
        why = ring_problem(job, p)
        if why:
            raise PolicyError(name, f"slot {t}: job {job_id!r}: {why}")

    def _check_capacity(self, name: str, t: int) -> None:
        # Every server in one comparison (cheaper than indexing the ones that grew): those
        # that did not grow are within capacity, so any over it grew.
        over = self.used - self.cluster.capacity > 1e-6
        if over.any():
            i, r = np.argwhere(over)[0]
            server = self.cluster.servers[i]
            resource = self.cluster.resource_names[r]
            raise PolicyError(
                name,
                f"slot {t}: server {server.name} over-allocated on "
                f"{resource}: uses {self.used[i, r]:g} of "
                f"{self.cluster.capacity[i, r]:g}",
            )
