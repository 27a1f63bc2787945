"""Gavel's trace files and its per-job-type throughput table.

A trace line is tab-separated: job type, command, working directory, num-steps argument,
needs-data-dir flag, total steps, scale factor (GPUs), priority weight, SLO (-1: none),
arrival time (s). The throughput table (``simulation_throughputs.json``) maps a GPU type to
``"('<job type>', <scale factor>)"`` keys, each holding ``null``: the job's steps per
second alone on that type (the other keys are co-located pairs, which mlsched does not
model). Each job keeps the table's speed on every GPU type, so a cluster of several types
runs it at the speed of the type it lands on.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from mlsched.core.errors import SpecError
from mlsched.workloads.traces.records import (
    Reading,
    TraceJob,
    gpu_count,
    number,
    open_text,
    seconds,
)

__all__ = ["read_gavel", "read_throughputs"]

_FIELDS = (
    "job_type",
    "command",
    "working_directory",
    "num_steps_arg",
    "needs_data_dir",
    "total_steps",
    "scale_factor",
    "priority_weight",
    "SLO",
    "arrival_time",
)
_TYPE, _STEPS, _SCALE, _PRIORITY, _SLO, _ARRIVAL = (
    _FIELDS.index(f)
    for f in (
        "job_type",
        "total_steps",
        "scale_factor",
        "priority_weight",
        "SLO",
        "arrival_time",
    )
)
_KEY = re.compile(r"\('(?P<type>[^']{1,200})', (?P<scale>[0-9]{1,6})\)")
#: The table's file name in Gavel's repository, looked for beside the trace.
TABLE_NAME = "simulation_throughputs.json"
_MAX_TABLE_BYTES = 64 << 20

Table = dict[tuple[str, int], dict[str, float]]


def read_throughputs(path: Path, reading: Reading) -> Table:
    """(job type, scale factor) -> GPU type -> steps per second alone.

    GPU types named ``*_unconsolidated`` (Gavel's placement-sensitivity variants) are left
    out: mlsched places the workers itself.
    """
    where = str(path)
    with open_text(path, "throughputs") as handle:
        text = handle.read(_MAX_TABLE_BYTES + 1)
    if len(text) > _MAX_TABLE_BYTES:
        raise SpecError("throughputs", where, f"a table of at most {_MAX_TABLE_BYTES >> 20} MiB")
    try:
        doc = json.loads(text)
    except ValueError as err:
        raise SpecError("throughputs", str(err)[:80], "a JSON document", where=where) from None
    if not isinstance(doc, dict) or not doc:
        raise SpecError("throughputs", type(doc).__name__, "a mapping of GPU type", where=where)
    table: Table = {}
    for gpu_type, entries in doc.items():
        if not isinstance(gpu_type, str) or gpu_type.endswith("_unconsolidated"):
            continue
        if not isinstance(entries, dict):
            raise SpecError(gpu_type, type(entries).__name__, "a mapping", where=where)
        for key, value in entries.items():
            m = _KEY.fullmatch(key)
            if m is None:
                raise SpecError(
                    f"{gpu_type}.{key}"[:120], key, "a key ('<job type>', <scale>)", where=where
                )
            alone = value.get("null") if isinstance(value, dict) else None
            rate = number(alone, f"{gpu_type}.{key}.null", low=0, high=1e9)
            if rate > 0:
                table.setdefault((m["type"], int(m["scale"])), {})[gpu_type] = rate
    reading.assume(
        f"speeds from {path.name}: steps/s of each job type alone on "
        f"{', '.join(sorted({t for v in table.values() for t in v}))} (co-location not modelled)"
    )
    return table


def read_gavel(path: Path, reading: Reading, table: Table) -> None:
    """Add the trace's jobs to ``reading``, with the table's per-type step times."""
    where = str(path)
    slo = 0
    steps: dict[tuple[str, int], dict[str, float]] = {}  # a job type's step times, made once
    with open_text(path, "trace") as handle:
        for number_, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            reading.rows += 1  # Reading.row's work inline: a row's location is made on error
            try:
                cells = line.rstrip("\r\n").split("\t")
                if len(cells) != len(_FIELDS):
                    raise SpecError(
                        "fields",
                        len(cells),
                        f"{len(_FIELDS)} tab-separated fields: " + ", ".join(_FIELDS),
                    )
                job = _job(cells, reading, table, steps)
                if job is not None:
                    slo += cells[_SLO].strip() not in ("-1", "-1.0", "-1.000000", "")
                    reading.add(job)
            except SpecError as err:
                reading.invalid(err, f"{where}: line {number_}")
    if slo:
        reading.assume(f"SLOs of {slo} jobs ignored (mlsched utilities are not SLOs)")


def _job(
    cells: list[str],
    reading: Reading,
    table: Table,
    steps: dict[tuple[str, int], dict[str, float]],
) -> TraceJob | None:
    job_type = cells[_TYPE].strip()
    iterations = int(number(cells[_STEPS], "total_steps", low=1, high=1e12, integer=True))
    scale = gpu_count(cells[_SCALE], "scale_factor")
    if scale == 0:
        reading.skip("no GPUs")
        return None
    kind = (job_type, scale)
    step_s = steps.get(kind)
    if step_s is None:
        rates = table.get(kind)
        if not rates:
            raise SpecError(
                "job_type",
                f"{job_type} x{scale}",
                "a job type and scale factor in the throughput table",
            )
        # Shared by the type's jobs: a trace job's mapping is read, never changed.
        step_s = steps[kind] = {t: 1.0 / r for t, r in sorted(rates.items())}
    return TraceJob(
        job_id=f"gavel-{reading.rows - 1:05d}",
        arrival_s=seconds(cells[_ARRIVAL], "arrival_time"),
        gpus=scale,
        iterations=iterations,
        model=job_type,
        priority=number(cells[_PRIORITY], "priority_weight", low=0, high=1e6),
        step_s_by_type=step_s,
    )


def find_table(trace: Path, given: Path | None) -> Path:
    """The throughput table: ``given``, else Gavel's file name beside the trace."""
    if given is not None:
        return given
    beside = trace.parent / TABLE_NAME
    if beside.is_file():
        return beside
    raise SpecError(
        "throughputs",
        None,
        f"the throughput table of the gavel format (--throughputs FILE, or {TABLE_NAME} "
        "beside the trace)",
    )
