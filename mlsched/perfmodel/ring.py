"""Ring-all-reduce model with placement (spec 003 (1), (E1), (E2)).

``tau(w) = (w-1)/w * (2 D / b_eff + E / G) + T_cmp + gamma_oh``

Each of the w workers sends 2D(w-1)/w bytes per iteration, in synchronous steps paced by the
slowest hop, so ``b_eff`` is the bottleneck of the ring's hops (intra-server hops at the
intra-server rate). ``E/G`` (reduction) is fitted as one time; the intercept folds compute
and fixed overhead.

Parameters (in this order: with a single bandwidth in the data, the reduction and the
transfer columns are proportional, and the fit keeps the earlier one, so ``comm_scale``
absorbs the difference and scales with ``1/b_eff`` elsewhere, while ``reduce_s`` stays at
its prior):
  compute_s   T_cmp + gamma_oh, seconds per iteration on one worker
  comm_scale  measured / nominal communication time
  reduce_s    E / G, seconds to reduce a full gradient
"""

from __future__ import annotations

import numpy as np

from mlsched.core.allocation import Placement
from mlsched.core.cluster import Cluster
from mlsched.core.job import JobSpec
from mlsched.perfmodel.base import GBIT, PerfFamily
from mlsched.perfmodel.paths import ring_bottleneck_gbps

__all__ = ["RingAllReduceModel"]


class RingAllReduceModel(PerfFamily):
    name = "ring"
    param_names = ("compute_s", "comm_scale", "reduce_s")

    def prior(self, job: JobSpec, worker_type: str | None, cluster: Cluster) -> np.ndarray:
        return np.array([job.compute_s_for(worker_type), 1.0, job.update_s])

    def design(
        self, job: JobSpec, placement: Placement, cluster: Cluster
    ) -> tuple[np.ndarray, np.ndarray]:
        w = max(1, placement.n_workers)
        share = (w - 1) / w
        b_eff = ring_bottleneck_gbps(job, placement, cluster)
        comm = share * 2 * job.gradient_bytes * 8 / (b_eff * GBIT)
        units = job.global_batch / (job.batch_size * w) if job.global_batch else 1.0
        return np.array([units, 0.0, 0.0]), np.array([0.0, comm, share])

    def wire_bytes(self, job: JobSpec, placement: Placement) -> float:
        w = max(1, placement.n_workers)
        return 2 * (w - 1) / w * 2 * job.gradient_bytes  # 2D(w-1)/w sent and as much received
