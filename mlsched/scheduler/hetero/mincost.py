"""The per-job cost minimisation (spec 002 §3.6-3.9): the cheapest feasible schedule of one
job at the grid's current prices, over every shape and start slot.

* co-located (``mincost_central``; the paper's A_mincost2 and A_RAmincost1, [AMB-10]): all
  N workers (and one PS) on one server, checked against the window's least residual
  capacity, for every (start, server) at once;
* distributed (``mincost_dist``; A_mincost1 and A_RAmincost2): workers filled greedily from
  the servers cheapest over the window. For a ring this is exact and vectorised over the
  starts. For PS jobs all PSs go on one host n (§3.7, [AMB-6]) next to g of the workers,
  the largest g whose PSs cover the remote workers' bandwidth (g <= N - 1,
  s = max(1, ceil((N - g) b / B)), [AMB-5]); the greedy fill without the PS plus the
  cheapest PS host's price for the fewest PSs is a lower bound of that cost, so candidates
  are evaluated best-first by it and the search stops once the bound exceeds the best found
  (exact, and it skips most of the Python loop).

Candidates compare by :func:`key`: ``(cost, completion, resource-slots, case, ...)`` by
default ([AMB-9]), or the paper's first-found rule (``(cost, case, enumeration order)``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mlsched.scheduler.hetero.grid import EPS, Grid, fit_count
from mlsched.scheduler.hetero.shapes import JobShapes, Shape

__all__ = ["TIE_BREAKS", "Candidate", "mincost"]

TIE_BREAKS = ("spec", "paper")

Key = tuple[float, ...]


@dataclass(frozen=True)
class Candidate:
    cost: float
    key: Key
    shape: Shape
    start: int
    workers: dict[int, int]
    ps: dict[int, int] = field(default_factory=dict)

    def usage(self, shapes: JobShapes) -> dict[int, np.ndarray]:
        """Normalised resources per server."""
        w = shapes.worker_demand[self.shape.m]
        p = shapes.ps_demand[self.shape.p]
        out: dict[int, np.ndarray] = {}
        for s, c in self.workers.items():
            out[s] = out.get(s, 0) + c * w
        for s, c in self.ps.items():
            out[s] = out.get(s, 0) + c * p
        return out


def key(tie: str, cost: float, shape: Shape, start: int, slots: float, server: int) -> Key:
    case = 0.0 if shape.case.endswith("central") else 1.0
    order = (float(shape.m), float(shape.p), float(shape.rank), float(start), float(server))
    if tie == "paper":
        return (cost, case, *order)
    return (cost, float(start + shape.length), slots, case, *order)


def mincost_central(grid: Grid, js: JobShapes, shape: Shape, tie: str) -> Candidate | None:
    sums, least = grid.window(shape.length)
    uses_ps = shape.case.startswith("ps")
    s = js.ps_needed(0, shape.n, shape.p, shape.m) if uses_ps else 0
    demand = shape.n * js.worker_demand[shape.m] + s * js.ps_demand[shape.p]
    ok = js.eligible[shape.m] & (least[..., 0] >= demand[0] - EPS)
    for r in range(1, len(demand)):  # per resource: .all() over the short last axis is slow
        ok &= least[..., r] >= demand[r] - EPS
    if uses_ps:
        ok &= js.ps_hosts
    if not ok.any():
        return None
    cost = np.where(ok, sums @ demand, np.inf)
    flat = int(np.argmin(cost))  # first minimum: earliest start, then lowest server
    start, server = divmod(flat, cost.shape[1])
    value = float(cost[start, server])
    slots = shape.length * float(demand.sum())
    return Candidate(
        value,
        key(tie, value, shape, start, slots, server),
        shape,
        start,
        {server: shape.n},
        {server: s} if s else {},
    )


_Ranked = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _ranked(grid: Grid, js: JobShapes, m: int, length: int) -> _Ranked:
    """What the greedy fill shares between shapes of one worker type and length: per
    start, the servers' window prices and capacities, their order by price, and the
    capacities and prices along that order with the capacity before each server."""
    sums, least = grid.window(length)
    w = js.worker_demand[m]
    omega = sums @ w
    cap = np.where(js.eligible[m], fit_count(least, w), 0)
    priced = np.where(cap > 0, omega, np.inf)
    order = np.argsort(priced, axis=1, kind="stable")
    cap_sorted = np.take_along_axis(cap, order, axis=1)
    before = np.cumsum(cap_sorted, axis=1) - cap_sorted
    om_sorted = np.take_along_axis(omega, order, axis=1)
    return omega, cap, order, cap_sorted, before, om_sorted


def _greedy(
    ranked: _Ranked, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per start: the cheapest cost of ``n`` workers (inf if they do not fit), the server
    order by price, the counts along it, and the price and capacity rows."""
    omega, cap, order, cap_sorted, before, om_sorted = ranked
    fill = np.clip(n - before, 0, cap_sorted)
    cost = np.where(fill > 0, fill * om_sorted, 0.0).sum(axis=1)
    cost = np.where(fill.sum(axis=1) >= n, cost, np.inf)
    return cost, order, fill, omega, cap


