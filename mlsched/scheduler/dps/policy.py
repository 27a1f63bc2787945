"""The ``dps`` policy: spec 004's Alg. 1 (dynamic pricing by a bandit per type) with PA.

Per worker type k and PS type m, a bandit (:mod:`~mlsched.scheduler.dps.bandit`) over the
price grid ``{δ(1+δ)^z} ∩ [δ, 1]`` (:mod:`~mlsched.scheduler.dps.grid`), δ by Theorem 2 from
the type's capacity C, the horizon T and the jobs n it expects (times ``delta_scale``).

On an arrival (§3.3) the job's types count it. While either type has seen at most
``explore_fraction`` x n arrivals, the job is offered both prices at 0 (exploration, A5 and
A32: zero prices teach the runtimes, never the arms). After that each type offers the
price of its arm with the largest index. A job that does not fit now gets no offer (A8).
An answer counts on the offered arms: N(p) += 1 always, S(p) += d on a sale (A7). A
completion adds its free time T - τ to its types (A18). Placement is PA (``placement``;
``random`` is DPS-RS). ``explore_fraction=0`` is DPS-simple.
"""

from __future__ import annotations

import math
from typing import Any

from mlsched.scheduler.dps.bandit import CAPACITY_TERMS, RADIUS_SCALES, Arms
from mlsched.scheduler.dps.grid import (
    DELTA_RANGE,
    price_grid,
    radius_constant,
    theorem_delta,
    theorem_theta,
)
from mlsched.scheduler.dps.options import check_choice, check_flag, check_number
from mlsched.scheduler.dps.posted import Held, PostedPricePolicy, Prices
from mlsched.scheduler.dps.types import Shape, TypeState
from mlsched.scheduler.view import ClusterView, RunContext

__all__ = ["DEFAULT_EXPLORE_FRACTION", "DpsPolicy"]

#: θ, the share of each type's expected jobs offered price 0 first: Fig. 2's exploration
#: ends at t = 1,120 of 10,000 (A5; the paper's formula exceeds 1 at its own scale).
DEFAULT_EXPLORE_FRACTION = 0.11


class DpsPolicy(PostedPricePolicy):
    """DPS (Zhang, Zhou, Lui, Li); options in ``docs/algorithms/dps.md``."""

    name = "dps"
    description = (
        "DPS: posted prices per worker/PS type learnt by a UCB bandit over geometric price "
        "levels, zero-price exploration, runtime-minimising placement PA (spec 004)"
    )

    def __init__(
        self,
        *,
        explore_fraction: float = DEFAULT_EXPLORE_FRACTION,
        delta_scale: float = 1.0,
        eta_scale: float = 1.0,
        radius_scale: str = "normalized",
        capacity_term: str = "paper",
        grid_top: bool = False,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self.explore_fraction = check_number(
            "explore_fraction", explore_fraction, low=0.0, high=1.0
        )
        self.delta_scale = check_number(
            "delta_scale", delta_scale, low=0.0, high=1e3, low_open=True
        )
        self.eta_scale = check_number("eta_scale", eta_scale, low=0.0, high=1e3, low_open=True)
        self.radius_scale = check_choice("radius_scale", radius_scale, RADIUS_SCALES)
        self.capacity_term = check_choice("capacity_term", capacity_term, CAPACITY_TERMS)
        self.grid_top = check_flag("grid_top", grid_top)
        self._arms: dict[tuple[str, str], Arms] = {}

    def setup(self, context: RunContext) -> None:
        super().setup(context)
        self._arms.clear()

    def arms(self, state: TypeState) -> Arms:
        """The bandit of a type (made on its first offer)."""
        key = (state.role, state.name)
        arms = self._arms.get(key)
        if arms is None:
            t = self.horizon
            delta = theorem_delta(t, state.capacity, state.expected) * self.delta_scale
            delta = min(max(delta, DELTA_RANGE[0]), DELTA_RANGE[1])
            arms = Arms(
                price_grid(delta, with_one=self.grid_top),
                expected=state.expected,
                capacity=state.capacity,
                max_demand=state.max_demand,
                horizon=t,
                eta=radius_constant(state.expected, self.eta_scale),
                radius_scale=self.radius_scale,
                capacity_term=self.capacity_term,
            )
            self._arms[key] = arms
        arms.max_demand = state.max_demand
        return arms

    def _exploring(self, state: TypeState | None) -> bool:
        return state is not None and state.arrivals <= self.explore_fraction * state.expected

    def _price(
        self, shape: Shape, worker: TypeState, ps: TypeState | None, view: ClusterView
    ) -> Prices:
        if self._exploring(worker) or self._exploring(ps):
            for state in (worker, ps):
                if state is not None:
                    state.explored += 1
            return Prices(0.0, 0.0, "explore")
        w = self.arms(worker).choose()
        worker.priced += 1
        if ps is None:
            return Prices(w.price, 0.0, "exploit", w)
        p = self.arms(ps).choose()
        ps.priced += 1
        return Prices(w.price, p.price, "exploit", w, p)

    def _heard(self, held: Held, accepted: bool) -> None:
        prices = held.prices
        if prices is None or prices.phase != "exploit":
            return  # zero prices are not arms (A32)
        for state, choice in ((held.worker, prices.worker_choice), (held.ps, prices.ps_choice)):
            if state is not None and choice is not None:
                sold = held.shape.count(state.role) if accepted else 0
                self.arms(state).offered(choice.arm, sold)

    def _finished(self, held: Held, runtime_slots: int) -> None:
        for state in (held.worker, held.ps):
            if state is not None:
                self.arms(state).finished(runtime_slots)

    def stats(self) -> dict[str, dict[str, Any]]:
        """Per type ("worker:w3"): capacity C, expected jobs n, arrivals, offers at a price
        and at zero, grid step and size, θ of Alg. 1 (reported, not used), the price
        offered most and the mean free time learnt."""
        out: dict[str, dict[str, Any]] = {}
        for (role, name), state in sorted(self.types.items()):
            arms = self._arms.get((role, name))
            out[f"{role}:{name}"] = {
                "capacity": state.capacity,
                "expected_jobs": state.expected,
                "arrivals": state.arrivals,
                "priced_offers": state.priced,
                "zero_price_offers": state.explored,
                "theorem_theta": theorem_theta(self.horizon, state.capacity, state.expected),
                "delta": float(arms.grid[0]) if arms is not None else None,
                "arms": len(arms.grid) if arms is not None else None,
                "most_offered_price": arms.most_offered() if arms is not None else None,
                "completed": arms.completed if arms is not None else 0,
                "mean_free_slots": (
                    arms.free_time / arms.completed
                    if arms is not None and arms.completed
                    else math.nan
                ),
            }
        return out
