"""Fig. 8: A_maxweight against Jain et al.'s greedy on one batch.

Both take the same batch (a seed's jobs, all waiting, none started) as a round of A_online
would see it: the same shapes, normalised units and window of ``batch_tau - 1`` slots on
an empty cluster, the same for every batch size (the experiment's own cluster at its
default capacity) (:func:`~mlsched.scheduler.hetero.batch.round_inputs`), lambda's T the
paper's horizon. A_maxweight is one call (Alg. 3, the policy's default F); the greedy is
GreedyRTL. Both take the jobs in the same order (the greedy's value density), so that they
differ in their rule, not their order; A_maxweight in arrival order (the policy's own) is
recorded beside. The measure is the total weight each schedules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mlsched.experiments.hetero.common import HeteroScale, on_servers, workload
from mlsched.perfmodel.estimator import RuntimeEstimator
from mlsched.scheduler.hetero.batch import round_inputs
from mlsched.scheduler.hetero.greedy_rtl import greedy_rtl, scheduled_weight
from mlsched.scheduler.hetero.maxweight import maxweight, order_jobs
from mlsched.scheduler.view import ClusterView

__all__ = ["BatchItem", "run_batch"]

#: F of the policy's default (lambda = 2 T H R F + 1).
F = 10.0


@dataclass(frozen=True)
class BatchItem:
    seed: int
    jobs: int
    scale: HeteroScale


def run_batch(item: BatchItem) -> dict[str, Any]:
    s = item.scale
    # One cluster for every batch size (the experiment's own at its default capacity), as
    # the paper's Fig. 8 varies the jobs on fixed servers.
    servers = len(
        workload(
            item.seed, s.jobs, s.horizon, "ps", s.default_capacity, s.run_factor
        ).cluster.servers
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
        ((j, 0.0) for j in w.jobs), view, w.cluster.types, s.batch_tau, s.horizon, F
    )
    batch = inputs.batch
    by_maxweight = maxweight(order_jobs(batch, "density"), inputs.grid, "spec")
    by_arrival = maxweight(order_jobs(batch, "arrival"), inputs.grid, "spec")
    by_greedy = greedy_rtl(batch, inputs.grid)
    return {
        "seed": item.seed,
        "jobs": item.jobs,
        "window_slots": inputs.usable,
        "offered_weight": float(sum(js.job.weight for js in batch)),
        "fits_window": len(batch),
        "maxweight": scheduled_weight(batch, by_maxweight),
        "maxweight_jobs": len(by_maxweight),
        "maxweight_arrival": scheduled_weight(batch, by_arrival),
        "servers": len(w.cluster.servers),
        "greedy": scheduled_weight(batch, by_greedy),
        "greedy_jobs": len(by_greedy),
    }
