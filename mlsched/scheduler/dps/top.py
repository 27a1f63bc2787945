"""The ``top`` baseline: spec 004 §3.7's stand-in for TOP (A22; the paper's TOP is not given).

A posted price that rises with how full the type is: ``p = L (U / L)^(y / C)``, clamped to
[0, 1], y the type's occupancy before the job and C its capacity. L and U bound a unit's
budget: the 5th and 95th percentiles of ``v / (d^W + d^P)`` over the jobs of the type in the
trace (the simulator's runner supplies them, :meth:`oracle_options`), else ``lower`` and
``upper``. It is reported as the TOP stand-in, not as the paper's TOP.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mlsched.core.job import JobSpec
from mlsched.scheduler.dps.options import check_number, check_prices
from mlsched.scheduler.dps.posted import PostedPricePolicy, Prices
from mlsched.scheduler.dps.types import ROLES, Shape, TypeState, shape_of
from mlsched.scheduler.view import ClusterView, RunContext

__all__ = ["TopPolicy"]

#: Percentiles of the per-unit budget taken as L and U.
BUDGET_PERCENTILES = (5.0, 95.0)


class TopPolicy(PostedPricePolicy):
    """TOP stand-in; options in ``docs/algorithms/dps.md``."""

    name = "top"
    description = (
        "TOP stand-in (spec 004): per-type posted price L (U/L)^(occupancy/capacity) "
        "between budget percentiles; PA placement"
    )

    def __init__(
        self,
        *,
        lower: float = 0.1,
        upper: float = 1.0,
        bounds: Mapping[str, Sequence[float]] | None = None,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self.lower = check_number("lower", lower, low=0.0, high=1.0, low_open=True)
        self.upper = check_number("upper", upper, low=self.lower, high=1.0)
        self.bounds = (
            {} if bounds is None else check_prices("bounds", bounds, low=0.0, high=1.0, pairs=True)
        )

    @classmethod
    def oracle_options(
        cls, jobs: Sequence[JobSpec], context: RunContext, options: Mapping[str, Any]
    ) -> dict[str, Any]:
        if options.get("bounds") is not None:
            return {}
        probe = cls(**options)
        per_unit: dict[str, list[float]] = {}
        for job in jobs:
            shape = shape_of(job, context.cluster, context.seed)
            if isinstance(shape, str) or job.valuation is None:
                continue
            unit = job.valuation / probe.price_scale / (shape.n_workers + shape.n_ps)
            for role in ROLES:
                name = shape.type_of(role)
                if name is not None:
                    per_unit.setdefault(f"{role}:{name}", []).append(unit)
        bounds = {}
        for key, values in per_unit.items():
            low, high = np.percentile(values, BUDGET_PERCENTILES)
            low = float(min(max(low, 1e-3), 1.0))
            bounds[key] = [low, float(min(max(high, low), 1.0))]
        return {"bounds": bounds}

    def _unit(self, state: TypeState) -> float:
        low, high = self.bounds.get(f"{state.role}:{state.name}", (self.lower, self.upper))
        load = state.occupied / state.capacity if state.capacity > 0 else 1.0
        return float(min(1.0, max(0.0, low * (high / low) ** load)))

    def _price(
        self, shape: Shape, worker: TypeState, ps: TypeState | None, view: ClusterView
    ) -> Prices:
        return Prices(self._unit(worker), self._unit(ps) if ps is not None else 0.0)
