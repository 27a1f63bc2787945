"""Steady jobs, accounted without the executor: what keeps long trace simulations cheap.

A job that keeps its placement and owes no start-up or restart repeats its slot: the same
work and the same measurement, until the slot that finishes it. Where the executor can
tell such a slot in advance (:meth:`~mlsched.engine.executor.Executor.steady`: the
simulator without noise), the engine *coasts* the job: it leaves it out of the executor's
slot and does the slot's bookkeeping itself, the same updates in the same order:

- its record's progress (the same float additions), slots and worker-slots;
- its measurement observed by the runtime model at its place in the slot's measurements
  (allocation order), the prediction it is compared with kept as a model error. Where
  the model found the repeat quiet (its key's exact fit predicts it; nothing to refit),
  that is an append to the key's window until the model's repeat epoch moves.

The slot that finishes a coasting job is coasted too: its last units at the same rate
(the executor's :class:`~mlsched.engine.executor.SteadySlot`), the same measurement of an
iteration, and the engine ends the job as it would from the executor's report
(:meth:`Coasting.select` names these slots).

Nothing about the job's slot is skipped, only rebuilt: a coasted run's records, model
errors and model are those of a run without coasting (tests/test_coast.py holds them
equal). A job stops coasting when its placement changes, it pauses, or it finishes; it
may coast again from the slot after a change.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from mlsched.core.allocation import Allocation, JobState, Placement
from mlsched.core.job import JobSpec
from mlsched.engine.executor import Executor
from mlsched.engine.model_errors import ModelErrors
from mlsched.engine.results import JobRecord, ModelError
from mlsched.perfmodel.base import Measurement
from mlsched.perfmodel.estimator import RuntimeEstimator

__all__ = ["Coast", "Coasting", "Ending"]

_measurement = partial(tuple.__new__, Measurement)
_model_error = partial(tuple.__new__, ModelError)


class Coast:
    """One steady job: its record, placement and repeated slot."""

    __slots__ = (
        "append",
        "epoch",
        "error",
        "handle",
        "iteration_s",
        "job_id",
        "last_slot",
        "placement",
        "predicted",
        "rate",
        "record",
        "sample",
        "tail",
        "total",
        "units",
        "workers",
    )

    def __init__(
        self,
        record: JobRecord,
        placement: Placement,
        units: float,
        slot: int,
        tail: tuple[Any, ...] | None,
        handle: object | None,
        iteration_s: float,
        rate: float,
    ) -> None:
        self.record = record
        self.job_id = record.spec.job_id
        self.placement = placement
        self.units = units
        self.total = record.spec.total_work
        self.workers = placement.n_workers
        self.last_slot = slot  # the last slot it ran (coasted or not)
        self.tail = tail  # its measurement's fields after (job id, slot, placement)
        self.handle = handle  # the runtime model's entry for it
        self.iteration_s = iteration_s
        self.rate = rate  # units per second
        # Its quiet repeat (RuntimeEstimator.repeat_quiet) and the model's repeat epoch it
        # holds under (-1: none found yet).
        self.epoch = -1
        self.append: Callable[[Any], None] | None = None
        self.sample: object = None
        self.error = -1  # its shared model error's index (ModelErrors.entry)
        self.predicted = math.nan  # the iteration time that entry holds as predicted


#: A coasting job its slot finishes, and when within the slot (seconds).
Ending = tuple[Coast, float]


class Others(list[tuple[str, Placement]]):
    """A slot's jobs that do not coast, in allocation order, and before each how many of
    the slot's coasting jobs come (``at``)."""

    __slots__ = ("at",)

    def __init__(self) -> None:
        super().__init__()
        self.at: list[int] = []


