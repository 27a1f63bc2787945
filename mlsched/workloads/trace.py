"""Workload files: YAML or JSON documents, and CSV job traces (one job per row).

A YAML/JSON workload is a mapping::

    name: my-mix              # optional (default: the file's stem)
    description: ...          # optional
    horizon_slots: 40         # optional (default: open-ended)
    slot_seconds: 60          # optional (default 3600)
    runtime: {ps_sync: ps_sync}   # optional job kind -> runtime family
    cluster: {servers: [...], topology: {...}}
    notes: {...}              # optional: how the workload was made (trace import)
    jobs: [ {job_id: a, ...}, ... ]   # JobSpec.from_dict fields, or the path of a CSV trace
                                      # or of a JSON list of jobs

A CSV trace has one job per row; columns are JobSpec fields and nested fields are dotted
(``worker.gpu``, ``utility.kind``, ``worker_types.big.gpu``). Empty cells mean "not given".
Every error is a :class:`SpecError` naming the file, the row (CSV) or job index and the
field. A file is loaded whole or not at all.
"""

from __future__ import annotations

import csv
import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from mlsched.core.cluster import Cluster
from mlsched.core.documents import load_document
from mlsched.core.errors import SpecError
from mlsched.core.fields import check_keys, req_int, req_mapping
from mlsched.core.job import JobSpec
from mlsched.core.limits import MAX_DOCUMENT_BYTES
from mlsched.workloads.base import (
    DEFAULT_SLOT_SECONDS,
    Workload,
    check_runtime_families,
)

__all__ = [
    "load_cluster_file",
    "load_trace_csv",
    "load_workload_file",
    "save_workload",
    "write_trace_csv",
]

log = logging.getLogger(__name__)

_TOP_KEYS = (
    "name",
    "description",
    "horizon_slots",
    "slot_seconds",
    "runtime",
    "cluster",
    "notes",
    "jobs",
)
_JOB_FIELDS = frozenset(f.name for f in fields(JobSpec))
#: Workload files (a simulator's input, not a request) may be this many times larger than a
#: submitted job document: paper-scale traces hold tens of thousands of jobs.
WORKLOAD_SIZE_FACTOR = 64
#: Largest YAML/JSON workload file, bytes (a larger job set goes in a CSV beside it).
WORKLOAD_LIMIT = MAX_DOCUMENT_BYTES * WORKLOAD_SIZE_FACTOR


def _read_document(path: Path) -> Any:
    """Parse a YAML or JSON file within the document limits; errors name the file."""
    try:
        with path.open("rb") as fh:
            data = fh.read(WORKLOAD_LIMIT + 1)
    except OSError as err:
        raise SpecError(
            "file", str(path), f"a readable file ({err.strerror})", where=str(path)
        ) from None
    return load_document(
        data, where=str(path), json_only=path.suffix.lower() == ".json", limit=WORKLOAD_LIMIT
    )


def load_cluster_file(path: str | Path) -> Cluster:
    """A cluster from a YAML/JSON file: the cluster mapping itself or a workload file."""
    p = Path(path)
    doc = _read_document(p)
    try:
        data = req_mapping(doc, "cluster")
        if "cluster" in data:
            data = data["cluster"]
        return Cluster.from_dict(data)
    except SpecError as err:
        raise err.at(str(p), field_prefix="cluster") from None


def load_workload_file(
    path: str | Path, *, cluster: Cluster | str | Path | None = None
) -> Workload:
    """Load a YAML, JSON or CSV workload file (see the module docstring).

    A CSV trace holds jobs only: its cluster is ``cluster`` (a Cluster or a file holding
    one). For a YAML/JSON file ``cluster`` replaces the file's own cluster.
    """
    p = Path(path)
    suffix = p.suffix.lower()
    if not p.exists():
        raise SpecError("workload", str(p), "an existing file or a built-in workload name")
    given = _resolve_cluster(cluster)
    if suffix == ".csv":
        # The rows first: a trace of another shape is told about `trace import` whether
        # or not a cluster was given.
        jobs = tuple(load_trace_csv(p))
        if given is None:
            raise SpecError(
                "cluster",
                None,
                "a cluster for the CSV trace (pass --cluster "
                "FILE, or reference the CSV from a YAML workload: jobs: FILE.csv)",
                where=str(p),
            )
        return Workload(
            name=p.stem,
            cluster=given,
            jobs=jobs,
            description=f"trace {p.name}",
            notes={"slot_seconds_given": False},
        )
    if suffix not in (".yaml", ".yml", ".json"):
        raise SpecError("workload", str(p), "a .yaml, .yml, .json or .csv file")
    return _from_document(p, _read_document(p), given)


