"""A_maxweight (spec 002 §3.4, Alg. 3) and A_dual (§3.3, Alg. 2).

A_maxweight takes the jobs of a batch one by one on an empty grid of ``tau - 1`` slots,
finds each one's cheapest schedule at the current prices (:func:`~.mincost.mincost`) and
admits it iff its weight exceeds that cost (strictly); an admitted job books its resources
and the prices of its slots rise. A_dual calls it up to ``alpha`` times on consecutive
windows of ``tau`` slots with the jobs not yet scheduled, stopping early when none is left
or a call schedules nothing (it is deterministic: the next call would do the same).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from mlsched.scheduler.hetero.grid import Grid
from mlsched.scheduler.hetero.mincost import Candidate, mincost
from mlsched.scheduler.hetero.shapes import JobShapes

__all__ = ["ORDERS", "Scheduled", "dual", "maxweight", "theory_alpha"]

#: Job orders inside A_maxweight ([AMB-8]): arrival (the default), weight, weight density.
ORDERS = ("arrival", "weight", "density")


@dataclass(frozen=True)
class Scheduled:
    """One job of a batch: its chosen schedule, starting ``start`` slots into the round."""

    job_id: str
    start: int
    candidate: Candidate
    cost: float


def order_jobs(batch: Sequence[JobShapes], how: str) -> list[JobShapes]:
    def arrival(js: JobShapes) -> tuple[float, str]:
        return (float(js.job.arrival_slot), js.job.job_id)

    if how == "weight":
        return sorted(batch, key=lambda js: (-js.job.weight, *arrival(js)))
    if how == "density":

        def density(js: JobShapes) -> float:
            ideal = [s.length * s.n * float(js.worker_demand[s.m].sum()) for s in js.shapes]
            return js.job.weight / min(ideal) if ideal and min(ideal) > 0 else 0.0

        return sorted(batch, key=lambda js: (-density(js), *arrival(js)))
    return sorted(batch, key=arrival)


def maxweight(
    batch: Sequence[JobShapes], make_grid: Callable[[], Grid], tie: str
) -> list[Scheduled]:
    """Alg. 3 on a fresh grid; ``batch`` in the order the jobs are to be tried."""
    grid = make_grid()
    out: list[Scheduled] = []
    for js in batch:
        cand = mincost(grid, js, tie)
        if cand is None or not js.job.weight - cand.cost > 0:
            continue
        usage = cand.usage(js)
        if not grid.fits(cand.start, cand.shape.length, usage):  # mincost checks it
            raise RuntimeError(f"job {js.job.job_id}: its cheapest schedule does not fit")
        grid.add(cand.start, cand.shape.length, usage)
        out.append(Scheduled(js.job.job_id, cand.start, cand, cand.cost))
    return out


def dual(
    batch: Sequence[JobShapes],
    make_grid: Callable[[], Grid],
    tau: int,
    alpha: int,
    tie: str,
    order: str = "arrival",
) -> list[Scheduled]:
    """Alg. 2: up to ``alpha`` A_maxweight calls on windows [(i - 1) tau, i tau)."""
    left = order_jobs(batch, order)
    out: list[Scheduled] = []
    for i in range(alpha):
        if not left:
            break
        got = maxweight(left, make_grid, tie)
        if not got:
            break
        for s in got:
            out.append(Scheduled(s.job_id, i * tau + s.start, s.candidate, s.cost))
        done = {s.job_id for s in got}
        left = [js for js in left if js.job.job_id not in done]
    return out


def theory_alpha(weights: Sequence[float], lam: float) -> int:
    """Lemma 2's alpha = floor(log(w(J)/w_min) / log(gamma/(gamma-1))) + 1, gamma = 2 ln
    lambda (a ratio of logs: the base does not matter, [AMB-3])."""
    w = np.asarray(weights, dtype=float)
    if not len(w) or not (w > 0).all():
        return 1
    gamma = 2.0 * float(np.log(lam))
    if gamma <= 1:
        return 1
    return int(np.floor(np.log(w.sum() / w.min()) / np.log(gamma / (gamma - 1.0)))) + 1
