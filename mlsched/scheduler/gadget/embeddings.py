"""Ring embeddings on the two-tier tree, and the cheapest one at given prices.

An :class:`Embedding` puts k workers of one job on servers; its ring visits its servers
once each, grouped by rack (spec 003 §3.4.4), so on the tree its link load is exact and
small: b_i on each used server's up and down link when it spans two servers or more, and
b_i on each used rack's up and down link when it spans two racks or more. Any other order
loads every link at least as much, which is why the candidate embeddings of LP-RS-MDE are
these.

:func:`cheapest` is the column-generation oracle: given a price per unit of each server
resource and per Gbit/s of each link, the cheapest embedding of each size k = 1..K, exactly,
by a fixed-charge knapsack over each rack's servers and then over the racks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from mlsched.core.allocation import Placement
from mlsched.scheduler.gadget.problem import RingJob, SlotProblem

__all__ = ["Embedding", "cheapest", "embedding_of"]

_INF = math.inf


@dataclass(frozen=True)
class Embedding:
    """``workers``: (server, count) in ring order; ``links``: the links its hops cross."""

    job: int  # index into SlotProblem.jobs
    size: int
    workers: tuple[tuple[int, int], ...]
    links: tuple[int, ...] = field(default=())

    @property
    def servers(self) -> tuple[int, ...]:
        return tuple(s for s, _ in self.workers)

    def placement(self) -> Placement:
        return Placement(self.workers, ring=self.servers)


def embedding_of(problem: SlotProblem, job: int, counts: dict[int, int]) -> Embedding:
    """The embedding with ``counts`` workers per server, in ring order (racks, then
    servers, ascending), with the links its hops cross."""
    rack_of = problem.links.rack_of
    order = sorted((s for s, c in counts.items() if c > 0), key=lambda s: (rack_of[s], s))
    workers = tuple((s, counts[s]) for s in order)
    links: tuple[int, ...] = ()
    if problem.jobs[job].hop_gbps > 0 and len(order) > 1:
        links = tuple(sorted(problem.links.ring_load(order, 1.0)))
    return Embedding(job, sum(counts.values()), workers, links)


def fits_alone(problem: SlotProblem, ring_job: RingJob, k_max: int) -> np.ndarray:
    """Most workers of the job each server holds on its own (0 off its hosts), capped."""
    fit = np.zeros(len(problem.cluster), dtype=int)
    hosts = ring_job.host_array
    if not len(hosts):
        return fit
    need = ring_job.demand > 0
    if need.any():
        ratio = problem.capacity[np.ix_(hosts, np.flatnonzero(need))] / ring_job.demand[need]
        fit[hosts] = np.minimum(k_max, np.floor(ratio.min(axis=1) + 1e-9)).astype(int)
    else:
        fit[hosts] = k_max
    return fit


def cheapest(
    problem: SlotProblem,
    job: int,
    node_price: np.ndarray,
    link_price: np.ndarray,
    k_max: int,
    fit: np.ndarray | None = None,
) -> list[tuple[float, Embedding] | None]:
    """For k = 1..k_max (list index k - 1): the cheapest feasible embedding of k workers
    and its cost, or None when k workers cannot be embedded.

    ``node_price``: per unit of each resource on each server (servers x resources);
    ``link_price``: per Gbit/s of each link. An embedding alone must fit the problem's free
    capacity: its workers the servers', its reservation every link it crosses. ``fit``:
    :func:`fits_alone` for this job and ``k_max``, when the caller keeps it.
    """
    ring_job = problem.jobs[job]
    if fit is None:
        fit = fits_alone(problem, ring_job, k_max)
    per_worker = node_price @ ring_job.demand  # cost of one worker on each server
    b = ring_job.hop_gbps
    links = problem.links
    n = len(problem.cluster)
    up_down = link_price[0 : 2 * n].reshape(n, 2).sum(axis=1) * b
    free = problem.link_capacity
    tol = 1e-9
    best: list[tuple[float, dict[int, int]] | None] = [None] * k_max

    def offer(k: int, cost: float, counts: dict[int, int]) -> None:
        current = best[k - 1]
        if current is None or cost < current[0] - 1e-12:
            best[k - 1] = (cost, counts)

    # One server: no link is crossed; for each k the cheapest server with room for k.
    order = np.argsort(per_worker, kind="stable")
    fit_sorted = fit[order]
    for k in range(1, k_max + 1):
        room = np.flatnonzero(fit_sorted >= k)
        if not len(room):
            break
        s = int(order[room[0]])
        offer(k, k * float(per_worker[s]), {s: k})
    if k_max >= 2:
        # Servers whose up and down links can carry the reservation. In a rack, a ring
        # of at most k_max workers needs, for each count y, only the k_max servers where y
        # workers cost least (any other could be swapped for one of them left unused).
        hosts = ring_job.host_array
        ok = fit[hosts] > 0
        if b > 0:
            ok &= np.minimum(free[2 * hosts], free[2 * hosts + 1]) >= b - tol
        cand = hosts[ok]
        rack = links.rack_array[cand]
        f, pw = fit[cand], per_worker[cand]
        ud = up_down[cand] if b > 0 else np.zeros(len(cand))
        keep = np.zeros(len(cand), dtype=bool)
        position = np.arange(len(cand))
        for y in range(1, k_max + 1):
            cost_y = np.where(f >= y, ud + y * pw, np.inf)
            order = np.lexsort((cand, cost_y, rack))
            in_rack = rack[order]
            first = np.ones(len(order), dtype=bool)
            first[1:] = in_rack[1:] != in_rack[:-1]
            starts = np.maximum.accumulate(np.where(first, position, 0))
            chosen = order[(position - starts < k_max) & np.isfinite(cost_y[order])]
            keep[chosen] = True
        by_rack: dict[int, list[tuple[int, int, float, float]]] = {}
        for s_, r_, f_, pw_, ud_ in zip(
            cand[keep].tolist(),
            rack[keep].tolist(),
            f[keep].tolist(),
            pw[keep].tolist(),
            ud[keep].tolist(),
            strict=True,
        ):
            by_rack.setdefault(r_, []).append((s_, f_, pw_, ud_))
        rack_tables: dict[int, list[tuple[float, dict[int, int]] | None]] = {}
        for rack_index, items in sorted(by_rack.items()):
            table = _knapsack(sorted(items), k_max)
            rack_tables[rack_index] = table
            for k in range(2, k_max + 1):
                entry = table[k]
                if entry is not None and len(entry[1]) >= 2:
                    offer(k, entry[0], entry[1])
        # Across racks: each used rack's links to the core carry the reservation too.
        racks = []
        for rack_index, table in sorted(rack_tables.items()):
            i = 2 * n + 2 * rack_index
            if b > 0 and min(free[i], free[i + 1]) < b - tol:
                continue
            charge = float(link_price[i] + link_price[i + 1]) * b if b > 0 else 0.0
            racks.append((table, charge))
        if len(racks) >= 2:
            combined = _combine(racks, k_max)
            for k in range(2, k_max + 1):
                spread = combined[k]
                if spread is not None and spread[2] >= 2:
                    offer(k, spread[0], spread[1])
    out: list[tuple[float, Embedding] | None] = []
    for entry in best:
        out.append(None if entry is None else (entry[0], embedding_of(problem, job, entry[1])))
    return out


def _knapsack(
    servers: list[tuple[int, int, float, float]], k_max: int
) -> list[tuple[float, dict[int, int]] | None]:
    """Cheapest way to put exactly k workers (index k) on these servers, each used server
    costing its fixed charge plus its per-worker cost: (cost, counts) or None."""
    table: list[tuple[float, dict[int, int]] | None] = [(0.0, {})] + [None] * k_max
    for s, cap, unit, fixed in servers:
        nxt = list(table)
        for k in range(1, k_max + 1):
            for y in range(1, min(cap, k) + 1):
                prev = table[k - y]
                if prev is None:
                    continue
                cost = prev[0] + fixed + y * unit
                current = nxt[k]
                if current is None or cost < current[0] - 1e-12:
                    nxt[k] = (cost, {**prev[1], s: y})
        table = nxt
    return table


def _combine(
    racks: list[tuple[list[tuple[float, dict[int, int]] | None], float]], k_max: int
) -> list[tuple[float, dict[int, int], int] | None]:
    """Cheapest way to put exactly k workers over racks, at least one worker in each rack
    used, each used rack costing its charge: (cost, counts, racks used) or None."""
    table: list[tuple[float, dict[int, int], int] | None] = [(0.0, {}, 0)] + [None] * k_max
    for rack_table, charge in racks:
        nxt = list(table)
        for k in range(1, k_max + 1):
            for y in range(1, k + 1):
                prev, inside = table[k - y], rack_table[y]
                if prev is None or inside is None:
                    continue
                cost = prev[0] + inside[0] + charge
                current = nxt[k]
                if current is None or cost < current[0] - 1e-12:
                    nxt[k] = (cost, {**prev[1], **inside[1]}, prev[2] + 1)
        table = nxt
    return table
