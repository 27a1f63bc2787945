"""Job records <-> the store's rows (a restarted controller rebuilds its engine from them)."""

from __future__ import annotations

from typing import Any

from mlsched.controller.engine import JobRecord
from mlsched.core.allocation import JobState, Quote, RejectKind
from mlsched.core.job import JobSpec

__all__ = ["record_from_row", "record_state"]

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
    record = JobRecord(JobSpec.from_dict(spec))
    if not state:
        return record
    for name in _PLAIN:
        if name in state:
            setattr(record, name, state[name])
    record.state = JobState(state.get("state", "pending"))
    if state.get("reject_kind"):
        record.reject_kind = RejectKind(state["reject_kind"])
    if state.get("quote"):
        record.quote = Quote(state["quote"]["total"], state["quote"].get("unit_prices", {}))
    return record
