"""COST_t: the cheapest placement of a job's workers and PSs within one slot (spec 001 §3.4).

Workers of a job are identical and each costs ``sum_r p_h^r w^r`` on server h, up to the
number that fit there, so the cheapest ``Y`` workers are a cheapest-first fill (ties: lower
server index, spec A22); the same holds for the ``Z = ps_for[Y]`` PSs. The cost of every
``Y`` in a slot is therefore one prefix sum over the servers' unit prices expanded by their
capacity (the spec's recommendation for DP-B), and :func:`slot_costs` returns them all at once.

Shared servers. The paper's worker and PS pools are disjoint. Where a server may host both
(``Pool.BOTH``) and is eligible for both of a job's task kinds, a worker placed there takes
room a PS could use. Then each ``Y`` is evaluated as workers first, PSs on what they leave,
in two worker orders (cheapest first; servers that host no PSs first), and the cheaper
feasible one is taken. Every returned placement fits; optimality is no longer guaranteed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mlsched.scheduler.oasis.needs import JobNeeds

__all__ = ["Filled", "Layout", "SlotOffer", "largest_fit", "place", "slot_costs", "task_caps"]

_EPS = 1e-9


@dataclass(frozen=True)
class Filled:
    """One slot's placement of a job: server -> count for workers and PSs, and its cost."""

    workers: dict[int, int]
    ps: dict[int, int]
    cost: float

    @property
    def n_workers(self) -> int:
        return sum(self.workers.values())

    @property
    def n_ps(self) -> int:
        return sum(self.ps.values())


@dataclass(frozen=True)
class SlotOffer:
    """COST_t's inputs for one job in one slot: per eligible server, the cost of one task
    and how many fit. Where some server is in both lists (shared), ``ps_index`` gives for
    each worker server its position in ``ps_servers`` (-1: none) and ``ps_after[i, n]`` the
    PSs that still fit on worker server i once n of the job's workers are there."""

    worker_servers: np.ndarray
    worker_price: np.ndarray
    worker_cap: np.ndarray
    ps_servers: np.ndarray
    ps_price: np.ndarray
    ps_cap: np.ndarray
    ps_index: np.ndarray | None = None
    ps_after: np.ndarray | None = None

    @property
    def shared(self) -> bool:
        return self.ps_index is not None

    @classmethod
    def of(
        cls,
        worker: Sequence[tuple[int, float, int]],
        ps: Sequence[tuple[int, float, int]] = (),
    ) -> SlotOffer:
        """An offer from (server, unit price, capacity) triples (disjoint pools)."""

        def cols(rows: Sequence[tuple[int, float, int]]) -> tuple[np.ndarray, ...]:
            return (
                np.array([r[0] for r in rows], dtype=np.int64),
                np.array([r[1] for r in rows], dtype=float),
                np.array([r[2] for r in rows], dtype=np.int64),
            )

        return cls(*cols(worker), *cols(ps))


def task_caps(free: np.ndarray, demand: np.ndarray, limit: int) -> np.ndarray:
    """How many tasks of ``demand`` fit in ``free`` (..., resources), capped at ``limit``;
    resources the task does not use do not limit it (spec A6)."""
    need = demand > 0
    if not need.any():
        return np.full(free.shape[:-1], limit, dtype=np.int64)
    ratio = np.min(free[..., need] / demand[need], axis=-1)
    caps = np.floor(np.maximum(ratio, 0.0) + _EPS)
    return np.minimum(caps, limit).astype(np.int64)