def _resolve_cluster(cluster: Cluster | str | Path | None) -> Cluster | None:
    if cluster is None or isinstance(cluster, Cluster):
        return cluster
    return load_cluster_file(cluster)


def _from_document(path: Path, doc: Any, given: Cluster | None) -> Workload:
    where = str(path)
    try:
        data = req_mapping(doc, "")
    except SpecError:
        raise SpecError("document", doc, "a mapping with cluster: and jobs:", where=where) from None
    try:
        check_keys(data, _TOP_KEYS, "")
        if given is not None:
            cluster = given
        elif "cluster" not in data:
            raise SpecError("cluster", None, "a cluster mapping (servers: [...])")
        else:
            try:
                cluster = Cluster.from_dict(data["cluster"])
            except SpecError as err:
                raise err.at("", field_prefix="cluster") from None
        horizon = data.get("horizon_slots")
        if horizon is not None:
            horizon = req_int(data, "horizon_slots", "", minimum=1)
        slot_seconds = data.get("slot_seconds", DEFAULT_SLOT_SECONDS)
        if (
            isinstance(slot_seconds, bool)
            or not isinstance(slot_seconds, (int, float))
            or not slot_seconds > 0
        ):
            raise SpecError("slot_seconds", slot_seconds, "a number > 0")
        runtime = data.get("runtime") or {}
        req_mapping(runtime, "runtime")
        check_runtime_families(runtime)
        name = data.get("name", path.stem)
        if not isinstance(name, str) or not name:
            raise SpecError("name", name, "a non-empty string")
        description = data.get("description", "")
        if not isinstance(description, str):
            raise SpecError("description", description, "a string")
        notes = dict(req_mapping(data.get("notes") or {}, "notes"))
    except SpecError as err:
        raise _located(err, where) from None
    raw_jobs = data.get("jobs")
    if isinstance(raw_jobs, str):
        jobs_path = path.parent / raw_jobs if not Path(raw_jobs).is_absolute() else Path(raw_jobs)
        if jobs_path.suffix.lower() == ".json":  # a JSON list of jobs: loads fastest
            jobs = _jobs_from_list(_read_document(jobs_path), str(jobs_path))
        else:
            jobs = load_trace_csv(jobs_path)
    else:
        jobs = _jobs_from_list(raw_jobs, where)
    try:
        return Workload(
            name=name,
            cluster=cluster,
            jobs=tuple(jobs),
            horizon_slots=horizon,
            slot_seconds=float(slot_seconds),
            runtime=dict(runtime),
            description=description,
            notes={**notes, "slot_seconds_given": "slot_seconds" in data},
        )
    except SpecError as err:
        raise _located(err, where) from None


def _located(err: SpecError, where: str) -> SpecError:
    return SpecError(
        err.field, err.value, err.expected, where=f"{where}: {err.where}" if err.where else where
    )


def _jobs_from_list(raw: Any, where: str) -> list[JobSpec]:
    if not isinstance(raw, Sequence) or isinstance(raw, (str, bytes)):
        raise SpecError("jobs", raw, "a list of job specs or the path of a CSV trace", where=where)
    jobs: list[JobSpec] = []
    seen: dict[str, int] = {}
    for i, entry in enumerate(raw):
        try:
            job = JobSpec.from_dict(entry, f"jobs[{i}]")
        except SpecError as err:
            raise _located(err, where) from None
        if job.job_id in seen:
            raise SpecError(
                f"jobs[{i}].job_id",
                job.job_id,
                f"a job id used only once (also jobs[{seen[job.job_id]}])",
                where=where,
            )
        seen[job.job_id] = i
        jobs.append(job)
    return jobs


# CSV ------------------------------------------------------------------------------------
#: Columns whose cells are text; every other column holds numbers (or true/false).
_TEXT_COLUMNS = frozenset(
    {"job_id", "model", "profile", "arch", "sync", "gpu_type", "utility.kind"}
    | {"training.dataset", "training.data_path"}
)
_INT = re.compile(r"[+-]?[0-9]+")
_MAX_CELL = 4096


def _cell(column: str, text: str) -> Any:
    """A CSV cell as the typed value the job schema expects: text columns stay text, and
    numbers are parsed here (a cell "16" is the number 16); what is neither a number nor
    true/false in a numeric column is refused naming the column."""
    if len(text) > _MAX_CELL:
        raise SpecError(column, text, f"a cell of at most {_MAX_CELL} characters")
    if column in _TEXT_COLUMNS:
        return text
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if _INT.fullmatch(text):
        return int(text)
    try:
        return float(text)
    except ValueError:
        raise SpecError(column, text, "a number") from None