def _ps_dist_exact(
    grid: Grid,
    js: JobShapes,
    shape: Shape,
    start: int,
    order: np.ndarray,
    fill: np.ndarray,
    omega: np.ndarray,
    cap: np.ndarray,
    tie: str,
) -> Candidate | None:
    """Alg. 4 at one start (see the module docstring); None if no PS host works.
    ``order`` and ``fill`` are the start's greedy fill of the N workers (it fits)."""
    sums, least = grid.window(shape.length)
    w, z = js.worker_demand[shape.m], js.ps_demand[shape.p]
    zeta = sums[start] @ z
    res = least[start]
    n_total = shape.n
    base = np.zeros(len(order), dtype=np.int64)
    base[order] = fill
    base_cost = float((base * omega).sum())
    best: Candidate | None = None
    best_key: Key | None = None
    s0 = js.ps_needed(n_total, n_total, shape.p, shape.m)
    # Hosts holding none of the greedy's workers: the fill stays, g = 0.
    spare = fit_count(res, z)
    outside = js.ps_hosts & (base == 0) & (spare >= s0)
    if outside.any():
        extra = np.where(outside, zeta * s0, np.inf)
        n = int(np.argmin(extra))
        cost = base_cost + float(extra[n])
        workers = {int(s): int(c) for s, c in enumerate(base) if c}
        slots = shape.length * float(n_total * w.sum() + s0 * z.sum())
        best_key = key(tie, cost, shape, start, slots, n)
        best = Candidate(cost, best_key, shape, start, workers, {n: s0})
    for host in np.flatnonzero(js.ps_hosts & (base > 0)):
        n = int(host)
        yk = int(base[n])
        gs = np.arange(min(yk, n_total - 1) + 1)
        needs = js.ps_needed_many(n_total - gs, n_total, shape.p, shape.m)
        feasible = np.flatnonzero(fit_count(res[n] - gs[:, None] * w, z) >= needs)
        if not len(feasible):
            continue
        chosen = int(feasible[-1])  # the largest feasible g wins, as in the paper
        s = int(needs[chosen])
        y = base.copy()
        y[n] = chosen
        left = yk - chosen
        pos = int(np.flatnonzero(order == n)[0])
        for k in order[pos + 1 :]:
            if left <= 0:
                break
            take = min(int(cap[k]) - int(y[k]), left)
            if take > 0:
                y[k] += take
                left -= take
        if left > 0:
            continue
        cost = float((y * omega).sum()) + float(zeta[n]) * s
        slots = shape.length * float(n_total * w.sum() + s * z.sum())
        k2 = key(tie, cost, shape, start, slots, n)
        if best_key is None or k2 < best_key:
            workers = {int(i): int(c) for i, c in enumerate(y) if c}
            best, best_key = Candidate(cost, k2, shape, start, workers, {n: s}), k2
    return best


def mincost(grid: Grid, js: JobShapes, tie: str) -> Candidate | None:
    """The cheapest schedule of the job (None if nothing fits)."""
    best: Candidate | None = None
    # Alg. 4's candidates, one group per PS shape: (floors, starts, shape, greedy fill).
    groups: list[
        tuple[np.ndarray, np.ndarray, Shape, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    ] = []
    # Shapes of one worker type and length differ only in N: rank the servers once.
    ranked: dict[tuple[int, int], _Ranked] = {}
    ps_floor: dict[tuple[int, int], np.ndarray] = {}
    for shape in js.shapes:
        if shape.case.endswith("central"):
            cand = mincost_central(grid, js, shape, tie)
            if cand is not None and (best is None or cand.key < best.key):
                best = cand
            continue
        if shape.case == "ps_dist" and not js.ps_dist_possible(grid.capacity, shape):
            continue
        at_length = ranked.get((shape.m, shape.length))
        if at_length is None:
            at_length = ranked[shape.m, shape.length] = _ranked(grid, js, shape.m, shape.length)
        cost, order, fill, omega, cap = _greedy(at_length, shape.n)
        if shape.case == "ra_dist":
            finite = np.isfinite(cost)
            if not finite.any():
                continue
            start = int(np.argmin(cost))
            value = float(cost[start])
            counts = np.zeros(cap.shape[1], dtype=np.int64)
            counts[order[start]] = fill[start]
            slots = shape.length * shape.n * float(js.worker_demand[shape.m].sum())
            cand = Candidate(
                value,
                key(tie, value, shape, start, slots, int(order[start, 0])),
                shape,
                start,
                {int(s): int(c) for s, c in enumerate(counts) if c},
            )
            if best is None or cand.key < best.key:
                best = cand
            continue
        # A lower bound of Alg. 4's cost: the fill without the PS, plus the cheapest PS
        # host's price for the fewest PSs any g needs (at least one remote worker).
        zmin = ps_floor.get((shape.p, shape.length))
        if zmin is None:
            sums, _ = grid.window(shape.length)
            zeta = sums @ js.ps_demand[shape.p]
            zmin = ps_floor[shape.p, shape.length] = np.where(js.ps_hosts, zeta, np.inf).min(axis=1)
        s_min = js.ps_needed(1, shape.n, shape.p, shape.m)
        floor = cost + zmin * s_min
        starts = np.flatnonzero(np.isfinite(floor))
        if len(starts):
            groups.append((floor[starts], starts, shape, order, fill, omega, cap))
    if not groups:
        return best
    # Best-first by (bound, completion), ties in the order the candidates were made (a
    # stable sort over the groups in shape order, starts ascending within each).
    floors = np.concatenate([g[0] for g in groups])
    starts = np.concatenate([g[1] for g in groups])
    which = np.repeat(np.arange(len(groups)), [len(g[1]) for g in groups])
    lengths = np.array([g[2].length for g in groups])
    completions = starts + lengths[which]
    ranking = np.lexsort((completions, floors))
    for i in ranking.tolist():
        bound, completion = float(floors[i]), int(completions[i])
        if best is not None and (
            bound > best.cost or (tie == "spec" and bound == best.cost and completion > best.key[1])
        ):
            break
        _, _, shape, order, fill, omega, cap = groups[int(which[i])]
        start = int(starts[i])
        cand = _ps_dist_exact(
            grid, js, shape, start, order[start], fill[start], omega[start], cap[start], tie
        )
        if cand is not None and (best is None or cand.key < best.key):
            best = cand
    return best
