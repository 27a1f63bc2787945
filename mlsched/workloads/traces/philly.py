"""Microsoft Philly's ``cluster_job_log`` (msr-fiddle/philly-traces).

A JSON list of jobs: ``jobid``, ``user``, ``vc``, ``status`` (Pass, Killed, Failed),
``submitted_time`` and ``attempts``, each attempt with ``start_time``, ``end_time`` and
``detail``: the machines it ran on, each with its list of ``gpus``. A job's run time is the
sum of its attempts' (a retry re-runs work, and the cluster was busy all that time); its GPU
count is its last attempt's. Jobs that never started are skipped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mlsched.core.errors import SpecError
from mlsched.core.limits import MAX_WORKERS
from mlsched.workloads.traces.records import (
    MAX_TRACE_BYTES,
    Reading,
    TraceJob,
    duration,
    open_text,
    seconds,
)

__all__ = ["read_philly"]

_MAX_ATTEMPTS = 1000


def read_philly(path: Path, reading: Reading) -> None:
    where = str(path)
    with open_text(path, "trace") as handle:
        text = handle.read(MAX_TRACE_BYTES + 1)
    try:
        doc = json.loads(text)
    except ValueError as err:
        raise SpecError("trace", str(err)[:80], "a JSON list of jobs", where=where) from None
    if not isinstance(doc, list):
        raise SpecError("trace", type(doc).__name__, "a JSON list of jobs", where=where)
    reading.assume(
        "Philly times are local wall-clock times: read as UTC (a DST change shifts an hour)"
    )
    for index, entry in enumerate(doc):
        with reading.row(f"{where}: job [{index}]"):
            job = _job(entry, reading)
            if job is not None:
                reading.add(job)


def _job(entry: Any, reading: Reading) -> TraceJob | None:
    if not isinstance(entry, dict):
        raise SpecError("job", type(entry).__name__, "a JSON object")
    job_id = entry.get("jobid")
    if not isinstance(job_id, str) or not job_id:
        raise SpecError("jobid", job_id, "a job id")
    attempts = entry.get("attempts") or []
    if not isinstance(attempts, list) or len(attempts) > _MAX_ATTEMPTS:
        raise SpecError("attempts", type(attempts).__name__, f"a list of at most {_MAX_ATTEMPTS}")
    ran = 0.0
    gpus = 0
    for i, attempt in enumerate(attempts):
        if not isinstance(attempt, dict):
            raise SpecError(f"attempts[{i}]", attempt, "a JSON object")
        start, end = attempt.get("start_time"), attempt.get("end_time")
        if start is None or end is None:
            continue  # never started, or still running when the trace ended
        ran += seconds(end, f"attempts[{i}].end_time") - seconds(start, f"attempts[{i}].start_time")
        gpus = _gpus(attempt.get("detail") or [], i)
    if ran <= 0:
        reading.skip("never ran")
        return None
    if gpus == 0:
        reading.skip("no GPUs")
        return None
    status = entry.get("status")
    user = entry.get("user")
    return TraceJob(
        job_id=job_id,
        arrival_s=seconds(entry.get("submitted_time"), "submitted_time"),
        gpus=gpus,
        duration_s=duration(ran, "attempts"),
        user=user if isinstance(user, str) else "",
        status=status if isinstance(status, str) else "",
    )


def _gpus(detail: Any, attempt: int) -> int:
    if not isinstance(detail, list):
        raise SpecError(f"attempts[{attempt}].detail", type(detail).__name__, "a list")
    total = 0
    for machine in detail:
        gpus = machine.get("gpus") if isinstance(machine, dict) else None
        if not isinstance(gpus, list):
            raise SpecError(f"attempts[{attempt}].detail.gpus", gpus, "a list of GPU names")
        total += len(gpus)
    if total > MAX_WORKERS:
        raise SpecError(f"attempts[{attempt}].detail", total, f"at most {MAX_WORKERS} GPUs")
    return total
