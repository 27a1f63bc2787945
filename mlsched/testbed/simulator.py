"""The simulator: an executor whose progress comes from a "ground truth" runtime model.

The truth may differ from the engine's estimate (``compute_scale``, ``comm_scale``: the
real job is that much slower than its spec says), may be noisy (log-normal per job and
slot, ``noise``), and may charge a restart cost when a job's placement changes
(``restart_s``, the measured checkpoint + restart time on the testbed). The engine's model
learns from the measurements this executor reports, exactly as it does from agents.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from mlsched.controller.executor import Executor, JobProgress, SlotReport
from mlsched.core.allocation import Allocation, Placement
from mlsched.core.cluster import Cluster
from mlsched.core.errors import SpecError
from mlsched.core.job import JobSpec
from mlsched.perfmodel.base import Measurement
from mlsched.perfmodel.estimator import RuntimeEstimator

__all__ = ["SimulatedExecutor", "TruthConfig"]


@dataclass(frozen=True)
class TruthConfig:
    """How the simulated reality departs from the job specs."""

    compute_scale: float = 1.0
    comm_scale: float = 1.0
    noise: float = 0.0
    restart_s: float = 0.0
    measure: bool = True

    def __post_init__(self) -> None:
        for name in ("compute_scale", "comm_scale"):
            if not getattr(self, name) > 0:
                raise SpecError(f"truth.{name}", getattr(self, name), "a number > 0")
        for name in ("noise", "restart_s"):
            if not getattr(self, name) >= 0:
                raise SpecError(f"truth.{name}", getattr(self, name), "a number >= 0")


class SimulatedExecutor(Executor):
    """Runs allocations against the truth model; deterministic for a given seed."""

    def __init__(
        self,
        cluster: Cluster,
        slot_seconds: float,
        *,
        truth: TruthConfig | None = None,
        families: Mapping[str, str] | None = None,
        seed: int = 0,
    ) -> None:
        self.cluster = cluster
        self.slot_seconds = float(slot_seconds)
        self.truth = truth or TruthConfig()
        self._model = RuntimeEstimator(cluster, families)
        self._rng = np.random.default_rng(seed)
        self._last: dict[str, Placement] = {}
        self._seen: set[str] = set()
        self._report = SlotReport(slot=-1)
        self._parts: dict[tuple[str, Placement], tuple[float, float, float]] = {}
        self._last_parts: dict[str, tuple[Placement, tuple[float, float, float]]] = {}

    def _true_parts(self, job: JobSpec, p: Placement) -> tuple[float, float, float]:
        last = self._last_parts.get(job.job_id)
        if last is not None and last[0] is p:  # a running job keeps its placement
            return last[1]
        key = (job.job_id, p)
        hit = self._parts.get(key)
        if hit is None:
            compute, comm = self._model.iteration_parts(job, p)
            compute *= self.truth.compute_scale
            comm *= self.truth.comm_scale
            hit = (compute, comm, self._model.units_per_iteration(job, p))
            if len(self._parts) > 200_000:
                self._parts.clear()
                self._last_parts.clear()
            self._parts[key] = hit
        self._last_parts[job.job_id] = (p, hit)
        return hit

    def apply(
        self,
        slot: int,
        allocation: Allocation,
        jobs: Mapping[str, JobSpec],
        remaining: Mapping[str, float],
    ) -> None:
        report = SlotReport(slot=slot)
        noise = self.truth.noise
        measure = self.truth.measure
        restart_s = self.truth.restart_s
        slot_seconds = self.slot_seconds
        last, seen = self._last, self._seen
        progress, measurements = report.progress, report.measurements
        for job_id, p in allocation.items():
            job = jobs[job_id]
            compute, comm, units_per_iter = self._true_parts(job, p)
            if noise > 0:
                factor = float(np.exp(self._rng.normal(0.0, noise)))
                compute, comm = compute * factor, comm * factor
            iter_s = compute + comm
            # A re-layout, or a resume after a pause, restarts from a checkpoint.
            prev = last.get(job_id)
            moved = prev is not p and job_id in seen and (prev is None or prev != p)
            restart = restart_s if moved else 0.0
            usable = slot_seconds - restart if slot_seconds > restart else 0.0
            rate = units_per_iter / iter_s if iter_s > 0 else 0.0
            left = remaining[job_id]
            if rate > 0 and rate * usable >= left - 1e-9:
                units, finished = left, True
                offset: float | None = restart + left / rate
            else:
                units, finished, offset = rate * usable, False, None
            progress[job_id] = JobProgress(units, finished, offset, restart)
            if measure and units > 0:
                iterations = units / units_per_iter
                measurements.append(
                    Measurement(
                        job_id,
                        slot,
                        p,
                        iterations,
                        iter_s,
                        compute,
                        comm,
                        iterations * 2 * job.gradient_bytes,
                        0.0,
                        restart,
                    )
                )
        self._seen.update(allocation)
        self._last = dict(allocation)
        self._report = report

    def collect(self, slot: int) -> SlotReport:
        if self._report.slot != slot:
            raise RuntimeError(f"collect({slot}) without apply({slot})")
        return self._report
