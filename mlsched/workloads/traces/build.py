"""Trace jobs -> a workload: slots chosen, each job's own speed kept, assumptions noted.

Every imported job is a rigid synchronous all-reduce job (its trace's GPU count, no more and
no fewer) with no gradient traffic in the model: the trace's run time already includes the
job's communication, so it takes that long wherever it is placed. A job with a run time
runs ``iterations`` steps of ``duration / iterations`` seconds and has a profile of its own
(the runtime model does not pool it with other jobs); a job with per-GPU-type step times
(Gavel) runs at the speed of the GPU type it lands on and pools with its job type.
Arrivals are rounded up to the next slot boundary: a job never starts before it arrived.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mlsched.core.cluster import Cluster
from mlsched.core.errors import SpecError
from mlsched.core.ids import is_id
from mlsched.core.job import Arch, JobSpec, SyncMode
from mlsched.core.limits import JOB_LIMITS
from mlsched.core.resources import ResourceVector
from mlsched.workloads.traces.records import Reading, TraceJob

__all__ = ["SLOT_CHOICES", "Imported", "build", "choose_slot"]

#: Slot lengths the importer picks from (seconds).
SLOT_CHOICES = (60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0, 21600.0, 86400.0)
#: A job of median run time should span at least this many slots...
SLOTS_PER_MEDIAN_JOB = 10
#: ...unless the trace would then take more slots than this to replay.
MAX_SLOTS = 200_000
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass
class Imported:
    """The jobs, the settings chosen and what was assumed, ready to write."""

    name: str
    slot_seconds: float
    jobs: list[JobSpec]
    cluster: Cluster | None
    notes: dict[str, Any]
    summary: dict[str, Any] = field(default_factory=dict)

    def document(self) -> dict[str, Any]:
        """The workload-file form (docs/workloads.md), with the notes."""
        out: dict[str, Any] = {
            "name": self.name,
            "description": self.notes["source"]["description"],
            "slot_seconds": self.slot_seconds,
        }
        if self.cluster is not None:
            out["cluster"] = self.cluster.to_dict()
        out["notes"] = self.notes
        out["jobs"] = [j.to_dict() for j in self.jobs]
        return out


def _median(values: Sequence[float]) -> float:
    """``statistics.median`` (the mean of the middle two of an even count), without
    importing it and ``fractions`` for one call."""
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        raise ValueError("median of no values")
    if n % 2:
        return ordered[n // 2]
    return (ordered[n // 2 - 1] + ordered[n // 2]) / 2


def choose_slot(durations: Sequence[float], span_s: float) -> tuple[float, str]:
    """The largest of :data:`SLOT_CHOICES` that splits a median job into at least
    :data:`SLOTS_PER_MEDIAN_JOB` slots, made longer while the replay needs more than
    :data:`MAX_SLOTS` slots; with the reason, for the notes."""
    median = _median(durations) if durations else SLOT_CHOICES[-1]
    fits = [s for s in SLOT_CHOICES if s * SLOTS_PER_MEDIAN_JOB <= median]
    slot = fits[-1] if fits else SLOT_CHOICES[0]
    longest = max(durations, default=0.0)
    for s in SLOT_CHOICES:
        if s >= slot and (span_s + longest) / s <= MAX_SLOTS:
            slot = s
            break
    reason = (
        f"chosen: {slot:g} s (median run time {median:g} s = {median / slot:.1f} slots; "
        f"pass --slot-seconds to choose)"
    )
    return slot, reason


def _safe_id(raw: str, used: set[str]) -> str:
    if is_id(raw) and raw not in used:
        return raw
    base = _UNSAFE.sub("-", raw).lstrip(".-")[:100] or "job"
    candidate, n = base, 1
    while candidate in used or not is_id(candidate):
        n += 1
        candidate = f"{base}-{n}"
    return candidate


@functools.lru_cache(maxsize=4096)  # a trace names few models, over many jobs
def _slug(text: str) -> str:
    return _UNSAFE.sub("-", text).strip(".-")[:100] or "unknown"


def _gpu_types(cluster: Cluster | None) -> Counter[str]:
    """GPUs per GPU type in the cluster (servers without a type count as '')."""
    out: Counter[str] = Counter()
    if cluster is None or "gpu" not in cluster.resource_names:
        return out
    for server in cluster.servers:
        out[server.gpu_type or ""] += int(server.capacity["gpu"])
    return out


def _spec(job: TraceJob, job_id: str, arrival_slot: int, pin: bool) -> JobSpec:
    if job.step_s_by_type:
        by_type = dict(job.step_s_by_type)
        compute_s = max(by_type.values())
        iterations = job.iterations or 1
        profile = None  # one job type, one speed per GPU type: pooling is right
    else:
        assert job.duration_s is not None
        iterations = job.iterations or max(1, math.ceil(job.duration_s))
        compute_s = job.duration_s / iterations
        by_type = {}
        profile = job_id  # a trace run time is the truth for this job alone
    high = JOB_LIMITS["compute_s"].high
    if compute_s > high:
        raise SpecError(
            "iterations", iterations, f"enough iterations for steps of at most {high:g} s"
        )
    return JobSpec(
        job_id=job_id,
        arrival_slot=arrival_slot,
        model=_slug(job.model),
        profile=profile,
        arch=Arch.ALLREDUCE,
        sync=SyncMode.SYNC,
        chunks=job.gpus,
        batches_per_chunk=iterations,
        min_workers=job.gpus,
        requested_workers=job.gpus,
        worker=ResourceVector.parse({"gpu": job.gpu_share}, field="worker"),
        gpu_type=job.gpu_type if pin else None,
        compute_s=compute_s,
        compute_s_by_type=by_type,
        gradient_mb=0.0,
        weight=job.priority if job.priority is not None else 1.0,
    )


def _run_s(job: TraceJob, mix: Mapping[str, float]) -> float:
    """Run time on the cluster's GPU mix (a per-type job: the mix-weighted mean)."""
    if not job.step_s_by_type:
        return job.duration_s or 0.0
    steps = job.iterations or 1
    shares = {t: w for t, w in mix.items() if t in job.step_s_by_type}
    if not shares:
        shares = {t: 1.0 for t in job.step_s_by_type}
    total = sum(shares.values())
    return steps * sum(job.step_s_by_type[t] * w / total for t, w in shares.items())