class Coasting:
    """The engine's steady jobs (one per run loop)."""

    def __init__(self, executor: Executor, runtime: RuntimeEstimator, errors: ModelErrors) -> None:
        self.executor = executor
        self.runtime = runtime
        self.errors = errors
        self._coast: dict[str, Coast] = {}
        self.slots = 0  # job-slots coasted

    def drop(self, job_id: str | None = None) -> None:
        """Forget one job's coast (it ended) or, with None, every one (a reconfiguration)."""
        if job_id is None:
            self._coast.clear()
        else:
            self._coast.pop(job_id, None)

    def select(
        self, t: int, allocation: Allocation, active: Mapping[str, JobRecord]
    ) -> tuple[dict[str, Coast], Others, dict[str, JobSpec], dict[str, float], list[Ending]]:
        """Slot ``t``'s coasting jobs, and the others (in allocation order) with their
        specs and remaining work for the executor; last, the coasting jobs this slot
        finishes, each with its finish offset in seconds, in allocation order."""
        now: dict[str, Coast] = {}
        others = Others()
        specs: dict[str, JobSpec] = {}
        remaining: dict[str, float] = {}
        ending: list[Ending] = []
        coast, at, last = self._coast, others.at, t - 1
        for job_id, p in allocation.items():
            c = coast.get(job_id)
            if c is not None and c.placement is p and c.last_slot == last:
                now[job_id] = c
                # The simulator's own test of a slot that does not finish the job; where
                # it does, the job's last ``left`` units take left / rate seconds.
                left = c.total - c.record.progress
                if not c.units < left - 1e-9:
                    ending.append((c, left / c.rate))
                continue
            spec = specs[job_id] = active[job_id].spec
            remaining[job_id] = spec.total_work - active[job_id].progress
            others.append((job_id, p))
            at.append(len(now))
        return now, others, specs, remaining, ending

    def account(
        self,
        t: int,
        now: Mapping[str, Coast],
        others: Others,
        measurements: list[Measurement],
        full: Callable[[int, Measurement], None],
    ) -> None:
        """The coasting jobs' records after slot ``t`` (the engine's own update of a slot
        that does not finish the job), and slot ``t``'s measurements in allocation order
        (the order the simulator reports them in): the coasting jobs' repeated ones and
        ``measurements``, the others', each by ``full``."""
        self.slots += len(now)
        runtime, errors = self.runtime, self.errors
        keep = errors.shared(t)  # a quiet repeat's error: its shared entry, this slot
        epoch = runtime.repeat_epoch
        coasting = list(now.values())  # allocation order, as ``others``
        n, i, start = len(measurements), 0, 0
        for k, stop in enumerate([*others.at, len(coasting)]):
            for c in coasting[start:stop]:
                record = c.record
                units = record.progress + c.units
                total = c.total
                record.progress = units if units < total else total
                record.slots_run += 1
                record.worker_slots += c.workers
                c.last_slot = t
                if c.tail is None:
                    continue
                if c.epoch == epoch:  # observe_repeat's whole effect, as found before
                    c.append(c.sample)  # type: ignore[misc]
                    keep(c.error)
                    continue
                job_id = c.job_id
                predicted = runtime.observe_repeat(c.handle, record.spec, c.placement)
                if predicted is None:  # the model's entry changed: observe in full
                    full(t, _measurement((job_id, t, c.placement, *c.tail)))
                    epoch = runtime.repeat_epoch
                    continue
                errors.append(_model_error((job_id, t, predicted, c.iteration_s)))
                quiet = runtime.repeat_quiet(c.handle)
                if quiet is not None:
                    c.append, c.sample, predicted = quiet
                    if predicted != c.predicted:  # else its shared entry stands as it was
                        c.error = errors.entry(job_id, predicted, c.iteration_s)
                        c.predicted = predicted
                    c.epoch = epoch
            start = stop
            if k < len(others):  # the next job that does not coast: its measurement
                other = others[k][0]
                while i < n and measurements[i].job_id == other:
                    full(t, measurements[i])
                    i += 1
                epoch = runtime.repeat_epoch  # a full observation may have moved it
        while i < n:
            full(t, measurements[i])
            i += 1

    def register(self, t: int, others: Others, active: Mapping[str, JobRecord]) -> None:
        """Start coasting the jobs of ``others`` whose next slot repeats slot ``t``."""
        coast, running = self._coast, JobState.RUNNING
        for job_id, p in others:
            record = active.get(job_id)
            steady = None
            if record is not None and record.state is running:
                steady = self.executor.steady(job_id, p)
            handle = None
            if record is not None and steady is not None and steady.measurement_tail is not None:
                handle = self.runtime.repeat_handle(record.spec, p, steady.compute_s, steady.comm_s)
                if handle is None:  # the model has not seen this sample last: observe in full
                    steady = None
            if record is None or steady is None:
                coast.pop(job_id, None)
                continue
            coast[job_id] = Coast(
                record,
                p,
                steady.units,
                t,
                steady.measurement_tail,
                handle,
                steady.iteration_s,
                steady.rate,
            )
