"""Metrics of a run: what the specs' figures plot and what operators ask about.

All times come from the engine's :class:`RunResult`. A job's **JCT** runs from the start
of its arrival slot (``arrival_slot * slot_seconds``) to ``completion_time_s``; in slots it
is that time divided by the slot length. A job **misses its target** when it was admitted
and either never completed or completed with ``completion_slot - arrival_slot`` above its
utility's target (sigmoid ``target`` gamma3, linear/step ``deadline``). Jobs that never
completed have no JCT and earn a duration utility of 0 (spec 001 A20).

``weighted_completion_time`` is spec 002's objective, sum over *all* jobs of weight x
completion time in slots from slot 0: a job done in slot k completes at k + 1; a job not
done (rejected, waiting, still running) is charged the horizon (the slots run when the run
had none). Every completion is at most the horizon, so finishing a job never scores worse
than leaving it unfinished.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from mlsched.core.allocation import JobState
from mlsched.core.utility import UtilityKind
from mlsched.engine.engine import JobRecord, RunResult
from mlsched.engine.model_errors import ModelErrors

__all__ = [
    "Summary",
    "jct_s",
    "job_rows",
    "summarize",
    "target_slots",
    "weighted_completion_time",
]


def jct_s(record: JobRecord, slot_seconds: float) -> float | None:
    """Seconds from the start of the arrival slot to completion; None if not completed."""
    if record.state is not JobState.DONE or record.completion_time_s is None:
        return None
    return record.completion_time_s - record.spec.arrival_slot * slot_seconds


def target_slots(record: JobRecord) -> float | None:
    """The duration (in slots) the job's utility aims at; None when it has none."""
    u = record.spec.utility
    if u.kind is UtilityKind.SIGMOID:
        return u.params["target"]
    if u.kind in (UtilityKind.LINEAR, UtilityKind.STEP):
        return u.params["deadline"]
    return None


def _missed(record: JobRecord) -> bool:
    if record.admitted_slot is None or record.state is JobState.REJECTED:
        return False
    if record.state is not JobState.DONE or record.completion_slot is None:
        return True
    target = target_slots(record)
    return target is not None and record.completion_slot - record.spec.arrival_slot > target


def _stat(values: list[float], q: float | None = None) -> float | None:
    if not values:
        return None
    if q is None:
        return float(np.mean(values))
    return percentile(values, q)


def percentile(values: Sequence[float], q: float) -> float:
    """``np.percentile(values, q)`` (its default, linear method) to the last bit, without
    the masked-array module numpy's sort path imports (about 10 ms of a short run).
    Percentiles here are of a few thousand numbers, once per summary."""
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        raise ValueError("percentile of no values")
    if any(v != v for v in ordered):  # nan sorts nowhere in particular: numpy gives nan
        return math.nan
    virtual = (n - 1) * (q / 100)
    if virtual >= n - 1:
        return float(ordered[-1])
    if virtual < 0:
        return float(ordered[0])
    below = math.floor(virtual)
    a, b = float(ordered[below]), float(ordered[below + 1])
    gamma = virtual - below
    # numpy's _lerp: from the nearer end, so the result stays within [a, b].
    diff = b - a
    return b - diff * (1 - gamma) if gamma >= 0.5 else a + diff * gamma


