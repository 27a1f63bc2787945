"""Fig. 8: A_maxweight against Jain et al.'s greedy on one batch.

Both take the same batch (a seed's jobs, all waiting, none started) as a round of A_online
would see it: the same shapes, normalised units and window of ``batch_tau - 1`` slots on
an empty cluster, the same for every batch size (the experiment's own cluster at its
default capacity) (:func:`~mlsched.scheduler.hetero.batch.round_inputs`), lambda's T the
paper's horizon. A_maxweight is one call (Alg. 3, the policy's default F); the greedy is
GreedyRTL on each job's fixed configuration, as Jain et al.'s model has it (the ideal one
the baselines run); the greedy given A_maxweight's free choice of types and counts is
recorded beside. Both take the jobs in the same order (the greedy's value density), so that
they differ in their rule, not their order; A_maxweight in arrival order (the policy's
own) is recorded beside. The measure is the total weight each schedules.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mlsched.experiments.hetero.common import MAX_WORKERS, HeteroScale, on_servers, workload
from mlsched.perfmodel.estimator import RuntimeEstimator
from mlsched.scheduler.hetero.batch import round_inputs
from mlsched.scheduler.hetero.greedy_rtl import greedy_rtl, scheduled_weight
from mlsched.scheduler.hetero.grid import Grid
from mlsched.scheduler.hetero.maxweight import maxweight, order_jobs
from mlsched.scheduler.hetero.mincost import mincost
from mlsched.scheduler.hetero.policy import DEFAULT_F
from mlsched.scheduler.hetero.shapes import JobShapes
from mlsched.scheduler.view import ClusterView
from mlsched.workloads.hetero import IDEAL_PS, IDEAL_WORKER

__all__ = ["BatchItem", "run_batch"]

#: F of the policy's default (lambda = 2 T H R F + 1).
F = DEFAULT_F


@dataclass(frozen=True)
class BatchItem:
    """One batch: ``part`` ``fig8`` (A_maxweight against the greedy) or ``sweep`` (Figs.
    11-12: A_maxweight alone at another F, or on the cluster of another capacity)."""

    seed: int
    jobs: int
    scale: HeteroScale
    part: str = "fig8"
    f: float = F
    capacity: float | None = None  # None: the scale's default capacity


def run_batch(item: BatchItem) -> dict[str, Any]:
    s = item.scale
    capacity = s.default_capacity if item.capacity is None else item.capacity
    # One cluster for every batch size (the experiment's own at that capacity), as the
    # paper's Fig. 8 varies the jobs on fixed servers.
    servers = len(
        workload(item.seed, s.jobs, s.horizon, "ps", capacity, s.run_factor).cluster.servers
    )
    w = on_servers(item.seed, item.jobs, s.horizon, "ps", servers, s.run_factor)
    view = ClusterView(
        slot=0,
        slot_seconds=w.slot_seconds,
        horizon=w.horizon_slots,
        cluster=w.cluster,
        runtime=RuntimeEstimator(w.cluster, w.runtime),
        jobs={},
    )
    inputs = round_inputs(
        ((j, 0.0) for j in w.jobs), view, w.cluster.types, s.batch_tau, s.horizon, item.f
    )
    batch = inputs.batch
    by_maxweight = maxweight(order_jobs(batch, "density"), inputs.grid, "spec")
    record: dict[str, Any] = {
        "part": item.part,
        "seed": item.seed,
        "jobs": item.jobs,
        "f": item.f,
        "capacity": capacity,
        "servers": len(w.cluster.servers),
        "offered_weight": float(sum(js.job.weight for js in batch)),
        "maxweight": scheduled_weight(batch, by_maxweight),
    }
    if item.part == "sweep":
        return record
    by_arrival = maxweight(order_jobs(batch, "arrival"), inputs.grid, "spec")
    # Jain et al.'s jobs come with a fixed configuration: each job's ideal (AMB-13), not
    # A_maxweight's free choice of types and counts.
    fixed = [_ideal(js, view, inputs.usable, inputs.grid) for js in batch]
    by_greedy = greedy_rtl([js for js in fixed if js.shapes], inputs.grid)
    by_greedy_free = greedy_rtl(batch, inputs.grid)
    return {
        **record,
        "window_slots": inputs.usable,
        "fits_window": len(batch),
        "maxweight_jobs": len(by_maxweight),
        "maxweight_arrival": scheduled_weight(batch, by_arrival),
        "greedy": scheduled_weight(batch, by_greedy),
        "greedy_jobs": len(by_greedy),
        # The greedy given A_maxweight's choice of types and counts (an easier baseline).
        "greedy_free": scheduled_weight(batch, by_greedy_free),
        "fixed_fits_window": sum(bool(js.shapes) for js in fixed),
    }


def _ideal(
    js: JobShapes, view: ClusterView, usable: int, make_grid: Callable[[], Grid]
) -> JobShapes:
    """The job on its ideal configuration (AMB-13): the fastest worker type, the workload's
    PS type and min(D_j, 30) workers; where the empty cluster cannot run that many under
    A_maxweight's rules (every PS on one host within its bandwidth, (2i)), the largest
    count it can. No shape: the ideal types cannot run within the window at any count."""
    empty = make_grid()
    for n in range(min(js.job.worker_cap, MAX_WORKERS), 0, -1):
        fixed = js.fixed(view, js.job.total_work, usable, IDEAL_WORKER, IDEAL_PS, n)
        if fixed.shapes and mincost(empty, fixed, "spec") is not None:
            return fixed
    return js.fixed(view, js.job.total_work, 0, IDEAL_WORKER, IDEAL_PS, 1)
