"""The runtime-model contract: per-iteration time as a linear function of named parameters.

Every model of the specs can be written as

    compute_time = d_compute(job, placement) . params
    comm_time    = d_comm(job, placement)    . params
    iteration_time = compute_time + comm_time

where the design rows ``d_*`` hold what is known (gradient bytes, worker and PS counts,
path bandwidths, co-location) and ``params`` what must be measured (compute seconds per
mini-batch, inverse effective bandwidth, reduction time, ...). A model family therefore
needs only its parameter names, its prior (from the job spec) and its two design rows;
prediction, least-squares fitting (:mod:`mlsched.perfmodel.fit`) and residuals are shared.

``units_per_iteration`` converts iterations into work units (see :mod:`mlsched.core.job`):
an asynchronous PS job's "iteration" is one worker's mini-batch, so all Y workers together
complete Y units per iteration time; a synchronous job completes one unit per worker per
iteration, or ``global_batch / batch_size`` units with a fixed global batch.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable, Mapping
from types import MappingProxyType
from typing import NamedTuple

import numpy as np

from mlsched.core.allocation import Placement
from mlsched.core.cluster import Cluster
from mlsched.core.job import JobSpec

__all__ = ["GBIT", "NO_NIC", "Measurement", "NicThroughput", "PerfFamily", "RuntimeModel"]

#: Bits per gigabit; gradient sizes are bytes, bandwidths Gbit/s.
GBIT = 1e9


class NicThroughput(NamedTuple):
    """A host's network interface over a slot, Gbit/s each way (all traffic of the host)."""

    sent_gbps: float
    recv_gbps: float


#: No NIC readings (shared, read-only: a tuple's default is one object for all).
NO_NIC: Mapping[str, NicThroughput] = MappingProxyType({})


class Measurement(NamedTuple):
    """What an executor reports for one job over one slot (means over its iterations).

    ``iterations`` counts per-worker mini-batches for async PS jobs and synchronous steps
    otherwise. Times are seconds; a measurement with ``iterations == 0`` carries no timing.
    ``bytes_sent``/``bytes_recv`` are the workers' totals over the slot. ``comm_gbps`` is the
    throughput a worker achieved while communicating: the bytes it sent plus received per
    iteration over its communication seconds per iteration, Gbit/s (None: not measured).
    ``nic`` holds the NIC throughput of the job's hosts over the slot, by server name, for
    the hosts that reported it (it counts every job's traffic on the host). A tuple: the
    simulator makes one per running job per slot.
    """

    job_id: str
    slot: int
    placement: Placement
    iterations: float
    iteration_time_s: float
    compute_time_s: float
    comm_time_s: float
    bytes_sent: float = 0.0
    bytes_recv: float = 0.0
    restart_s: float = 0.0
    predicted_iteration_time_s: float | None = None
    comm_gbps: float | None = None
    nic: Mapping[str, NicThroughput] = NO_NIC


class PerfFamily(ABC):
    """One runtime model of the specs (a parameter vector, a prior and two design rows)."""

    #: Registry name, e.g. ``ps_async``.
    name: str = ""
    #: Parameter names, in the order of the params vector; each documented in the subclass.
    param_names: tuple[str, ...] = ()

    @abstractmethod
    def prior(self, job: JobSpec, worker_type: str | None, cluster: Cluster) -> np.ndarray:
        """Initial parameters from the job spec (its reference profile)."""

    @abstractmethod
    def design(
        self, job: JobSpec, placement: Placement, cluster: Cluster
    ) -> tuple[np.ndarray, np.ndarray]:
        """(compute row, communication row), each of length ``len(param_names)``."""

    def wire_bytes(self, job: JobSpec, placement: Placement) -> float:
        """Bytes one worker sends plus receives per iteration under this model, as the
        trainers count them (``Measurement.comm_gbps`` divides the measured ones by the
        communication seconds); 0 for a family that does not say."""
        return 0.0

    def units_per_iteration(self, job: JobSpec, placement: Placement) -> float:
        if job.global_batch is not None:
            return job.global_batch / job.batch_size
        return float(placement.n_workers)

    def predict(
        self, params: np.ndarray, job: JobSpec, placement: Placement, cluster: Cluster
    ) -> tuple[float, float]:
        """(compute seconds, communication seconds) per iteration."""
        dc, dm = self.design(job, placement, cluster)
        return float(dc @ params), float(dm @ params)


class RuntimeModel(ABC):
    """What policies and executors ask of a runtime model."""

    @abstractmethod
    def iteration_parts(self, job: JobSpec, placement: Placement) -> tuple[float, float]:
        """(compute seconds, communication seconds) of one iteration under ``placement``."""

    def iteration_time(self, job: JobSpec, placement: Placement) -> float:
        compute, comm = self.iteration_parts(job, placement)
        return compute + comm

    @abstractmethod
    def units_per_iteration(self, job: JobSpec, placement: Placement) -> float:
        """Work units one iteration completes (job-wide)."""

    @property
    def model_version(self) -> int | None:
        """A number that changes whenever any prediction may have changed; None when the
        model cannot tell (then no caller may keep its predictions from one call to the
        next)."""
        return None

    def job_version(self, job: JobSpec) -> Hashable | None:
        """A value that changes whenever a prediction for ``job``, under any placement, may
        have changed; None when the model cannot tell. A policy that keeps a job's
        predictions between slots keeps them while this stays equal (the model's other jobs
        being refitted does not invalidate them). By default, :attr:`model_version`."""
        return self.model_version

    def throughput(self, job: JobSpec, placement: Placement) -> float:
        """Work units per second under ``placement`` (0 for an empty placement)."""
        if placement.is_empty:
            return 0.0
        t = self.iteration_time(job, placement)
        return self.units_per_iteration(job, placement) / t if t > 0 else 0.0

    def observe(self, measurement: Measurement, job: JobSpec) -> None:  # noqa: B027
        """Record a measurement (models that learn override this)."""

    def observe_predicted(self, measurement: Measurement, job: JobSpec) -> float:
        """Record ``measurement``; return the iteration time predicted for it before."""
        predicted = self.iteration_time(job, measurement.placement)
        self.observe(measurement, job)
        return predicted

    def refit(self) -> None:  # noqa: B027
        """Refit parameters from what was observed (models that learn override this)."""
