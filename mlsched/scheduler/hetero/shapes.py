"""A job's candidate shapes for one round: per case (PS or ring, co-located or not), worker
type m, PS type p and worker count N, the window length L(N) (spec 002 §2.2-2.3, §3.5).

Durations come from the engine's runtime model (the ``hetero`` family gives M1/M2 exactly;
after measurements it gives the refined parameters, [AMB-16]): ``L = ceil(W / rate)`` slots
for the work ``W`` the job has left. Enumerating N with L = L(N) gives the optimum of the
L-enumeration (§3.5's enumeration equivalence); of several N with one L only the smallest is
kept, since a larger one uses more of the same window.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from mlsched.core.allocation import Placement
from mlsched.core.job import JobSpec
from mlsched.scheduler.hetero.catalogue import TypeCatalogue, worker_servers
from mlsched.scheduler.hetero.grid import fit_count
from mlsched.scheduler.view import ClusterView

__all__ = ["CASES", "JobShapes", "Shape"]

#: (architecture, co-located) cases, in the order the paper tries them (centralised first).
CASES = ("ps_central", "ps_dist", "ra_central", "ra_dist")


@dataclass(frozen=True)
class Shape:
    case: str
    m: int  # index into JobShapes.worker_types
    p: int  # index into JobShapes.ps_types (0 for a ring)
    n: int  # workers
    length: int  # slots
    rank: int  # the paper's enumeration order within (case, m, p)


@dataclass
class JobShapes:
    """What one job may run as, with demands normalised by the grid's units."""

    job: JobSpec
    worker_types: list[str | None]
    ps_types: list[str | None]
    worker_demand: np.ndarray  # (types, resources), normalised
    ps_demand: np.ndarray  # (types, resources), normalised
    worker_bw: np.ndarray  # b_m, Gbit/s
    ps_bw: np.ndarray  # B_p, Gbit/s
    eligible: np.ndarray  # (types, servers) bool: may host workers of the type
    ps_hosts: np.ndarray  # (servers,) bool
    shapes: list[Shape]
    #: (m, p, N) -> whether some PS host could take the PSs beside g of N workers on the
    #: empty cluster (a necessary condition for any start; filled by :meth:`ps_dist_possible`).
    _dist_possible: dict[tuple[int, int, int], bool] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        job: JobSpec,
        view: ClusterView,
        catalogue: TypeCatalogue,
        scale: np.ndarray,
        work: float,
        usable: int,
        rates: dict[tuple[str, int, int, int], float] | None = None,
    ) -> JobShapes:
        """``rates``: the job's rates per (case, m, p, N) known from an earlier round while
        the runtime model's predictions for the job have not changed, filled with those
        found now."""
        cluster = view.cluster
        wt: list[str | None] = list(job.worker_types) or [None]
        pt: list[str | None] = (list(job.ps_types) or [None]) if job.uses_ps else [None]
        wd = np.array([cluster.demand_array(job.worker_demand(m)) for m in wt]) / scale
        pd = np.array([cluster.demand_array(job.ps_demand(p)) for p in pt]) / scale
        if not job.uses_ps:
            pd = np.zeros_like(pd)
        eligible = np.zeros((len(wt), len(cluster)), dtype=bool)
        for i, m in enumerate(wt):
            eligible[i, worker_servers(job, m, cluster, catalogue)] = True
        ps_hosts = np.zeros(len(cluster), dtype=bool)
        ps_hosts[list(cluster.ps_servers)] = True
        out = cls(
            job,
            wt,
            pt,
            wd,
            pd,
            np.array([job.worker_demand(m)["bw_gbps"] for m in wt]),
            np.array([job.ps_demand(p)["bw_gbps"] for p in pt]),
            eligible,
            ps_hosts,
            [],
        )
        out.shapes = _enumerate(job, view, wt, pt, work, usable, {} if rates is None else rates)
        return out

    def fixed(
        self,
        view: ClusterView,
        work: float,
        usable: int,
        worker_type: str | None,
        ps_type: str | None,
        count: int,
    ) -> JobShapes:
        """The same job held to one configuration (``worker_type``, ``ps_type``, ``count``
        workers: Jain et al.'s jobs come with theirs), co-located or not: its shapes of
        that configuration only, each as long as ``count`` workers take, within
        ``usable`` slots. None of them when the job offers neither type."""
        if worker_type not in self.worker_types or ps_type not in self.ps_types:
            return dataclasses.replace(self, shapes=[], _dist_possible={})
        m, p = self.worker_types.index(worker_type), self.ps_types.index(ps_type)
        n = max(self.job.min_workers, min(count, self.job.worker_cap))
        cases = ("ps_central", "ps_dist") if self.job.uses_ps else ("ra_central", "ra_dist")
        shapes: list[Shape] = []
        a, b = 0, min(1, len(view.cluster) - 1)
        for case in cases:
            if (not case.endswith("central") and len(view.cluster) < 2) or (
                case == "ra_dist" and n == 1
            ):
                continue
            rate = _rate(self.job, view, case, worker_type, ps_type, n, a, b)
            if rate > 0 and math.isfinite(rate):
                length = max(1, math.ceil(work / rate - 1e-9))
                if length <= usable:
                    shapes.append(Shape(case, m, p, n, length, 0))
        return dataclasses.replace(self, shapes=shapes, _dist_possible={})

    def ps_needed(self, remote: int, total: int, p: int, m: int) -> int:
        """PSs to cover ``remote`` workers' bandwidth ((2i)) and the job's worker:PS
        ratio, at least one ((2e)); a huge count when the PS type has no bandwidth."""
        need = 1
        b, big_b = float(self.worker_bw[m]), float(self.ps_bw[p])
        if remote > 0 and b > 0:
            if big_b <= 0:
                return 1 << 30
            need = max(need, math.ceil(remote * b / big_b - 1e-9))
        ratio = self.job.ps_ratio
        if ratio is not None:
            need = max(need, math.ceil(total / ratio - 1e-9))
        return need

    def ps_dist_possible(self, capacity: np.ndarray, shape: Shape) -> bool:
        """False when no PS host, even empty, can hold the PSs that g of the N workers
        beside them leave needed, for any g <= N - 1 (Alg. 4 then finds nothing at any
        start: residual capacity is at most ``capacity``, the normalised servers)."""
        k = (shape.m, shape.p, shape.n)
        hit = self._dist_possible.get(k)
        if hit is None:
            hosts = capacity[self.ps_hosts]
            w, z = self.worker_demand[shape.m], self.ps_demand[shape.p]
            g = np.arange(shape.n)
            room = np.where(self.eligible[shape.m][self.ps_hosts], fit_count(hosts, w), 0)
            left = hosts[:, None, :] - g[None, :, None] * w
            needs = self.ps_needed_many(shape.n - g, shape.n, shape.p, shape.m)
            ok = (g[None, :] <= room[:, None]) & (fit_count(left, z) >= needs[None, :])
            hit = self._dist_possible[k] = bool(ok.any())
        return hit

    def ps_needed_many(self, remote: np.ndarray, total: int, p: int, m: int) -> np.ndarray:
        """:meth:`ps_needed` for an array of remote-worker counts at once."""
        need = np.ones(remote.shape, dtype=np.int64)
        b, big_b = float(self.worker_bw[m]), float(self.ps_bw[p])
        if b > 0:
            if big_b <= 0:
                need = np.where(remote > 0, 1 << 30, need)
            else:
                cover = np.ceil(remote * b / big_b - 1e-9).astype(np.int64)
                need = np.where(remote > 0, np.maximum(need, cover), need)
        ratio = self.job.ps_ratio
        if ratio is not None:
            need = np.maximum(need, math.ceil(total / ratio - 1e-9))
        return need


