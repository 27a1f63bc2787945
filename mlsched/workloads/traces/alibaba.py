"""Alibaba PAI's 2020 GPU cluster trace (alibaba/clusterdata, cluster-trace-gpu-v2020).

Two tables, CSV without a header as published (a header row is accepted too):
``pai_job_table.csv`` (job_name, inst_id, user, status, start_time, end_time: the job's
submission and end) and ``pai_task_table.csv`` (job_name, task_name, inst_num, status,
start_time, end_time, plan_cpu, plan_mem, plan_gpu, gpu_type). ``plan_gpu`` is in percent
of one GPU (50: half a GPU). A job's workers are the instances of its GPU tasks, each taking
the largest ``plan_gpu`` of them; its run time spans its GPU tasks' first start to last
end; its GPU type is that of its largest GPU task (``MISC``: none). Jobs without GPU tasks,
or whose GPU tasks never started or never ended, are skipped. ``pai_group_tag_table.csv``
beside them, when there, names each job's workload (bert, resnet, ...) by ``inst_id``.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from mlsched.core.errors import SpecError
from mlsched.core.limits import MAX_WORKERS
from mlsched.workloads.traces.records import Reading, TraceJob, duration, number, open_text, seconds

__all__ = ["JOB_COLUMNS", "TASK_COLUMNS", "read_alibaba", "table_paths"]

JOB_COLUMNS = ("job_name", "inst_id", "user", "status", "start_time", "end_time")
TASK_COLUMNS = (
    "job_name",
    "task_name",
    "inst_num",
    "status",
    "start_time",
    "end_time",
    "plan_cpu",
    "plan_mem",
    "plan_gpu",
    "gpu_type",
)
_TAG_COLUMNS = ("inst_id", "user", "gpu_type_spec", "group", "workload")
JOB_TABLE, TASK_TABLE, TAG_TABLE = (
    "pai_job_table.csv",
    "pai_task_table.csv",
    "pai_group_tag_table.csv",
)


@dataclass
class _Tasks:
    workers: int = 0
    share: float = 0.0
    start: float = float("inf")
    end: float = float("-inf")
    unfinished: bool = False
    gpu_type: str = ""
    biggest: int = 0


def table_paths(path: Path, tasks: Path | None) -> tuple[Path, Path]:
    """(job table, task table) from a directory holding both or the job table's path."""
    if path.is_dir():
        return path / JOB_TABLE, tasks or path / TASK_TABLE
    return path, tasks or path.parent / TASK_TABLE


def _rows(path: Path, columns: Sequence[str], what: str) -> Iterator[tuple[str, dict[str, str]]]:
    where = str(path)
    with open_text(path, what) as handle:
        try:
            for line, cells in enumerate(csv.reader(handle), start=1):
                if not cells or (line == 1 and cells[0].strip() == columns[0]):
                    continue  # blank line, or the header row of a re-exported table
                loc = f"{where}: line {line}"
                if len(cells) != len(columns):
                    raise SpecError(
                        "row",
                        f"{len(cells)} cells",
                        f"{len(columns)}: {', '.join(columns)}",
                        where=loc,
                    )
                yield loc, dict(zip(columns, (c.strip() for c in cells), strict=True))
        except csv.Error as err:
            raise SpecError("row", str(err)[:120], "well-formed CSV", where=where) from None


def read_alibaba(path: Path, tasks_path: Path, reading: Reading) -> None:
    """Add the jobs of the job table, sized and timed by the task table."""
    tasks: dict[str, _Tasks] = {}
    for loc, row in _rows(tasks_path, TASK_COLUMNS, "tasks"):
        with reading.row(loc):
            _add_task(tasks, row)
    reading.rows = 0  # count jobs, not tasks
    tags = _tags(path.parent / TAG_TABLE, reading)
    for loc, row in _rows(path, JOB_COLUMNS, "trace"):
        with reading.row(loc):
            job = _job(row, tasks.get(row["job_name"]), tags, reading)
            if job is not None:
                reading.add(job)
    reading.assume("fractional GPUs kept: a worker takes plan_gpu / 100 of a GPU")


def _add_task(tasks: dict[str, _Tasks], row: dict[str, str]) -> None:
    plan = row["plan_gpu"]
    gpu = number(plan, "plan_gpu", low=0, high=100 * MAX_WORKERS) / 100 if plan else 0.0
    if gpu <= 0:
        return  # a CPU task (a parameter server, an evaluator): not a GPU worker
    count = int(number(row["inst_num"] or "1", "inst_num", low=1, high=MAX_WORKERS, integer=True))
    t = tasks.setdefault(row["job_name"], _Tasks())
    t.workers += count
    t.share = max(t.share, gpu)
    if not row["start_time"] or not row["end_time"]:
        t.unfinished = True
        return
    t.start = min(t.start, seconds(row["start_time"], "start_time"))
    t.end = max(t.end, seconds(row["end_time"], "end_time"))
    if count > t.biggest:
        t.biggest, t.gpu_type = count, row["gpu_type"]


def _tags(path: Path, reading: Reading) -> dict[str, str]:
    if not path.is_file():
        reading.assume(f"no {TAG_TABLE} beside the job table: model names unknown")
        return {}
    out: dict[str, str] = {}
    for _, row in _rows(path, _TAG_COLUMNS, "tags"):
        if row["workload"]:
            out[row["inst_id"]] = row["workload"]
    return out


def _job(
    row: dict[str, str], t: _Tasks | None, tags: dict[str, str], reading: Reading
) -> TraceJob | None:
    if t is None or t.workers == 0:
        reading.skip("no GPUs")
        return None
    if t.unfinished or t.end <= t.start:
        reading.skip("never ran")
        return None
    if t.workers > MAX_WORKERS:
        raise SpecError("inst_num", t.workers, f"at most {MAX_WORKERS} GPU workers")
    gpu_type = t.gpu_type if t.gpu_type and t.gpu_type != "MISC" else None
    return TraceJob(
        job_id=row["job_name"],
        arrival_s=seconds(row["start_time"], "start_time"),
        gpus=t.workers,
        duration_s=duration(t.end - t.start, "end_time"),
        model=tags.get(row["inst_id"], ""),
        user=row["user"],
        gpu_type=gpu_type,
        gpu_share=t.share,
        status=row["status"],
    )
