"""Asynchronous parameter-server model (spec 001 §2.2).

Per worker and mini-batch: ``theta = tau + 2 e / b``: compute, then one push of the gradients
and one pull of the parameters over the worker's bandwidth ``b``. Workers run independently,
so Y workers complete Y mini-batches per ``theta``; the PS count does not matter as long as
the PSs are not the bandwidth bottleneck. Where they are (Z B < Y b) the effective bandwidth
is ``Z B / Y`` (the spec's optional extension), which the design row carries as a factor.

Parameters:
  compute_s   tau, seconds per mini-batch on one worker
  comm_scale  measured / nominal communication time (1.0 = the nominal 2e/b)
"""

from __future__ import annotations

import numpy as np

from mlsched.core.allocation import Placement
from mlsched.core.cluster import Cluster
from mlsched.core.job import JobSpec
from mlsched.perfmodel.base import GBIT, PerfFamily
from mlsched.perfmodel.paths import nominal_worker_bw

__all__ = ["AsyncPSModel"]


class AsyncPSModel(PerfFamily):
    name = "ps_async"
    param_names = ("compute_s", "comm_scale")

    def prior(self, job: JobSpec, worker_type: str | None, cluster: Cluster) -> np.ndarray:
        return np.array([job.compute_s_for(worker_type), 1.0])

    def design(
        self, job: JobSpec, placement: Placement, cluster: Cluster
    ) -> tuple[np.ndarray, np.ndarray]:
        b = nominal_worker_bw(job, placement, cluster)
        comm = 2.0 * job.gradient_bytes * 8 / (b * GBIT)
        y, z = placement.n_workers, placement.n_ps
        big_b = job.ps_demand(placement.ps_type)["bw_gbps"]
        if z > 0 and big_b > 0 and y > 0:
            # PS side limits each worker to Z*B/Y when that is below b.
            comm *= max(1.0, y * b / (z * big_b))
        return np.array([1.0, 0.0]), np.array([0.0, comm])

    def wire_bytes(self, job: JobSpec, placement: Placement) -> float:
        return 2.0 * job.gradient_bytes  # push e, pull e

    def units_per_iteration(self, job: JobSpec, placement: Placement) -> float:
        # Y independent workers: Y mini-batches per theta; a global batch means nothing here.
        return float(placement.n_workers)
