"""Jain et al.'s greedy for deadline-sensitive jobs, the baseline A_maxweight is compared
with (spec 002 §5, Fig. 8): a batch-level function, not a registered policy.

The spec reads it as their value-density greedy GreedyRTL: jobs sorted by weight over
resource demand (the weight per normalised resource-slot of the job's smallest shape,
:func:`~.maxweight.order_jobs`'s ``density``), each allocated as late as possible before
the common deadline (the end of the window, tau - 1 slots); a job that does not fit is left
out. It has no prices: a job runs whenever it fits.

"As late as possible" runs on the window reversed in time. Capacity is the same in every
slot, so the earliest feasible schedule on the reversed window (what
:func:`~.mincost.mincost` picks at zero prices: earliest completion first) is the latest
one on the real window, with the same servers and shape. Same shapes, same feasibility
rules as A_maxweight, so the two differ only in order and admission.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mlsched.scheduler.hetero.grid import Grid
from mlsched.scheduler.hetero.maxweight import Scheduled, order_jobs
from mlsched.scheduler.hetero.mincost import mincost
from mlsched.scheduler.hetero.shapes import JobShapes

__all__ = ["greedy_rtl", "scheduled_weight"]


def greedy_rtl(batch: Sequence[JobShapes], make_grid: Callable[[], Grid]) -> list[Scheduled]:
    """GreedyRTL on one window; starts are relative to the window, as A_maxweight's."""
    template = make_grid()
    reversed_window = Grid(template.capacity, template.slots, 1.0)  # lambda 1: prices 0
    out: list[Scheduled] = []
    for js in order_jobs(batch, "density"):
        cand = mincost(reversed_window, js, "spec")
        if cand is None:
            continue
        length = cand.shape.length
        reversed_window.add(cand.start, length, cand.usage(js))
        start = reversed_window.slots - cand.start - length
        out.append(Scheduled(js.job.job_id, start, cand, 0.0))
    return out


def scheduled_weight(batch: Sequence[JobShapes], chosen: Sequence[Scheduled]) -> float:
    """Fig. 8's measure: the total weight of the jobs a batch algorithm scheduled."""
    weight = {js.job.job_id: js.job.weight for js in batch}
    return float(sum(weight[s.job_id] for s in chosen))
