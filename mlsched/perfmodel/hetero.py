"""Heterogeneous PS and ring-all-reduce model (spec 002 M1/M2; spec 004 (R1)-(R3)).

PS:  ``t = u v_m + U + (1 - q) 2 pi / b``
RA:  ``t = u v_m + U (P-1)/P + (1 - q) 2 pi (P-1) / (P b)``

``v_m`` is the compute time on the chosen worker type (the profile key carries the type),
``U`` the update/reduction time, ``q`` = 1 when every task is on one server (then the network
term vanishes), ``b`` the worker type's bandwidth. With ``bw_rule="dps"`` the PS bandwidth
follows spec 004 (R1): ``b = min(h_k, H_m / d_W)``, and the family registers as ``dps`` (its
profile keys differ from the plain ``hetero`` family's). ``u`` is 1 (one mini-batch per worker,
as in the specs) except with a fixed global batch, where it is
``global_batch / (batch_size * workers)`` as in the other synchronous models.

Parameters:
  compute_s   v_m, seconds per mini-batch on the worker type
  update_s    U, PS update (or full-gradient reduction) seconds per iteration
  comm_scale  measured / nominal communication time
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from mlsched.core.allocation import Placement
from mlsched.core.cluster import Cluster
from mlsched.core.job import JobSpec
from mlsched.perfmodel.base import GBIT, PerfFamily
from mlsched.perfmodel.paths import nominal_worker_bw

__all__ = ["HeteroModel"]


class HeteroModel(PerfFamily):
    name = "hetero"
    param_names = ("compute_s", "update_s", "comm_scale")

    def __init__(self, bw_rule: Literal["worker", "dps"] = "worker") -> None:
        self.bw_rule = bw_rule
        # The estimator keys profiles and looks families up by this name.
        self.name = "dps" if bw_rule == "dps" else "hetero"

    def prior(self, job: JobSpec, worker_type: str | None, cluster: Cluster) -> np.ndarray:
        return np.array([job.compute_s_for(worker_type), job.update_s, 1.0])

    def design(
        self, job: JobSpec, placement: Placement, cluster: Cluster
    ) -> tuple[np.ndarray, np.ndarray]:
        b = nominal_worker_bw(job, placement, cluster)
        if self.bw_rule == "dps" and job.uses_ps:
            big_h = job.ps_demand(placement.ps_type)["bw_gbps"]
            if big_h > 0:
                b = min(b, big_h / max(1, placement.n_workers))
        remote = 0.0 if placement.colocated else 1.0
        pi_gbit = job.gradient_bytes * 8 / GBIT
        phi = max(1, placement.n_workers)
        units = job.global_batch / (job.batch_size * phi) if job.global_batch else 1.0
        if job.uses_ps:
            return np.array([units, 1.0, 0.0]), np.array([0.0, 0.0, remote * 2 * pi_gbit / b])
        share = (phi - 1) / phi
        return (
            np.array([units, share, 0.0]),
            np.array([0.0, 0.0, remote * 2 * pi_gbit * share / b]),
        )

    def wire_bytes(self, job: JobSpec, placement: Placement) -> float:
        if job.uses_ps:
            return 2.0 * job.gradient_bytes
        phi = max(1, placement.n_workers)
        return 2 * (phi - 1) / phi * 2 * job.gradient_bytes