def _nest(row: Mapping[str, str]) -> dict[str, Any]:
    """Dotted columns -> nested, typed mappings; empty cells are dropped."""
    out: dict[str, Any] = {}
    for column, cell in row.items():
        if cell is None or cell.strip() == "":
            continue
        parts = column.split(".")
        node = out
        for part in parts[:-1]:
            nxt = node.setdefault(part, {})
            if not isinstance(nxt, dict):
                raise SpecError(
                    column, cell, f"no value in column {part!r} when {column!r} is given"
                )
            node = nxt
        if isinstance(node.get(parts[-1]), dict):
            raise SpecError(column, cell, f"no value when columns {column}.* are given")
        node[parts[-1]] = _cell(column, cell.strip())
    return out


def load_trace_csv(path: str | Path) -> list[JobSpec]:
    """Jobs from a CSV trace, one per row; errors name the file, row, line and field."""
    p = Path(path)
    where = str(p)
    try:
        handle = p.open(newline="", encoding="utf-8")
    except OSError as err:
        raise SpecError(
            "file", where, f"a readable CSV file ({err.strerror})", where=where
        ) from None
    with handle:
        try:
            return _read_rows(handle, where)
        except UnicodeDecodeError as err:
            raise SpecError(
                "file", f"byte {err.start} of a block", "UTF-8 text", where=where
            ) from None
        except csv.Error as err:
            raise SpecError("row", str(err)[:120], "well-formed CSV", where=where) from None


def _read_rows(handle: Any, where: str) -> list[JobSpec]:
    reader = csv.DictReader(handle)  # a cell a short row does not reach reads None
    header = reader.fieldnames
    if not header:
        raise SpecError("header", None, "a header row naming JobSpec fields", where=where)
    duplicated = sorted({c for c in header if header.count(c) > 1})
    if duplicated:
        raise SpecError(f"column {duplicated[0]!r}", duplicated[0], "each column once", where=where)
    unknown = [c for c in header if (c or "").split(".")[0] not in _JOB_FIELDS]
    if unknown:
        shown = ", ".join(repr(c[:40]) for c in unknown[:12])
        more = f" and {len(unknown) - 12} more" if len(unknown) > 12 else ""
        raise SpecError(
            f"column {unknown[0]!r}",
            unknown[0],
            f"JobSpec fields only (docs/workloads.md); unknown columns: {shown}{more}. "
            "For a trace of another shape: mlsched trace import FILE --format csv "
            "--column arrival_s=COLUMN --column duration_s=COLUMN --out W.yaml "
            "(docs/traces.md)",
            where=where,
        )
    jobs: list[JobSpec] = []
    seen: dict[str, int] = {}
    for index, row in enumerate(reader, start=1):
        loc = f"{where}: row {index} (line {reader.line_num})"
        if None in row:
            raise SpecError("row", row[None], f"at most {len(header)} cells", where=loc)
        if any(v is None for v in row.values()):
            cells = sum(1 for v in row.values() if v is not None)
            raise SpecError("row", f"{cells} cells", f"{len(header)} cells", where=loc)
        try:
            job = JobSpec.from_dict(_nest(row))
        except SpecError as err:
            raise _located(err, loc) from None
        if job.job_id in seen:
            raise SpecError(
                "job_id",
                job.job_id,
                f"a job id used only once (also row {seen[job.job_id]})",
                where=loc,
            )
        seen[job.job_id] = index
        jobs.append(job)
    if not jobs:
        log.warning("[workloads] trace %s holds no jobs", where)
    return jobs


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping):
        for k, v in value.items():
            _flatten(v, f"{prefix}.{k}" if prefix else str(k), out)
    else:
        out[prefix] = value


def write_trace_csv(jobs: Iterable[JobSpec], path: str | Path) -> Path:
    """Write jobs as a CSV trace that :func:`load_trace_csv` reads back unchanged."""
    rows: list[dict[str, Any]] = []
    columns: list[str] = []
    for job in jobs:
        flat: dict[str, Any] = {}
        _flatten(job.to_dict(), "", flat)
        for column in flat:
            if column not in columns:
                columns.append(column)
        rows.append(flat)
    p = Path(path)
    with p.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: repr(v) if isinstance(v, float) else v for k, v in row.items()})
    return p


def save_workload(workload: Workload, path: str | Path) -> Path:
    """Write a workload as YAML (.yaml/.yml) or JSON (.json) that loads back unchanged."""
    p = Path(path)
    data = workload.to_dict()
    if p.suffix.lower() == ".json":
        p.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    elif p.suffix.lower() in (".yaml", ".yml"):
        import yaml

        p.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    else:
        raise SpecError("path", str(p), "a .yaml, .yml or .json file")
    return p
