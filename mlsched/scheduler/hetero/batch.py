"""One round's inputs: the batch as candidate shapes in normalised units, and the empty grid
it is scheduled on. Shared by A_online and by the experiment's batch-level comparison of
A_maxweight with Jain et al.'s greedy, so both see exactly what a round sees."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from mlsched.core.job import JobSpec
from mlsched.scheduler.hetero.catalogue import TypeCatalogue
from mlsched.scheduler.hetero.grid import Grid, price_base
from mlsched.scheduler.hetero.shapes import JobShapes
from mlsched.scheduler.view import ClusterView

__all__ = ["RoundInputs", "round_inputs"]


@dataclass(frozen=True)
class RoundInputs:
    """The jobs that have a shape in a window of ``usable`` slots, and the grid's units."""

    batch: list[JobShapes]
    capacity: np.ndarray  # (servers, resources), normalised
    usable: int
    lam: float

    def grid(self) -> Grid:
        """A fresh, empty grid (each A_maxweight call starts from one)."""
        return Grid(self.capacity, self.usable, self.lam)


def round_inputs(
    jobs: Iterable[tuple[JobSpec, float]],
    view: ClusterView,
    catalogue: TypeCatalogue,
    tau: int,
    horizon: int,
    f: float,
    rates: dict[str, dict[tuple[str, int, int, int], float]] | None = None,
) -> RoundInputs:
    """Round ``tau``'s inputs for ``(job, work done)`` pairs: windows of ``tau - 1`` slots,
    every resource in units of the largest server's capacity of it ([AMB-4]), prices with
    lambda = 2 T H R F + 1 for T = ``horizon``."""
    cluster = view.cluster
    capacity = np.asarray(cluster.capacity, dtype=float)
    top = capacity.max(axis=0)
    scale = np.where(top > 0, top, 1.0)
    usable = tau - 1
    batch = [
        JobShapes.of(
            job,
            view,
            catalogue,
            scale,
            job.total_work - done,
            usable,
            None if rates is None else rates.setdefault(job.job_id, {}),
        )
        for job, done in jobs
    ]
    lam = price_base(horizon, len(cluster), capacity.shape[1], f)
    return RoundInputs([js for js in batch if js.shapes], capacity / scale, usable, lam)