@dataclass(frozen=True)
class Layout:
    """Where one job's tasks may go and what one takes (raw, and in the units prices are
    per, see :mod:`mlsched.scheduler.oasis.prices`): built once per decision, it turns a
    slot's prices and free capacity into that slot's :class:`SlotOffer`."""

    worker_servers: np.ndarray
    ps_servers: np.ndarray
    worker_demand: np.ndarray
    ps_demand: np.ndarray
    worker_priced: np.ndarray
    ps_priced: np.ndarray
    ps_index: np.ndarray

    @classmethod
    def of(
        cls,
        worker_servers: Sequence[int],
        ps_servers: Sequence[int],
        worker_demand: np.ndarray,
        ps_demand: np.ndarray,
        *,
        worker_priced: np.ndarray | None = None,
        ps_priced: np.ndarray | None = None,
    ) -> Layout:
        """``ps_servers`` empty for a job without PSs."""
        w_idx = np.asarray(worker_servers, dtype=np.int64)
        p_idx = np.asarray(ps_servers, dtype=np.int64)
        where = {int(s): i for i, s in enumerate(p_idx)}
        return cls(
            w_idx,
            p_idx,
            worker_demand,
            ps_demand,
            worker_demand if worker_priced is None else worker_priced,
            ps_demand if ps_priced is None else ps_priced,
            np.array([where.get(int(s), -1) for s in w_idx], dtype=np.int64),
        )

    @property
    def shared(self) -> bool:
        return bool(np.any(self.ps_index >= 0))

    def offer(self, prices: np.ndarray, free: np.ndarray, needs: JobNeeds) -> SlotOffer:
        """The offer of one slot with ``prices`` and ``free`` of shape (servers, resources)."""
        return self.offers(prices[None], free[None], needs)[0]

    def offers(self, prices: np.ndarray, free: np.ndarray, needs: JobNeeds) -> list[SlotOffer]:
        """One offer per slot from ``prices`` and ``free`` of shape (slots, servers,
        resources), computed together."""
        w_free = free[:, self.worker_servers]
        w_cap = task_caps(w_free, self.worker_demand, needs.y_max)
        w_price = prices[:, self.worker_servers] @ self.worker_priced
        n = len(prices)
        if not self.ps_servers.size:
            empty = np.zeros(0)
            return [
                SlotOffer(self.worker_servers, w_price[t], w_cap[t], self.ps_servers, empty, empty)
                for t in range(n)
            ]
        z_max = needs.z_max
        p_cap = task_caps(free[:, self.ps_servers], self.ps_demand, z_max)
        p_price = prices[:, self.ps_servers] @ self.ps_priced
        if not self.shared:
            return [
                SlotOffer(
                    self.worker_servers, w_price[t], w_cap[t], self.ps_servers, p_price[t], p_cap[t]
                )
                for t in range(n)
            ]
        counts = np.arange(needs.y_max + 1, dtype=float)
        left = w_free[:, :, None, :] - counts[None, None, :, None] * self.worker_demand
        after = task_caps(left, self.ps_demand, z_max)
        return [
            SlotOffer(
                self.worker_servers,
                w_price[t],
                w_cap[t],
                self.ps_servers,
                p_price[t],
                p_cap[t],
                ps_index=self.ps_index,
                ps_after=after[t],
            )
            for t in range(n)
        ]


def _prefix(price: np.ndarray, cap: np.ndarray, limit: int) -> np.ndarray:
    """Cost of the k cheapest tasks, k = 0..(tasks that fit, at most ``limit``)."""
    order = np.argsort(price, kind="stable")
    units = np.repeat(price[order], np.minimum(cap[order], limit))[:limit]
    out = np.empty(len(units) + 1)
    out[0] = 0.0
    np.cumsum(units, out=out[1:])
    return out


def _walk(prices: list[float], caps: list[int], count: int) -> float | None:
    """Cost of ``count`` tasks over servers in the given order, None when they do not fit."""
    cost = 0.0
    left = count
    for price, cap in zip(prices, caps, strict=True):
        if left <= 0:
            break
        if cap > 0:
            take = cap if cap < left else left
            cost += price * take
            left -= take
    return cost if left <= 0 else None


def _worker_orders(offer: SlotOffer) -> list[np.ndarray]:
    cheapest = np.argsort(offer.worker_price, kind="stable")
    if not offer.shared:
        return [cheapest]
    assert offer.ps_index is not None
    is_shared = (offer.ps_index >= 0).astype(np.int64)
    index = np.arange(len(offer.worker_price))
    dedicated_first = np.lexsort((index, offer.worker_price, is_shared))
    return [cheapest, dedicated_first]


def slot_costs(offer: SlotOffer, needs: JobNeeds) -> np.ndarray:
    """COST_t for every worker count: ``costs[Y]``, Y = 0..y_max (inf where infeasible:
    below ``y_min``, more than fit, or too few PSs)."""
    costs = np.full(needs.y_max + 1, np.inf)
    costs[0] = 0.0
    if not offer.shared:
        cw = _prefix(offer.worker_price, offer.worker_cap, needs.y_max)
        cp = _prefix(offer.ps_price, offer.ps_cap, needs.z_max) if needs.uses_ps else np.zeros(1)
        ys = np.arange(needs.y_min, len(cw))
        zs = needs.ps_for[ys]
        ok = (zs >= 0) & (zs < len(cp))
        costs[ys[ok]] = cw[ys[ok]] + cp[zs[ok]]
        return costs
    for order in _worker_orders(offer):
        np.minimum(costs, _sequential_costs(offer, needs, order), out=costs)
    return costs


