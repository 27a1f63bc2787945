"""The ``random-price`` baseline (spec 004 §3.7): each job is offered unit prices drawn
uniformly from [0, 1], worker and PS independently (from a generator keyed by the run's
seed and the job id, so a run is reproducible); PA places the jobs that accept."""

from __future__ import annotations

from mlsched.scheduler.baselines.common import job_rng
from mlsched.scheduler.dps.posted import PostedPricePolicy, Prices
from mlsched.scheduler.dps.types import Shape, TypeState
from mlsched.scheduler.view import ClusterView

__all__ = ["RandomPricePolicy"]


class RandomPricePolicy(PostedPricePolicy):
    """Random posted prices; options in ``docs/algorithms/dps.md``."""

    name = "random-price"
    description = "random posted prices: unit prices drawn from U[0, 1] per job; PA placement"

    def _price(
        self, shape: Shape, worker: TypeState, ps: TypeState | None, view: ClusterView
    ) -> Prices:
        assert self.context is not None
        w, p = job_rng(self.context.seed, shape.job_id, "random-price").uniform(0.0, 1.0, 2)
        return Prices(float(w), float(p) if ps is not None else 0.0)
