"""The ``bfp`` baseline (spec 004 §3.7, A21): one fixed unit price per worker and PS type.

The prices are an offline benchmark: the best on the whole trace, valuations included, found
by :func:`~mlsched.scheduler.offline.fixed_price.best_fixed_prices` (a replay of spec 004's
model, not simulations). The simulator's runner asks for them (:meth:`oracle_options`)
when ``prices`` is not given; elsewhere (the testbed, which has no trace in advance) give
``prices`` or every type is offered ``default_price``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from mlsched.core.job import JobSpec
from mlsched.scheduler.dps.options import check_count, check_number, check_prices
from mlsched.scheduler.dps.posted import PostedPricePolicy, Prices
from mlsched.scheduler.dps.types import Shape, TypeState
from mlsched.scheduler.view import ClusterView, RunContext

__all__ = ["FixedPricePolicy"]

log = logging.getLogger(__name__)


class FixedPricePolicy(PostedPricePolicy):
    """Best fixed price; options in ``docs/algorithms/dps.md``."""

    name = "bfp"
    description = (
        "best fixed price: one unit price per worker/PS type for every job, found offline "
        "on the whole trace by replaying spec 004's model; PA placement"
    )

    def __init__(
        self,
        *,
        prices: Mapping[str, float] | float | None = None,
        default_price: float = 0.5,
        step: float = 0.01,
        sweeps: int = 5,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self.default_price = check_number("default_price", default_price, low=0.0, high=1.0)
        self.step = check_number("step", step, low=1e-3, high=1.0)
        self.sweeps = check_count("sweeps", sweeps)
        if prices is None or isinstance(prices, Mapping):
            self.prices = (
                None if prices is None else check_prices("prices", prices, low=0.0, high=1.0)
            )
        else:
            self.default_price = check_number("prices", prices, low=0.0, high=1.0)
            self.prices = {}

    @classmethod
    def oracle_options(
        cls, jobs: Sequence[JobSpec], context: RunContext, options: Mapping[str, Any]
    ) -> dict[str, Any]:
        if options.get("prices") is not None:
            return {}
        from mlsched.scheduler.offline.fixed_price import best_fixed_prices, build_model

        probe = cls(**options)  # the options' errors, before any search
        model = build_model(jobs, context, price_scale=probe.price_scale)
        found = best_fixed_prices(
            model, step=probe.step, sweeps=probe.sweeps, best_fit=probe.placement == "pa-best-fit"
        )
        log.info("[bfp] best fixed prices %s: replay profit %.4g", found.prices, found.profit)
        return {"prices": found.prices}

    def setup(self, context: RunContext) -> None:
        super().setup(context)
        if self.prices is None:
            log.warning(
                "[bfp] no prices given: every type is offered %g (the simulator's runner finds "
                "the best fixed prices of the trace; elsewhere pass prices)",
                self.default_price,
            )

    def _lookup(self, role: str, name: str) -> float:
        return (self.prices or {}).get(f"{role}:{name}", self.default_price)

    def _price(
        self, shape: Shape, worker: TypeState, ps: TypeState | None, view: ClusterView
    ) -> Prices:
        return Prices(
            self._lookup("worker", worker.name),
            self._lookup("ps", ps.name) if ps is not None else 0.0,
        )
