"""What one job needs in PD-ORS's terms (spec 000 §2.2): work, two per-worker rates, demands.

Throughput is linear in the worker count for a fixed worker:PS ratio (E5) and depends on the
placement only through Fact 1: everything on one server (the internal rate) or not (the
external rate). Both per-worker rates, in work units per worker per slot, are read from the
engine's runtime model at a reference placement of each kind, so a model refined from
measurements changes the plans of later arrivals:

    rate_mode = slot_seconds * throughput(reference_mode) / n

with ``n`` workers at the job's own ratio (``ps_ratio`` workers per PS, so the reference is
(E5)'s gamma form) and their PSs, all on one server (internal) or the PSs on other servers
(external). Extra PSs from integer rounding only shorten communication (A7), so planning at
the ratio is conservative.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mlsched.core.allocation import Placement
from mlsched.core.cluster import Cluster
from mlsched.core.job import JobSpec
from mlsched.perfmodel.base import RuntimeModel

__all__ = ["PdorsNeeds", "per_worker_rates"]


def _reference_workers(job: JobSpec) -> int:
    ratio = job.ps_ratio if job.ps_ratio is not None else 1.0
    return max(1, min(job.worker_cap, math.floor(ratio + 1e-9)))


def per_worker_rates(
    job: JobSpec, runtime: RuntimeModel, slot_seconds: float, servers: int
) -> tuple[float, float]:
    """(internal, external) work units per worker per slot of a PS job (see the module
    docstring). ``servers`` is the cluster's size: on one server only the internal mode
    exists, and the external rate is the internal one."""
    if not job.uses_ps:
        raise ValueError(f"job {job.job_id}: PD-ORS models parameter-server jobs (spec A29)")
    n = _reference_workers(job)
    n_ps = job.ps_needed(n)
    inside = Placement.of({0: n}, {0: n_ps})
    rate_int = runtime.throughput(job, inside) * slot_seconds / n
    if servers < 2:
        return max(0.0, rate_int), max(0.0, rate_int)
    outside = Placement.of({0: n}, {1: n_ps})
    rate_ext = runtime.throughput(job, outside) * slot_seconds / n
    return max(0.0, rate_int), max(0.0, rate_ext)


@dataclass(frozen=True)
class PdorsNeeds:
    """One job's demand: ``work`` units left, per-worker rates, batch cap F, demands."""

    job_id: str
    work: float
    rate_int: float
    rate_ext: float
    cap: int
    min_workers: int
    alpha: np.ndarray  # per-worker demand over the cluster's resources
    beta: np.ndarray  # per-PS demand
    ps_ratio: float | None

    @classmethod
    def of(
        cls,
        job: JobSpec,
        cluster: Cluster,
        rates: tuple[float, float],
        done: float = 0.0,
    ) -> PdorsNeeds:
        rate_int, rate_ext = rates
        if not (rate_int > 0 and math.isfinite(rate_int)):
            raise ValueError(f"job {job.job_id}: internal rate must be > 0, got {rate_int!r}")
        if not (rate_ext > 0 and math.isfinite(rate_ext)):
            raise ValueError(f"job {job.job_id}: external rate must be > 0, got {rate_ext!r}")
        return cls(
            job_id=job.job_id,
            work=max(0.0, job.total_work - max(0.0, done)),
            rate_int=rate_int,
            rate_ext=rate_ext,
            cap=job.worker_cap,
            min_workers=max(1, job.min_workers),
            alpha=cluster.demand_array(job.worker),
            beta=cluster.demand_array(job.ps),
            ps_ratio=job.ps_ratio,
        )

    def workers_for(self, units: float, internal: bool) -> int:
        """Workers that do ``units`` in one slot at the mode's rate (D of Alg. 4), at least
        the job's ``min_workers``."""
        if units <= 0:
            return 0
        rate = self.rate_int if internal else self.rate_ext
        return max(self.min_workers, math.ceil(units / rate - 1e-9))

    def ps_for(self, workers: int) -> int:
        """PSs for ``workers``: at least one, at most ``ps_ratio`` workers each (A7, A8)."""
        if workers <= 0:
            return 0
        ratio = self.ps_ratio if self.ps_ratio is not None else math.inf
        return max(1, math.ceil(workers / ratio - 1e-9))

    @property
    def min_duration(self) -> int:
        """d_min: slots to finish with F workers co-located in every slot."""
        return max(1, math.ceil(self.work / (self.cap * self.rate_int) - 1e-9))

    @property
    def external_worker_slots(self) -> int:
        """ceil(V c^(e)): worker-slots to do the whole job at the external rate ((E21))."""
        return max(1, math.ceil(self.work / self.rate_ext - 1e-9))
