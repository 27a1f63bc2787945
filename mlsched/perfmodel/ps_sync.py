"""Synchronous parameter-server model with locality (spec 000 §2.2, (E3)).

Per iteration: ``T = u * tau + 2 g / (n_s * b_min)``: each worker computes its local batch
(``u`` work units: ``global_batch / (batch_size * n_w)`` with a fixed global batch, else 1)
and then pushes g/n_s to and pulls g/n_s from each of the n_s PSs in parallel. By Fact 1,
``b_min`` is the internal rate only when every worker and PS sits on one server, else the
external rate (the worker's reservation, or the slowest worker-PS path). The internal rate
is the job's own ``internal_gbps`` (spec 000 draws b(i) = 10 b(e) per job), else the
topology's intra-server rate.

Parameters:
  compute_s        tau, seconds per work unit on one worker
  comm_scale_int   measured / nominal communication time when co-located
  comm_scale_ext   measured / nominal communication time across servers
"""

from __future__ import annotations

import numpy as np

from mlsched.core.allocation import Placement
from mlsched.core.cluster import Cluster
from mlsched.core.job import JobSpec
from mlsched.perfmodel.base import GBIT, PerfFamily
from mlsched.perfmodel.paths import nominal_worker_bw

__all__ = ["SyncPSModel"]


class SyncPSModel(PerfFamily):
    name = "ps_sync"
    param_names = ("compute_s", "comm_scale_int", "comm_scale_ext")

    def prior(self, job: JobSpec, worker_type: str | None, cluster: Cluster) -> np.ndarray:
        return np.array([job.compute_s_for(worker_type), 1.0, 1.0])

    def design(
        self, job: JobSpec, placement: Placement, cluster: Cluster
    ) -> tuple[np.ndarray, np.ndarray]:
        n_w = max(1, placement.n_workers)
        n_s = max(1, placement.n_ps)
        units = job.global_batch / (job.batch_size * n_w) if job.global_batch else 1.0
        push_pull_gbit = 2.0 * job.gradient_bytes * 8 / (n_s * GBIT)
        if placement.colocated:
            inside = job.internal_gbps or cluster.topology.intra_server_gbps
            comm = np.array([0.0, push_pull_gbit / inside, 0.0])
        else:
            comm = np.array([0.0, 0.0, push_pull_gbit / nominal_worker_bw(job, placement, cluster)])
        return np.array([units, 0.0, 0.0]), comm

    def wire_bytes(self, job: JobSpec, placement: Placement) -> float:
        return 2.0 * job.gradient_bytes  # push g and pull g, in n_s shards