@dataclass(frozen=True)
class Summary:
    """One run in numbers. Times in seconds unless the name says slots; None = no data.

    ``revenue`` is what accepted quotes charged; ``profit`` is revenue minus the costs of
    the spec's model, and equals revenue, since none of the specs has a cost model (spec
    004: "the model has no costs"). ``quotes`` counts prices put to users (zero prices
    included) and ``acceptance_rate`` the share accepted (None without quotes)."""

    policy: str
    jobs: int
    admitted: int
    completed: int
    rejected: int
    admitted_fraction: float
    completed_fraction: float
    total_utility: float
    avg_jct_s: float | None
    median_jct_s: float | None
    p99_jct_s: float | None
    avg_jct_slots: float | None
    median_jct_slots: float | None
    p99_jct_slots: float | None
    weighted_completion_s: float
    weighted_flow_s: float
    makespan_s: float
    makespan_slots: int
    utilization: dict[str, float] = field(default_factory=dict)
    deadline_misses: int = 0
    revenue: float = 0.0
    profit: float = 0.0
    quotes: int = 0
    acceptance_rate: float | None = None
    model_error: float | None = None
    restarts: int = 0
    restarts_per_job: float = 0.0  # over the jobs that ran at least one slot
    slots: int = 0
    slot_seconds: float = 0.0
    wall_seconds: float = 0.0
    stalled: bool = False
    #: Spec 002's sum of w_j c_j in slots, unfinished jobs at the horizon (module docstring).
    weighted_completion_time: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values (None for metrics without data)."""
        return asdict(self)


def _mean_model_error(result: RunResult) -> float | None:
    """Mean |predicted - measured| / measured over the measurements that took time (one
    per running job and slot: columns, not a loop over hundreds of thousands of tuples)."""
    errors = result.model_errors
    kept = errors if isinstance(errors, ModelErrors) else ModelErrors(errors)
    predicted, measured = kept.columns()
    took = measured > 0
    if not took.any():
        return None
    return float(np.mean(np.abs(predicted[took] - measured[took]) / measured[took]))


def summarize(result: RunResult, *, wall_seconds: float | None = None) -> Summary:
    """Every metric of :class:`Summary` from an engine result."""
    records = list(result.records.values())
    slot_s = result.slot_seconds
    n = len(records)
    admitted = [r for r in records if r.admitted_slot is not None]
    done = [r for r in records if r.state is JobState.DONE and r.completion_time_s is not None]
    jcts = [j for r in done if (j := jct_s(r, slot_s)) is not None]
    jct_slots = [j / slot_s for j in jcts]
    util = result.utilization
    utilization = (
        {name: float(util[:, i].mean()) for i, name in enumerate(result.resource_names)}
        if util.size
        else dict.fromkeys(result.resource_names, 0.0)
    )
    model_error = _mean_model_error(result)
    revenue = float(sum(r.price_paid for r in records))
    quoted = [r for r in records if r.quote_decision]
    return Summary(
        policy=result.policy,
        jobs=n,
        admitted=len(admitted),
        completed=len(done),
        rejected=sum(r.state is JobState.REJECTED for r in records),
        admitted_fraction=len(admitted) / n if n else 0.0,
        completed_fraction=len(done) / n if n else 0.0,
        total_utility=float(sum(r.utility() for r in records)),
        avg_jct_s=_stat(jcts),
        median_jct_s=_stat(jcts, 50),
        p99_jct_s=_stat(jcts, 99),
        avg_jct_slots=_stat(jct_slots),
        median_jct_slots=_stat(jct_slots, 50),
        p99_jct_slots=_stat(jct_slots, 99),
        weighted_completion_s=float(
            sum(r.spec.weight * (r.completion_time_s or 0.0) for r in done)
        ),
        weighted_flow_s=float(sum(r.spec.weight * j for r, j in zip(done, jcts, strict=True))),
        makespan_s=max((r.completion_time_s or 0.0 for r in done), default=0.0),
        weighted_completion_time=weighted_completion_time(result),
        makespan_slots=max(
            (r.completion_slot + 1 for r in done if r.completion_slot is not None), default=0
        ),
        utilization=utilization,
        deadline_misses=sum(_missed(r) for r in records),
        revenue=revenue,
        profit=revenue,  # no spec here has a cost model: profit is revenue
        quotes=len(quoted),
        acceptance_rate=(
            sum(r.quote_decision == "accepted" for r in quoted) / len(quoted) if quoted else None
        ),
        model_error=model_error,
        restarts=sum(r.restarts for r in records),
        restarts_per_job=_per_job_restarts(records),
        slots=result.slots,
        slot_seconds=slot_s,
        wall_seconds=result.wall_seconds if wall_seconds is None else wall_seconds,
        stalled=result.stalled,
    )


def weighted_completion_time(result: RunResult) -> float:
    """Sum of w_j c_j over every job, in slots (see the module docstring)."""
    charge = result.horizon if result.horizon is not None else result.slots
    total = 0.0
    for r in result.records.values():
        done = r.state is JobState.DONE and r.completion_slot is not None
        total += r.spec.weight * (r.completion_slot + 1 if done else charge)  # type: ignore[operator]
    return float(total)


def _per_job_restarts(records: list[JobRecord]) -> float:
    ran = [r for r in records if r.slots_run > 0]
    return sum(r.restarts for r in ran) / len(ran) if ran else 0.0


def _clean(value: float | None) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return value


def job_rows(result: RunResult) -> list[dict[str, Any]]:
    """One row per job (in arrival order) for jobs.csv."""
    rows: list[dict[str, Any]] = []
    records: Iterable[JobRecord] = sorted(
        result.records.values(), key=lambda r: (r.spec.arrival_slot, r.job_id)
    )
    for r in records:
        j = jct_s(r, result.slot_seconds)
        target = target_slots(r)
        total = r.spec.total_work
        rows.append(
            {
                "job_id": r.job_id,
                "model": r.spec.model,
                "arch": r.spec.arch.value,
                "sync": r.spec.sync.value,
                "arrival_slot": r.spec.arrival_slot,
                "state": r.state.value,
                "admitted": r.admitted_slot is not None,
                "admitted_slot": r.admitted_slot,
                "started_slot": r.started_slot,
                "completion_slot": r.completion_slot,
                "completion_time_s": r.completion_time_s,
                "jct_s": j,
                "jct_slots": None if j is None else j / result.slot_seconds,
                "target_slots": target,
                "missed_target": _missed(r),
                "utility": r.utility(),
                "max_utility": _clean(r.spec.utility.max_value),
                "progress": r.progress / total if total else 0.0,
                "progress_units": r.progress,
                "worker_slots": r.worker_slots,
                "restarts": r.restarts,
                "restart_s": r.restart_s,
                "price": r.quote.total if r.quote is not None else None,
                "price_paid": r.price_paid,
                "weight": r.spec.weight,
                "reject_kind": r.reject_kind.value if r.reject_kind is not None else None,
                "reason": r.reason,
            }
        )
    return rows
