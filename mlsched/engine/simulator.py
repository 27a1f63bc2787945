"""The simulator: an executor whose progress comes from a "ground truth" runtime model.

The truth is the job specs, or a measured profile (``profile``: each job's iteration,
start-up and restart from its cell, :mod:`mlsched.perfmodel.profiled`). It may differ
from the engine's estimate (``compute_scale``, ``comm_scale``: the real job is that much
slower), may be noisy (log-normal per job and slot, ``noise``), and charges what a real
cluster charges for starting processes: ``startup_s`` before a job's first iteration, and
``restart_s`` (checkpoint save + relaunch to the first iteration) whenever a job resumes
after a pause or its placement changes. Both come from the profile's cell where it has
one. A charge longer than a slot carries over into the next slots the job keeps its
placement; a placement change meanwhile starts a new restart. The engine's model learns
from the measurements this executor reports, exactly as it does from agents.

With no profile, a restart costs :data:`DEFAULT_RESTART_S` unless the caller says
otherwise (an experiment whose paper assumes free preemption sets 0 and says so).
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from mlsched.core.allocation import Allocation, Placement
from mlsched.core.cluster import Cluster
from mlsched.core.errors import SpecError
from mlsched.core.job import JobSpec
from mlsched.engine.executor import Executor, JobProgress, SlotReport, SteadySlot
from mlsched.perfmodel.base import NO_NIC, Measurement
from mlsched.perfmodel.estimator import RuntimeEstimator

if TYPE_CHECKING:
    from mlsched.perfmodel.profile import Profile
    from mlsched.perfmodel.profiled import ProfileLookup

__all__ = ["DEFAULT_RESTART_S", "SimulatedExecutor", "TruthConfig"]

#: Seconds a restart costs where nothing measured says otherwise: a checkpoint save plus a
#: relaunch to the first iteration. Our round figure: this machine's profiles measured
#: 5-17 s for small models on CPU; ResNet/VGG jobs on GPU machines load larger checkpoints
#: and CUDA contexts. ``mlsched profile`` measures it (docs/fidelity.md).
DEFAULT_RESTART_S = 30.0


class _Truth(NamedTuple):
    """A (job, placement)'s true iteration, computed once: its parts, the work units per
    iteration, work units per second and gradient bytes moved per iteration."""

    compute: float
    comm: float
    startup: float  # seconds to a fresh launch's first iteration
    restart: float  # seconds from a stop at a checkpoint to the resumed first iteration
    units_per_iter: float
    rate: float
    bytes_per_iter: float
    #: A full slot without a restart that does not finish the job: its progress, and its
    #: measurement's fields after (job id, slot, placement).
    steady: JobProgress
    steady_measure: tuple[Any, ...]
    steady_slot: SteadySlot  # the same, as the engine coasts it


# Tuples made without the named tuples' Python-level __new__: one of each per running job
# and slot (hundreds of thousands in a trace simulation); every field is given.
_progress = partial(tuple.__new__, JobProgress)
_measurement = partial(tuple.__new__, Measurement)
_STEADY_TAIL = (0.0, 0.0, None, None, NO_NIC)  # nothing received, no restart, no readings


@dataclass(frozen=True)
class TruthConfig:
    """How the simulated reality departs from the job specs. ``startup_s`` and
    ``restart_s`` apply to jobs the profile has no cell for (or with no profile).
    ``job_profiles``: a job's own profile in place of ``profile`` (a recorded run's jobs
    each with the costs it measured, :func:`mlsched.testbed.fidelity.noise.job_costs`)."""

    compute_scale: float = 1.0
    comm_scale: float = 1.0
    noise: float = 0.0
    restart_s: float = DEFAULT_RESTART_S
    startup_s: float = 0.0
    measure: bool = True
    profile: Profile | None = None
    job_profiles: Mapping[str, Profile] | None = None

    def __post_init__(self) -> None:
        for name in ("compute_scale", "comm_scale"):
            if not getattr(self, name) > 0:
                raise SpecError(f"truth.{name}", getattr(self, name), "a number > 0")
        for name in ("noise", "restart_s", "startup_s"):
            if not getattr(self, name) >= 0:
                raise SpecError(f"truth.{name}", getattr(self, name), "a number >= 0")

    def describe(self) -> dict[str, Any]:
        """What a result file records of the truth (a profile by its machine and size)."""
        out: dict[str, Any] = {
            "compute_scale": self.compute_scale,
            "comm_scale": self.comm_scale,
            "noise": self.noise,
            "restart_s": self.restart_s,
            "startup_s": self.startup_s,
        }
        if self.profile is not None:
            out["profile"] = {
                "machine": self.profile.machine.get("hostname"),
                "device": self.profile.device.get("type"),
                "cells": len(self.profile.cells),
            }
        if self.job_profiles:
            out["job_profiles"] = len(self.job_profiles)
        return out


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
        self._lookup: ProfileLookup | None = None
        self._job_lookups: dict[str, ProfileLookup] = {}
        if self.truth.profile or self.truth.job_profiles:  # a truth from the specs never
            from mlsched.perfmodel.profiled import ProfileLookup  # needs it: imported here

            if self.truth.profile:
                self._lookup = ProfileLookup(self.truth.profile)
            for job_id, own in (self.truth.job_profiles or {}).items():
                self._job_lookups[job_id] = ProfileLookup(own)
        self._seed = seed
        self._rng: np.random.Generator | None = None  # made at the first noisy slot
        self._last: dict[str, Placement] = {}
        self._seen: set[str] = set()
        # Start-up or restart seconds a job still owes (charged before it iterates), and
        # whether the debt is a restart (reported as such) or a first start-up.
        self._debt: dict[str, tuple[float, bool]] = {}
        self._report = SlotReport(slot=-1)
        self._parts: dict[tuple[str, Placement], _Truth] = {}
        self._last_parts: dict[str, tuple[Placement, _Truth]] = {}

    def _true_parts(self, job: JobSpec, p: Placement) -> _Truth:
        last = self._last_parts.get(job.job_id)
        if last is not None and last[0] is p:  # a running job keeps its placement
            return last[1]
        key = (job.job_id, p)
        hit = self._parts.get(key)
        if hit is None:
            compute, comm, startup, restart = self._measured(job, p)
            compute *= self.truth.compute_scale
            comm *= self.truth.comm_scale
            units = self._model.units_per_iteration(job, p)
            iter_s = compute + comm
            rate = units / iter_s if iter_s > 0 else 0.0
            per_iter = 2 * job.gradient_bytes
            steady = _progress((rate * self.slot_seconds, False, None, 0.0, 0.0))
            iterations = steady.units / units
            # iterations, time, compute, comm, bytes sent and received, restart,
            # prediction, measured Gbit/s, NIC readings
            measure = (iterations, iter_s, compute, comm, iterations * per_iter, *_STEADY_TAIL)
            hit = _Truth(
                compute,
                comm,
                startup,
                restart,
                units,
                rate,
                per_iter,
                steady,
                measure,
                SteadySlot(
                    steady.units,
                    measure if self.truth.measure and steady.units > 0 else None,
                    iter_s,
                    compute,
                    comm,
                    rate,
                ),
            )
            if len(self._parts) > 200_000:
                self._parts.clear()
                self._last_parts.clear()
            self._parts[key] = hit
        self._last_parts[job.job_id] = (p, hit)
        return hit

    def _measured(self, job: JobSpec, p: Placement) -> tuple[float, float, float, float]:
        """The job's true compute and communication seconds per iteration, start-up and
        restart seconds under ``p``: from the profile's cell where it has one (a cell of
        ``p``'s shape measured on a cluster as it is; a one-machine cell plus the wire time
        between servers, which it did not measure), else from the spec."""
        compute, comm = self._model.prior_parts(job, p)
        startup, restart = self.truth.startup_s, self.truth.restart_s
        match = None
        lookup = self._job_lookups.get(job.job_id, self._lookup)
        if lookup is not None and p.n_workers > 0:
            servers = self.cluster.servers
            types = {servers[s].gpu_type for s, _ in p.workers}
            device = p.worker_type or job.gpu_type or (types.pop() if len(types) == 1 else None)
            from mlsched.perfmodel.profiled import placement_shape  # with the lookup

            shape = placement_shape(p, self.cluster)
            match = lookup.match(job, p.n_workers, device, shape)
        if match is None:
            return compute, comm, startup, restart
        spread = len({s for s, _ in (*p.workers, *p.ps)}) > 1
        wire = comm if spread and not match.links_measured else 0.0
        cell = match.cell
        return (
            match.compute_s,
            match.comm_s + wire,
            cell.startup_s if cell.startup_s is not None else startup,
            cell.restart_s if cell.restart_s is not None else restart,
        )

    def coasts(self) -> bool:
        return self.truth.noise == 0  # noise makes every slot its own

    def steady(self, job_id: str, placement: Placement) -> SteadySlot | None:
        """A job that ran last slot under ``placement`` and owes nothing repeats its slot
        (what :meth:`apply` does for it: the same slot while it does not finish the job,
        then the rest of its work at the same rate, with nothing lost to start-ups)."""
        if self.truth.noise > 0 or job_id in self._debt or self._last.get(job_id) is not placement:
            return None
        cached = self._last_parts.get(job_id)
        if cached is None or cached[0] is not placement or not cached[1].steady.units > 0:
            return None
        return cached[1].steady_slot

    def apply(
        self,
        slot: int,
        allocation: Allocation,
        jobs: Mapping[str, JobSpec],
        remaining: Mapping[str, float],
    ) -> None:
        self.apply_except(slot, allocation, jobs, remaining, ())

    def apply_except(
        self,
        slot: int,
        allocation: Allocation,
        jobs: Mapping[str, JobSpec],
        remaining: Mapping[str, float],
        skip: Container[str],
    ) -> None:
        report = SlotReport(slot=slot)
        noise = self.truth.noise
        measure = self.truth.measure
        slot_seconds = self.slot_seconds
        last, seen, last_parts, debts = self._last, self._seen, self._last_parts, self._debt
        progress, measurements = report.progress, report.measurements
        # Jobs in ``skip`` run their steady slot, accounted by the engine; ``jobs`` holds
        # the others, in allocation order (the contract's).
        run = allocation.items() if not skip else [(j, allocation[j]) for j in jobs]
        for job_id, p in run:
            prev = last.get(job_id)
            cached = last_parts.get(job_id)
            if cached is not None and cached[0] is p:  # a running job keeps its placement
                truth = cached[1]
            else:
                truth = self._true_parts(jobs[job_id], p)
            compute, comm, rate = truth.compute, truth.comm, truth.rate
            # A first launch starts up; a re-layout, or a resume after a pause, restarts
            # from a checkpoint; a job that keeps its placement pays what it still owes.
            debt = debts.pop(job_id, None) if debts else None
            if job_id not in seen:
                debt = (truth.startup, False) if truth.startup > 0 else None
            elif not (prev is p or (prev is not None and prev == p)):
                debt = (truth.restart, True) if truth.restart > 0 else None
            lost = restart = 0.0  # seconds charged this slot; the part that is a restart
            if debt is not None:
                owed, is_restart = debt
                lost = owed if owed < slot_seconds else slot_seconds
                restart = lost if is_restart else 0.0
                if owed > lost:
                    debts[job_id] = (owed - lost, is_restart)
            usable = slot_seconds - lost
            left = remaining[job_id]
            if noise > 0:
                if self._rng is None:
                    self._rng = np.random.default_rng(self._seed)
                factor = float(np.exp(self._rng.normal(0.0, noise)))
                compute, comm = compute * factor, comm * factor
                rate = truth.units_per_iter / (compute + comm) if rate > 0 else 0.0
            elif lost == 0.0 and truth.steady.units < left - 1e-9:
                # The common case: a full slot that does not finish the job, the same
                # progress and measurement as the slot before (made once per placement).
                progress[job_id] = truth.steady
                if measure and truth.steady.units > 0:
                    measurements.append(_measurement((job_id, slot, p, *truth.steady_measure)))
                continue
            done = rate * usable
            if rate > 0 and done >= left - 1e-9:
                progress[job_id] = _progress(
                    (left, True, lost + left / rate, restart, lost - restart)
                )
                units = left
            else:
                progress[job_id] = _progress((done, False, None, restart, lost - restart))
                units = done
            if measure and units > 0:
                iterations = units / truth.units_per_iter
                measurements.append(
                    _measurement(
                        (
                            job_id,
                            slot,
                            p,
                            iterations,
                            compute + comm,
                            compute,
                            comm,
                            iterations * truth.bytes_per_iter,
                            0.0,
                            restart,
                            None,
                            None,
                            NO_NIC,
                        )
                    )
                )
        # A job in ``skip`` ran its last slot here already: only the others can be new.
        self._seen.update(jobs if skip else allocation.keys())
        self._last = dict(allocation.items())  # items(): not a __getitem__ per job
        self._report = report

    def collect(self, slot: int) -> SlotReport:
        if self._report.slot != slot:
            raise RuntimeError(f"collect({slot}) without apply({slot})")
        return self._report
