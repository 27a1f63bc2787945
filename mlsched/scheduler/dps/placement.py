"""PA, spec 004's placement (Alg. 2, §3.5), and DPS-RS's random placement, on a task filler.

PA orders servers by (X desc, Z desc, index asc): X[s] workers of the job's type fit
server s now, Z[s] PSs of its PS type (A13). The whole job goes on the first server of that
order that holds all of it (worst fit, literal; ``best_fit``: the last, A14); otherwise
workers fill the servers in that order, then PSs in the same order, so PSs tend to land on
their workers' servers. Only co-location (q = 1) changes the runtime under spec 004's
model (R3); on real hardware fewer servers also means less traffic.

Random placement puts each worker, then each PS, on a server drawn uniformly among those
with room for one more (A21): the job is co-located only by chance.

Both take the resources from the filler and return the placement, or take nothing and
return None when the job does not fit. On servers whose worker and PS resources are
disjoint (the ``dps-paper`` workload) "fits" is spec 004's count test; on shared resources
the whole job's demand is checked together.
"""

from __future__ import annotations

import numpy as np

from mlsched.core.allocation import Placement
from mlsched.scheduler.baselines.taskfill import EPS, TaskFiller
from mlsched.scheduler.dps.types import Shape

__all__ = ["PLACEMENTS", "pa", "place", "random_placement"]

#: ``pa`` (worst fit, the paper's), ``pa-best-fit`` (A14's alternative), ``random`` (RS).
PLACEMENTS = ("pa", "pa-best-fit", "random")


def _counts(filler: TaskFiller, servers: np.ndarray, demand: np.ndarray) -> np.ndarray:
    out = np.zeros(len(filler.free), dtype=np.int64)
    if len(servers):
        out[servers] = filler.fit_counts(servers, demand)
    return out


def _placement(workers: dict[int, int], ps: dict[int, int]) -> Placement:
    return Placement(tuple(workers.items()), tuple(ps.items()))


def pa(filler: TaskFiller, shape: Shape, *, best_fit: bool = False) -> Placement | None:
    """Alg. 2 on the filler's free capacity."""
    dw, dp = shape.n_workers, shape.n_ps
    x = _counts(filler, shape.worker_servers, shape.worker)
    z = _counts(filler, shape.ps_servers, shape.ps) if dp else np.zeros_like(x)
    if x.sum() < dw or z.sum() < dp:
        return None
    order = np.lexsort((np.arange(len(x)), -z, -x))
    # z is 0 off the PS pool: only a server hosting both kinds can take a PS job whole.
    whole = order[(x[order] >= dw) & (z[order] >= dp)]
    together = shape.worker * dw + shape.ps * dp
    for s in whole[::-1] if best_fit else whole:
        s = int(s)
        if (filler.free[s] >= together - EPS).all():
            filler.take(s, shape.worker, dw)
            if dp:
                filler.take(s, shape.ps, dp)
            return _placement({s: dw}, {s: dp} if dp else {})
    workers = _fill(filler, order, x, shape.worker, dw)
    if workers is None:
        return None
    if not dp:
        return _placement(workers, {})
    z = _counts(filler, shape.ps_servers, shape.ps)  # what the workers left
    return _with_ps(filler, shape, workers, _fill(filler, order, z, shape.ps, dp))


def _with_ps(
    filler: TaskFiller, shape: Shape, workers: dict[int, int], ps: dict[int, int] | None
) -> Placement | None:
    """The placement of ``workers`` and ``ps``; when the PSs did not fit (None), the
    workers' capacity goes back to the filler: the whole job or nothing."""
    if ps is None:
        for s, c in workers.items():
            filler.give(s, shape.worker, c)
        return None
    return _placement(workers, ps)


def _fill(
    filler: TaskFiller, order: np.ndarray, room: np.ndarray, demand: np.ndarray, need: int
) -> dict[int, int] | None:
    taken: dict[int, int] = {}
    for s in order:
        if need == 0:
            break
        k = int(min(room[s], need))
        if k > 0:
            filler.take(int(s), demand, k)
            taken[int(s)] = k
            need -= k
    if need:
        for s, c in taken.items():
            filler.give(s, demand, c)
        return None
    return taken


def random_placement(
    filler: TaskFiller, shape: Shape, rng: np.random.Generator
) -> Placement | None:
    """Each task on a uniformly drawn server with room for it (DPS-RS)."""
    workers = _scatter(filler, shape.worker_servers, shape.worker, shape.n_workers, rng)
    if workers is None:
        return None
    if not shape.n_ps:
        return _placement(workers, {})
    ps = _scatter(filler, shape.ps_servers, shape.ps, shape.n_ps, rng)
    return _with_ps(filler, shape, workers, ps)


def _scatter(
    filler: TaskFiller,
    servers: np.ndarray,
    demand: np.ndarray,
    need: int,
    rng: np.random.Generator,
) -> dict[int, int] | None:
    taken: dict[int, int] = {}
    room = filler.fit_counts(servers, demand) if len(servers) else np.zeros(0, dtype=np.int64)
    for _ in range(need):
        open_ = np.flatnonzero(room > 0)
        if not len(open_):
            for s, c in taken.items():
                filler.give(s, demand, c)
            return None
        i = int(open_[rng.integers(len(open_))])
        s = int(servers[i])
        filler.take(s, demand)
        taken[s] = taken.get(s, 0) + 1
        room[i] = filler.fit_counts(servers[i : i + 1], demand)[0]
    return taken


def place(
    filler: TaskFiller, shape: Shape, rule: str, rng: np.random.Generator | None = None
) -> Placement | None:
    """The job placed by ``rule`` (one of :data:`PLACEMENTS`)."""
    if rule == "random":
        assert rng is not None, "random placement needs the job's generator"
        return random_placement(filler, shape, rng)
    return pa(filler, shape, best_fit=rule == "pa-best-fit")
