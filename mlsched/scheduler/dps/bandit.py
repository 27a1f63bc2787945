"""One type's bandit over price levels (spec 004 §3.2, eqs. 4-14).

Per arm p: N(p), the offers made at p (every offer, declined ones included, A7) and S(p),
the units sold at p. Per type: the completed jobs and the sum of their free times
μ_j = T - τ_j (actual runtimes, A18). The index of arm p is

    R(p) = min( n p Q^U(p) ,  capacity term )

with ``n p Q^U(p)`` the demand bound (n jobs expected, Q^U the optimistic units sold per
offer) and the capacity term ``p C μ^U`` (``capacity_term="paper"``, A4) or
``p C T / τ^L`` (``"renewal"``: the units resellable over T, τ^L a lower confidence bound
of the type's runtime in slots, its radius on the runtime itself: put on μ/T, the radius of
μ^U, about 0.3 with ~100 completions against runtimes of 0.02 T, left τ^L at 1 slot and the
bound never bound). The radii
``r(x) = η/(1+N) + sqrt(η x/(1+N))`` apply to Q/D and μ/T (``radius_scale="normalized"``,
A10's default) or to Q and μ as they are (``"literal"``). An arm never offered has Q^U = D
(normalised) and, before any job of the type completed, μ^U = T (A9): untried high prices
come first, as in UCB pricing. Ties go to the larger price.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["CAPACITY_TERMS", "RADIUS_SCALES", "Arms", "Choice"]

RADIUS_SCALES = ("normalized", "literal")
CAPACITY_TERMS = ("paper", "renewal")


@dataclass(frozen=True)
class Choice:
    """The arm chosen for one offer: its index, price, index value and the bound that
    was the smaller (``demand`` or ``capacity``)."""

    arm: int
    price: float
    index: float
    term: str
    #: The expected jobs of the type from which the capacity bound is the smaller at this
    #: arm (n C μ^U / (n Q^U) for the paper's term): above it learnt runtimes set the price.
    threshold: float = float("inf")


class Arms:
    """The arms of one worker or PS type."""

    def __init__(
        self,
        grid: np.ndarray,
        *,
        expected: int,
        capacity: int,
        max_demand: int,
        horizon: int,
        eta: float,
        radius_scale: str = "normalized",
        capacity_term: str = "paper",
    ) -> None:
        self.grid = np.asarray(grid, dtype=float)
        self.expected = expected
        self.capacity = capacity
        self.max_demand = max_demand
        self.horizon = horizon
        self.eta = eta
        self.radius_scale = radius_scale
        self.capacity_term = capacity_term
        self.offers = np.zeros(len(self.grid), dtype=np.int64)  # N(p)
        self.sold = np.zeros(len(self.grid))  # S(p), units
        self.completed = 0  # |J|
        self.free_time = 0.0  # sum of mu_j over J

    def _radius(self, x: np.ndarray | float, n: np.ndarray | float) -> np.ndarray:
        return self.eta / (1.0 + n) + np.sqrt(self.eta * np.asarray(x) / (1.0 + n))

    def sale_rate_ucb(self) -> np.ndarray:
        """Q^U(p) per arm, in units per offer."""
        n = self.offers
        rate = np.divide(self.sold, n, out=np.zeros(len(n)), where=n > 0)  # Q-hat, 0 if N=0
        if self.radius_scale == "literal":
            return rate + self._radius(rate, n)
        d = float(self.max_demand)
        q = rate / d
        return d * np.minimum(1.0, q + self._radius(q, n))

    def free_time_ucb(self) -> float:
        """μ^U, in slots: T until a job of the type completed (A9)."""
        t = float(self.horizon)
        if self.completed == 0:
            return t
        mean = self.free_time / self.completed
        if self.radius_scale == "literal":
            return float(mean + self._radius(mean, self.completed))
        m = mean / t
        return float(t * min(1.0, m + float(self._radius(m, self.completed))))

    def runtime_lcb(self) -> float:
        """τ^L, in slots: the type's mean runtime less its radius (literal, in slots: the
        runtime is a small share of T, which a radius on μ/T swamps); 1 before any job of
        the type completed (optimistic, as μ^U = T, A9)."""
        if self.completed == 0:
            return 1.0
        tau = self.horizon - self.free_time / self.completed
        return max(1.0, float(tau - self._radius(max(tau, 0.0), self.completed)))

    def terms(self) -> tuple[np.ndarray, np.ndarray]:
        """(demand bound, capacity bound) per arm."""
        p = self.grid
        demand = self.expected * p * self.sale_rate_ucb()
        mu = self.free_time_ucb()
        if self.capacity_term == "renewal":
            capacity = p * self.capacity * self.horizon / self.runtime_lcb()
        else:
            capacity = p * self.capacity * mu
        return demand, capacity

    def index(self) -> np.ndarray:
        return _index(*self.terms())

    def choose(self) -> Choice:
        demand, capacity = self.terms()
        index = _index(demand, capacity)
        best = float(index.max())
        k = int(np.flatnonzero(index >= best - 1e-12 * max(1.0, abs(best)))[-1])
        term = "demand" if demand[k] <= capacity[k] else "capacity"
        # Demand is n p Q^U: the bounds cross at n* = n capacity / demand.
        threshold = (
            float(self.expected * capacity[k] / demand[k]) if demand[k] > 0 else float("inf")
        )
        return Choice(k, float(self.grid[k]), float(index[k]), term, threshold)

    def offered(self, arm: int, units_sold: int) -> None:
        """One offer at ``arm``; ``units_sold`` is d if the user accepted, else 0."""
        self.offers[arm] += 1
        self.sold[arm] += units_sold

    def finished(self, runtime_slots: int) -> None:
        """A job of the type completed after ``runtime_slots`` slots: μ_j = T - τ_j."""
        self.completed += 1
        self.free_time += max(0.0, float(self.horizon - runtime_slots))

    def most_offered(self) -> float:
        """The price offered most often (the learnt price), or nan before any offer."""
        return float(self.grid[int(np.argmax(self.offers))]) if self.offers.any() else float("nan")


def _index(demand: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """R(p): the smaller of the two optimistic bounds (eqs. 4-5)."""
    return np.minimum(demand, capacity)