def _sequential_costs(offer: SlotOffer, needs: JobNeeds, order: np.ndarray) -> np.ndarray:
    """Workers in ``order``, then PSs cheapest-first on what they leave, for every Y."""
    assert offer.ps_index is not None and offer.ps_after is not None
    costs = np.full(needs.y_max + 1, np.inf)
    costs[0] = 0.0
    units = np.repeat(order, offer.worker_cap[order])[: needs.y_max].tolist()
    ps_order = np.argsort(offer.ps_price, kind="stable")
    rank = np.empty(len(ps_order), dtype=np.int64)
    rank[ps_order] = np.arange(len(ps_order))
    ps_price: list[float] = offer.ps_price[ps_order].tolist()
    ps_cap: list[int] = offer.ps_cap[ps_order].tolist()
    w_price: list[float] = offer.worker_price.tolist()
    ps_index: list[int] = offer.ps_index.tolist()
    ranks: list[int] = rank.tolist()
    ps_for: list[int] = needs.ps_for.tolist()
    taken = [0] * len(w_price)
    worker_cost = 0.0
    for y, h in enumerate(units, start=1):
        worker_cost += w_price[h]
        taken[h] += 1
        k = ps_index[h]
        if k >= 0:
            ps_cap[ranks[k]] = min(ps_cap[ranks[k]], int(offer.ps_after[h, taken[h]]))
        z = ps_for[y]
        if y < needs.y_min or z < 0:
            continue
        ps_cost = _walk(ps_price, ps_cap, z)
        if ps_cost is not None:
            costs[y] = worker_cost + ps_cost
    return costs


def _fill(
    price: np.ndarray, cap: np.ndarray, count: int, order: np.ndarray
) -> tuple[dict[int, int], float] | None:
    """``count`` tasks over positions in ``order``: (position -> count, cost), or None."""
    taken: dict[int, int] = {}
    cost = 0.0
    left = count
    for i in order.tolist():
        if left <= 0:
            break
        n = min(int(cap[i]), left)
        if n > 0:
            taken[i] = n
            cost += float(price[i]) * n
            left -= n
    return (taken, cost) if left <= 0 else None


def place(offer: SlotOffer, needs: JobNeeds, workers: int) -> Filled | None:
    """The placement :func:`slot_costs` priced for ``workers`` workers, or None if none fits."""
    if workers <= 0:
        return Filled({}, {}, 0.0)
    z = int(needs.ps_for[workers]) if workers <= needs.y_max else -1
    if workers < needs.y_min or z < 0:
        return None
    best: Filled | None = None
    ps_order = np.argsort(offer.ps_price, kind="stable")
    for order in _worker_orders(offer):
        w = _fill(offer.worker_price, offer.worker_cap, workers, order)
        if w is None:
            continue
        ps_cap = offer.ps_cap
        if offer.shared:
            assert offer.ps_index is not None and offer.ps_after is not None
            ps_cap = ps_cap.copy()
            for i, n in w[0].items():
                k = int(offer.ps_index[i])
                if k >= 0:
                    ps_cap[k] = min(ps_cap[k], int(offer.ps_after[i, n]))
        p = _fill(offer.ps_price, ps_cap, z, ps_order)
        if p is None:
            continue
        filled = Filled(
            {int(offer.worker_servers[i]): n for i, n in w[0].items()},
            {int(offer.ps_servers[k]): n for k, n in p[0].items()},
            w[1] + p[1],
        )
        if best is None or filled.cost < best.cost:
            best = filled
    return best


def largest_fit(offer: SlotOffer, needs: JobNeeds) -> Filled | None:
    """The most workers (and their PSs) that fit, cheapest-first: for best-effort runs."""
    for y in range(min(needs.y_max, int(offer.worker_cap.sum())), needs.y_min - 1, -1):
        filled = place(offer, needs, y)
        if filled is not None:
            return filled
    return None