def build(
    reading: Reading,
    *,
    fmt: str,
    name: str,
    cluster: Cluster | None = None,
    slot_seconds: float | None = None,
    ignore_gpu_type: bool = False,
    limit: int | None = None,
) -> Imported:
    """The workload of ``reading``'s jobs (the first ``limit`` by arrival)."""
    if not reading.jobs:
        raise SpecError(
            "trace", reading.source, "at least one GPU job that ran", where=reading.source
        )
    jobs = sorted(reading.jobs, key=lambda j: j.arrival_s)
    if limit is not None:
        jobs = jobs[:limit]
    mix = _gpu_types(cluster)
    if cluster is not None and not mix:
        raise SpecError(
            "cluster", "no gpu", "a cluster whose servers offer gpu: (trace jobs use GPUs)"
        )
    t0 = jobs[0].arrival_s
    span = jobs[-1].arrival_s - t0
    run = [_run_s(j, mix) for j in jobs]
    if slot_seconds is None:
        slot_seconds, slot_note = choose_slot(run, span)
    else:
        slot_note = f"given: {slot_seconds:g} s"
    pinned = {j.gpu_type for j in jobs if j.gpu_type}
    if pinned and cluster is not None and not ignore_gpu_type:
        missing = sorted(pinned - set(mix))
        if missing:
            raise SpecError(
                "gpu_type",
                ", ".join(missing[:5]),
                f"GPU types the cluster has ({', '.join(sorted(t for t in mix if t)) or 'none'});"
                " or pass --ignore-gpu-type to let jobs run on any GPU",
            )
    used: set[str] = set()
    specs: list[JobSpec] = []
    renamed = 0
    delay = 0.0
    for job in jobs:
        job_id = _safe_id(job.job_id, used)
        renamed += job_id != job.job_id
        used.add(job_id)
        rel = job.arrival_s - t0
        slot = math.ceil(rel / slot_seconds - 1e-9)
        delay += slot * slot_seconds - rel
        try:
            specs.append(_spec(job, job_id, slot, pin=not ignore_gpu_type))
        except SpecError as err:
            raise err.at(f"{reading.source}: job {job.job_id}") from None
    notes = _notes(reading, fmt, jobs, renamed, delay, slot_note, t0, pinned, ignore_gpu_type)
    imported = Imported(name, float(slot_seconds), specs, cluster, notes)
    imported.summary = _summary(jobs, run, span, slot_seconds, mix)
    notes["summary"] = imported.summary
    return imported


def _notes(
    reading: Reading,
    fmt: str,
    jobs: list[TraceJob],
    renamed: int,
    delay: float,
    slot_note: str,
    t0: float,
    pinned: set[str],
    ignore_gpu_type: bool,
) -> dict[str, Any]:
    assumptions = list(reading.assumptions)
    assumptions.append(
        "jobs are rigid synchronous all-reduce jobs on their trace's GPU count, without "
        "gradient traffic in the model (the trace's run time includes communication)"
    )
    assumptions.append(
        f"arrivals rounded up to the next slot boundary (mean delay {delay / len(jobs):.0f} s)"
    )
    if renamed:
        assumptions.append(f"{renamed} job ids made safe or unique ([A-Za-z0-9._-], suffix -N)")
    if pinned:
        assumptions.append(
            "GPU types the trace ran jobs on ignored: jobs run on any GPU"
            if ignore_gpu_type
            else f"jobs pinned to the GPU type they ran on ({', '.join(sorted(pinned)[:6])})"
        )
    users = len({j.user for j in jobs if j.user})
    source: dict[str, Any] = {
        "format": fmt,
        "file": reading.source.rsplit("/", 1)[-1],
        "description": f"{fmt} trace {reading.source.rsplit('/', 1)[-1]}: {len(jobs)} jobs",
        "rows": reading.rows,
        "jobs": len(jobs),
    }
    if reading.skipped:
        source["skipped"] = dict(reading.skipped)
    if reading.errors:
        source["invalid_rows"] = list(reading.errors)
    if reading.statuses:
        source["statuses"] = dict(reading.statuses)
    if users:
        source["users"] = users
    return {
        "source": source,
        "time_origin_s": t0,
        "slot_seconds": slot_note,
        "assumptions": assumptions,
    }


def _summary(
    jobs: list[TraceJob],
    run: list[float],
    span: float,
    slot_seconds: float,
    mix: Mapping[str, float],
) -> dict[str, Any]:
    gpu_hours = sum(j.gpus * j.gpu_share * r for j, r in zip(jobs, run, strict=True)) / 3600
    out: dict[str, Any] = {
        "jobs": len(jobs),
        "span_h": round(span / 3600, 3),
        "slots_spanned": math.ceil(span / slot_seconds),
        "gpu_hours": round(gpu_hours, 3),
        "median_run_s": round(_median(run), 3),
        "max_gpus": max(j.gpus for j in jobs),
    }
    gpus = sum(mix.values())
    if gpus and span > 0:
        out["cluster_gpus"] = gpus
        out["load"] = round(gpu_hours / (gpus * span / 3600), 4)
    return out
