"""CSV traces read through a column mapping: any CSV (``--format csv``) and Helios.

A mapping binds each trace field to a column of the file: ``arrival_s`` and ``duration_s``
are required, the rest optional. Without ``--column FIELD=COLUMN`` a field reads the column
of its own name. Times are seconds or date-times (see :func:`~mlsched.workloads.traces.records.seconds`);
a run time of 0 means the job never ran (skipped), and a job with 0 GPUs is a CPU job
(skipped). Helios (``cluster_log.csv`` of the SenseTime Helios traces) is the same reader
with its columns bound.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from mlsched.core.errors import SpecError
from mlsched.workloads.traces.records import (
    Reading,
    TraceJob,
    duration,
    gpu_count,
    number,
    open_text,
    seconds,
)

__all__ = ["FIELDS", "HELIOS_COLUMNS", "parse_columns", "read_columns"]

#: Trace field -> (required, meaning), for --column and the docs.
FIELDS: Mapping[str, tuple[bool, str]] = {
    "arrival_s": (True, "submit time: seconds or a date-time"),
    "duration_s": (True, "run time in seconds on its GPUs"),
    "job_id": (False, "job id (default: the row number)"),
    "gpus": (False, "GPUs the job ran with (default 1)"),
    "model": (False, "model name (kept for reports; speeds stay per job)"),
    "iterations": (False, "iterations run (default: one per second of run time)"),
    "user": (False, "user name (users are counted in the notes)"),
    "gpu_type": (False, "GPU type it ran on: the job is pinned to it"),
    "priority": (False, "weight of the job in weighted policies"),
    "status": (False, "final state (counted in the notes)"),
}

HELIOS_COLUMNS: Mapping[str, str] = {
    "job_id": "job_id",
    "arrival_s": "submit_time",
    "duration_s": "duration",
    "gpus": "gpu_num",
    "user": "user",
    "status": "state",
}


def parse_columns(pairs: Sequence[str]) -> dict[str, str]:
    """``FIELD=COLUMN`` pairs as a mapping; unknown fields and repeats are refused."""
    out: dict[str, str] = {}
    for pair in pairs:
        field, sep, column = pair.partition("=")
        field, column = field.strip(), column.strip()
        if not sep or not field or not column:
            raise SpecError("--column", pair, "FIELD=COLUMN, e.g. arrival_s=submit_time")
        if field not in FIELDS:
            raise SpecError("--column", field, f"a trace field: {', '.join(FIELDS)}")
        if field in out:
            raise SpecError("--column", pair, f"each field once ({field}={out[field]} given)")
        out[field] = column
    return out


def _bind(header: Sequence[str], given: Mapping[str, str], where: str) -> dict[str, int]:
    """Field -> column index: the given columns, else a column named as the field."""
    index = {name.strip(): i for i, name in enumerate(header)}
    bound: dict[str, int] = {}
    for field, column in given.items():
        if column not in index:
            raise SpecError(
                f"--column {field}",
                column,
                f"a column of the file: {', '.join(index)}",
                where=where,
            )
        bound[field] = index[column]
    for field in FIELDS:
        if field not in bound and field in index:
            bound[field] = index[field]
    missing = [f for f, (required, _) in FIELDS.items() if required and f not in bound]
    if missing:
        raise SpecError(
            f"--column {missing[0]}",
            None,
            f"the column holding {FIELDS[missing[0]][1]} (columns: {', '.join(index)})",
            where=where,
        )
    return bound


def read_columns(path: Path, reading: Reading, given: Mapping[str, str]) -> None:
    """Add the jobs of a CSV trace, read through the mapping ``given``."""
    where = str(path)
    with open_text(path, "trace") as handle:
        first = handle.readline()
        delimiter = "\t" if "\t" in first and "," not in first else ","
        rows = csv.reader(_chain(first, handle), delimiter=delimiter)
        try:
            header = next(rows)
        except StopIteration:
            raise SpecError(
                "header", None, "a header row naming the columns", where=where
            ) from None
        bound = _bind(header, given, where)
        unbound = [f for f in ("job_id", "gpus", "iterations") if f not in bound]
        if "gpus" in unbound:
            reading.assume("no GPU column: every job ran on 1 GPU")
        if "iterations" in unbound:
            reading.assume("no iteration counts: one iteration per second of run time")
        try:
            for line, cells in enumerate(rows, start=2):
                if not cells:
                    continue
                with reading.row(f"{where}: line {line}"):
                    job = _job(cells, bound, header, reading)
                    if job is not None:
                        reading.add(job)
        except csv.Error as err:
            raise SpecError("row", str(err)[:120], "well-formed CSV", where=where) from None


def _chain(first: str, rest: Iterable[str]) -> Iterable[str]:
    yield first
    yield from rest


def _job(
    cells: Sequence[str], bound: Mapping[str, int], header: Sequence[str], reading: Reading
) -> TraceJob | None:
    if len(cells) != len(header):
        raise SpecError("row", f"{len(cells)} cells", f"{len(header)} cells")

    def cell(field: str) -> str:
        i = bound.get(field)
        return cells[i].strip() if i is not None else ""

    def required(field: str) -> str:
        text = cell(field)
        if not text:
            raise SpecError(header[bound[field]], text, FIELDS[field][1])
        return text

    name = {f: header[i] for f, i in bound.items()}
    gpus = gpu_count(cell("gpus"), name.get("gpus", "gpus")) if cell("gpus") else 1
    run = seconds(required("duration_s"), name["duration_s"])
    arrival = seconds(required("arrival_s"), name["arrival_s"])
    if gpus == 0:
        reading.skip("no GPUs")
        return None
    if run == 0:
        reading.skip("never ran")
        return None
    text = cell("iterations")
    iterations = (
        int(number(text, name["iterations"], low=1, high=1e12, integer=True)) if text else None
    )
    priority = cell("priority")
    return TraceJob(
        job_id=cell("job_id") or f"job-{reading.rows:06d}",
        arrival_s=arrival,
        gpus=gpus,
        duration_s=duration(run, name["duration_s"]),
        iterations=iterations,
        model=cell("model"),
        user=cell("user"),
        gpu_type=cell("gpu_type") or None,
        priority=number(priority, name["priority"], low=0, high=1e6) if priority else None,
        status=cell("status"),
    )
