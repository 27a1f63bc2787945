"""Job records <-> the store's rows (a restarted controller rebuilds its engine from them)."""

from __future__ import annotations

import logging
from typing import Any

from mlsched.controller.runs import JobRun
from mlsched.controller.store import Store
from mlsched.core.allocation import JobState, Quote, RejectKind
from mlsched.core.errors import shorten
from mlsched.core.fields import check_number
from mlsched.core.job import JobSpec
from mlsched.core.limits import MAX_TOTAL_WORK, Bound
from mlsched.engine.engine import Engine, JobRecord, SlotOutcome

__all__ = ["load_rows", "record_from_row", "record_state", "write_slot"]

log = logging.getLogger("mlsched.controller.server")  # where quarantines were logged

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


def load_rows(store: Store) -> tuple[list[tuple[JobRecord, float]], dict[str, Any]]:
    """The stored jobs (with their trainer-step counts) and runs that still load; any
    other row is quarantined with its reason (a spec this release refuses, damaged
    JSON), never fatal."""
    runs = store.runs()
    out: list[tuple[JobRecord, float]] = []
    for row in store.jobs():
        job_id = row["job_id"]
        try:
            if "error" in row:
                raise ValueError(row["error"])
            state = row["state"] or {}
            if not isinstance(state, dict):
                raise ValueError(f"state is a {type(state).__name__}, not a mapping")
            record = record_from_row(row["spec"], state)
            iterations = check_number(
                state.get("iterations", 0.0), "iterations", Bound(0.0, MAX_TOTAL_WORK)
            )
            if record.job_id != job_id:
                raise ValueError(f"spec names job {record.job_id!r}")
            if job_id in runs:
                if runs[job_id] is None:
                    raise ValueError("its run is unreadable JSON")
                JobRun.from_dict(job_id, runs[job_id])
        except Exception as err:  # whatever a damaged or outdated row raises
            reason = shorten(f"{type(err).__name__}: {err}", 500)
            log.error("[controller] job %s quarantined at restart: %s", job_id, reason)
            store.quarantine_job(job_id, reason)
            runs.pop(job_id, None)
            continue
        out.append((record, float(iterations)))
    return out, {j: r for j, r in runs.items() if r is not None}
