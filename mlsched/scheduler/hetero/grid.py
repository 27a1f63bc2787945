"""The capacity and prices of one A_maxweight call: relative slots 0..tau-2 of an empty
cluster, in normalised units (spec 002 §3.1, §3.5, [AMB-4]).

Every resource is counted in units of the largest server's capacity of it, so a GPU, a
vCPU and a Gbit/s weigh alike in a cost. Prices follow (11): ``lambda**(beta/C) - 1`` per
(slot, server, resource), 0 where a server has none of the resource. Per window length
``L`` the grid gives, for every start slot at once, the summed prices of the window
(prefix sums) and the least residual capacity over it (a sparse table of minima), so a
candidate costs one dot product and one comparison (§3.5's implementation hint).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["EPS", "Grid", "fit_count", "price_base"]

EPS = 1e-9


def price_base(horizon: int, servers: int, resources: int, f: float) -> float:
    """lambda = 2 T H R F + 1 ((11), [AMB-3]: T is the system horizon)."""
    return 2.0 * horizon * servers * resources * f + 1.0


def fit_count(room: np.ndarray, demand: np.ndarray) -> np.ndarray:
    """How many tasks of ``demand`` fit ``room`` (..., resources); a huge count when the
    demand is empty."""
    need = np.flatnonzero(demand > EPS).tolist()
    if not need:
        return np.full(room.shape[:-1], 1 << 30, dtype=np.int64)
    # One resource at a time: a reduction over the short last axis is many times slower,
    # and a minimum is exact in any order.
    least = room[..., need[0]] / demand[need[0]]
    for r in need[1:]:
        np.minimum(least, room[..., r] / demand[r], out=least)
    return np.floor(np.clip(least, 0.0, None) + EPS).astype(np.int64)


class Grid:
    """Usage and prices over ``slots`` relative slots (``tau - 1``; the last slot of a
    window of length tau cannot hold work that completes by tau)."""

    def __init__(self, capacity: np.ndarray, slots: int, lam: float) -> None:
        self.capacity = capacity  # normalised (servers x resources)
        self.slots = slots
        self.log_lam = math.log(lam)
        self.used = np.zeros((slots, *capacity.shape))
        self._inv = np.where(capacity > 0, 1.0 / np.where(capacity > 0, capacity, 1.0), 0.0)
        self._cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._prefix: np.ndarray | None = None
        self._table: list[np.ndarray] = []

    def prices(self) -> np.ndarray:
        """delta per (slot, server, resource)."""
        return np.expm1(self.log_lam * self.used * self._inv)

    def _prepare(self) -> None:
        delta = self.prices()
        prefix = np.zeros((self.slots + 1, *self.capacity.shape))
        np.cumsum(delta, axis=0, out=prefix[1:])
        self._prefix = prefix
        table = [self.capacity[None, :, :] - self.used]
        span = 1
        while 2 * span <= self.slots:
            prev = table[-1]
            table.append(np.minimum(prev[:-span], prev[span:]))
            span *= 2
        self._table = table

    def window(self, length: int) -> tuple[np.ndarray, np.ndarray]:
        """(price sums, least residual) per (start, server, resource) of the windows of
        ``length`` slots, starts 0..slots-length."""
        hit = self._cache.get(length)
        if hit is not None:
            return hit
        if self._prefix is None:
            self._prepare()
        assert self._prefix is not None
        n = self.slots - length + 1
        sums = self._prefix[length : length + n] - self._prefix[:n]
        k = length.bit_length() - 1
        level = self._table[k]
        least = np.minimum(level[:n], level[length - (1 << k) : length - (1 << k) + n])
        self._cache[length] = (sums, least)
        return sums, least

    def add(self, start: int, length: int, usage: dict[int, np.ndarray]) -> None:
        """Book normalised ``usage`` per server over slots [start, start + length)."""
        for server, amount in usage.items():
            self.used[start : start + length, server] += amount
        self._cache.clear()
        self._prefix = None

    def fits(self, start: int, length: int, usage: dict[int, np.ndarray]) -> bool:
        return all(
            bool(np.all(self.used[start : start + length, s] + a <= self.capacity[s] + EPS))
            for s, a in usage.items()
        )
