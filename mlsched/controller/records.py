"""Job records <-> the store's rows (a restarted controller rebuilds its engine from them)."""

from __future__ import annotations

from typing import Any

from mlsched.controller.store import Store
from mlsched.core.allocation import JobState, Quote, RejectKind
from mlsched.core.job import JobSpec
from mlsched.engine.engine import Engine, JobRecord, SlotOutcome

__all__ = ["record_from_row", "record_state", "write_slot"]

_PLAIN = (
    "progress",
    "admitted_slot",
    "started_slot",
    "completion_slot",
    "completion_time_s",
    "slots_run",
    "worker_slots",
    "restarts",
    "restart_s",
    "reason",
)


def record_state(record: JobRecord, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {name: getattr(record, name) for name in _PLAIN}
    out["state"] = record.state.value
    out["reject_kind"] = record.reject_kind.value if record.reject_kind else None
    out["quote"] = (
        {"total": record.quote.total, "unit_prices": dict(record.quote.unit_prices)}
        if record.quote
        else None
    )
    out.update(extra or {})
    return out


def record_from_row(spec: dict[str, Any], state: dict[str, Any]) -> JobRecord:
    """The record a stored row describes; raises (SpecError, ValueError) on a row that does
    not hold what :func:`record_state` writes."""
    record = JobRecord(JobSpec.from_dict(spec))
    if not state:
        return record
    for name in _PLAIN:
        if name in state:
            value, default = state[name], getattr(record, name)
            if not _same_kind(value, default):
                raise ValueError(f"stored {name} {value!r:.60} is not like {default!r:.60}")
            setattr(record, name, value)
    record.state = JobState(state.get("state", "pending"))
    if state.get("reject_kind"):
        record.reject_kind = RejectKind(state["reject_kind"])
    if state.get("quote"):
        record.quote = Quote(state["quote"]["total"], state["quote"].get("unit_prices", {}))
    return record


def _same_kind(value: Any, default: Any) -> bool:
    """A stored field fits its record attribute: the same kind of number, text or null."""
    if value is None or default is None:
        return value is None or (
            isinstance(value, (int, float, str)) and not isinstance(value, bool)
        )
    if isinstance(default, str):
        return isinstance(value, str)
    if isinstance(default, (int, float)) and not isinstance(default, bool):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return True


def write_slot(
    store: Store,
    engine: Engine,
    outcome: SlotOutcome,
    measured: list[tuple[str, dict[str, Any]]],
    progress: list[tuple[str, float, bool, float]],
    allocations: list[tuple[str, dict[str, Any]]],
    states: list[tuple[str, dict[str, Any]]],
) -> None:
    """One slot's history in one commit: the slot reached, the admission decisions, the
    measurements, progress, allocations and job states (one statement per table)."""
    t = outcome.slot
    with store.transaction():
        store.set_meta("slot", engine.slot)
        for c in outcome.decided:
            record = engine.records[c.job_id]
            store.add_decision(
                t,
                c.job_id,
                c.new is not JobState.REJECTED,
                record.reason,
                {"total": record.quote.total} if record.quote else None,
            )
        store.add_measurements(t, measured)
        store.add_progress_rows(t, progress)
        store.add_allocations(t, allocations)
        store.update_jobs(states)