def _enumerate(
    job: JobSpec,
    view: ClusterView,
    wt: list[str | None],
    pt: list[str | None],
    work: float,
    usable: int,
    rates: dict[tuple[str, int, int, int], float],
) -> list[Shape]:
    if work <= 0 or usable < 1:
        return []
    n_servers = len(view.cluster)
    a, b = 0, min(1, n_servers - 1)
    shapes: list[Shape] = []
    cases = ("ps_central", "ps_dist") if job.uses_ps else ("ra_central", "ra_dist")
    counts = range(max(1, job.min_workers), job.worker_cap + 1)
    for case in cases:
        central = case.endswith("central")
        if not central and n_servers < 2:
            continue
        for mi, m in enumerate(wt):
            for pi, p in enumerate(pt):
                by_length: dict[int, int] = {}
                for n in counts:
                    if case == "ra_dist" and n == 1:
                        continue  # one worker is co-located: the central case
                    # One placement made per (case, types, count), once per model
                    # version: this loop is most of a round's time.
                    rate = rates.get((case, mi, pi, n))
                    if rate is None:
                        rate = rates[case, mi, pi, n] = _rate(job, view, case, m, p, n, a, b)
                    if not rate > 0 or not math.isfinite(rate):
                        continue
                    length = max(1, math.ceil(work / rate - 1e-9))
                    if length <= usable and length not in by_length:
                        by_length[length] = n
                # The paper's order: PS by window length (largest N first), RA by N.
                if job.uses_ps:
                    items = sorted(by_length.items())
                else:
                    items = sorted(by_length.items(), key=lambda kv: kv[1])
                for rank, (length, n) in enumerate(items):
                    shapes.append(Shape(case, mi, pi, n, length, rank))
    return shapes


def _rate(
    job: JobSpec, view: ClusterView, case: str, m: str | None, p: str | None, n: int, a: int, b: int
) -> float:
    """Work per slot of ``n`` workers in ``case`` on representative servers ``a`` and ``b``."""
    workers: tuple[tuple[int, int], ...]
    ps: tuple[tuple[int, int], ...]
    if case.endswith("central"):
        workers, ps = ((a, n),), ((a, 1),) if job.uses_ps else ()
    else:
        ps = ((b, 1),) if job.uses_ps else ()
        workers = ((a, n),) if job.uses_ps else ((a, n - 1), (b, 1))
    return view.rate_per_slot(job, Placement(workers, ps, worker_type=m, ps_type=p))
