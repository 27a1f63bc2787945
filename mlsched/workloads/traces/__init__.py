"""Public GPU-cluster traces in, mlsched workloads out (``mlsched trace import``).

One reader per source format turns the file into trace jobs (:mod:`.records`);
:mod:`.build` chooses slots, keeps each job's own speed and notes what it assumed; the
result is a workload file that ``mlsched simulate --workload`` runs. docs/traces.md gives
each source's fields and caveats.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from mlsched.core.errors import SpecError

if TYPE_CHECKING:  # the readers import numpy-backed modules: not at CLI start-up
    from mlsched.core.cluster import Cluster
    from mlsched.workloads.traces.build import Imported

__all__ = ["FORMATS", "INLINE_JOBS", "Imported", "import_trace", "write_workload"]

#: Format name -> one-line description.
FORMATS: Mapping[str, str] = {
    "gavel": "Gavel trace file + its throughput table (per-GPU-type speeds)",
    "philly": "Microsoft Philly cluster_job_log (JSON)",
    "alibaba-pai": "Alibaba PAI 2020: pai_job_table.csv + pai_task_table.csv",
    "helios": "SenseTime Helios cluster_log.csv",
    "csv": "any CSV, columns bound with --column FIELD=COLUMN",
}


def import_trace(
    path: str | Path,
    fmt: str,
    *,
    columns: Mapping[str, str] | None = None,
    throughputs: str | Path | None = None,
    tasks: str | Path | None = None,
    cluster: Cluster | None = None,
    slot_seconds: float | None = None,
    ignore_gpu_type: bool = False,
    skip_invalid: bool = False,
    limit: int | None = None,
    name: str | None = None,
) -> Imported:
    """Read ``path`` in format ``fmt`` and build its workload (see :func:`.build.build`)."""
    from mlsched.workloads.traces.build import build
    from mlsched.workloads.traces.records import Reading

    p = Path(path)
    if fmt not in FORMATS:
        raise SpecError("--format", fmt, f"one of {', '.join(FORMATS)}")
    if columns and fmt != "csv":
        raise SpecError("--column", dict(columns), "column bindings only with --format csv")
    if not p.exists():
        raise SpecError("trace", str(p), "an existing file (or directory, for alibaba-pai)")
    reading = Reading(str(p), skip_invalid=skip_invalid)
    if fmt == "gavel":
        from mlsched.workloads.traces.gavel import find_table, read_gavel, read_throughputs

        table = read_throughputs(find_table(p, Path(throughputs) if throughputs else None), reading)
        read_gavel(p, reading, table)
    elif fmt == "philly":
        from mlsched.workloads.traces.philly import read_philly

        read_philly(p, reading)
    elif fmt == "alibaba-pai":
        from mlsched.workloads.traces.alibaba import read_alibaba, table_paths

        jobs, task_table = table_paths(p, Path(tasks) if tasks else None)
        reading.source = str(jobs)
        read_alibaba(jobs, task_table, reading)
    else:
        from mlsched.workloads.traces.columns import HELIOS_COLUMNS, read_columns

        read_columns(p, reading, HELIOS_COLUMNS if fmt == "helios" else dict(columns or {}))
    return build(
        reading,
        fmt=fmt,
        name=name or p.stem,
        cluster=cluster,
        slot_seconds=slot_seconds,
        ignore_gpu_type=ignore_gpu_type,
        limit=limit,
    )


#: A YAML workload with more jobs than this keeps them in a JSON list beside it: the YAML
#: loader (pure Python, for safety) takes seconds over thousands of jobs, JSON a fraction.
INLINE_JOBS = 1000


def write_workload(imported: Imported, out: str | Path) -> list[Path]:
    """Write the workload (``.yaml``/``.yml``/``.json``); the paths written. A YAML file of
    more than :data:`INLINE_JOBS` jobs, or any file larger than a workload file may be,
    keeps its jobs in ``<stem>.jobs.json`` beside it (``jobs: <stem>.jobs.json``), one job
    per line; in ``<stem>.jobs.csv`` when even that list is larger than a document may be."""
    import yaml

    from mlsched.workloads import trace

    p = Path(out)
    suffix = p.suffix.lower()
    if suffix not in (".yaml", ".yml", ".json"):
        raise SpecError("--out", str(p), "a .yaml, .yml or .json file")
    doc = imported.document()

    def dump(data: object) -> str:
        if suffix == ".json":
            return json.dumps(data, indent=1) + "\n"
        dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
        return str(yaml.dump(data, Dumper=dumper, sort_keys=False, width=100))

    text = "" if suffix != ".json" and len(imported.jobs) > INLINE_JOBS else dump(doc)
    written = [p]
    if not text or len(text.encode()) > trace.WORKLOAD_LIMIT:
        lines = ",\n".join(json.dumps(job) for job in doc["jobs"])
        if len(lines) < trace.WORKLOAD_LIMIT:
            beside = p.with_name(f"{p.stem}.jobs.json")
            beside.write_text(f"[\n{lines}\n]\n", encoding="utf-8")
        else:  # beyond a document's size: a CSV trace, which has no such limit
            beside = trace.write_trace_csv(imported.jobs, p.with_name(f"{p.stem}.jobs.csv"))
        doc["jobs"] = beside.name
        text = dump(doc)
        written.append(beside)
    p.write_text(text, encoding="utf-8")
    return written
