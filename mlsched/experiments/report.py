"""Plain-text summary tables for the terminal (simulate, demo, experiment).

Tables are fixed-width text so they read the same in a terminal, a CI log and a test's
captured output; durations are shown in the unit that keeps them short (s, m or h).
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mlsched.engine.summary import Summary

__all__ = [
    "Column",
    "checks_table",
    "experiment_report",
    "format_duration",
    "format_table",
    "metric_table",
    "run_footer",
    "run_header",
    "summary_table",
    "to_json",
    "truth_line",
    "write_jobs_csv",
    "write_json",
    "write_run",
]


def format_duration(seconds: float | None) -> str:
    """``45.0s``, ``12.5m`` or ``10.2h``; ``-`` for no value."""
    if seconds is None:
        return "-"
    if abs(seconds) < 120:
        return f"{seconds:.1f}s"
    if abs(seconds) < 7200:
        return f"{seconds / 60:.1f}m"
    return f"{seconds / 3600:.1f}h"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def _num(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


@dataclass(frozen=True)
class Column:
    """A table column: its header, how to get the cell text from a row, and alignment."""

    header: str
    cell: Callable[[Any], str]
    right: bool = True


def format_table(rows: Sequence[Any], columns: Sequence[Column]) -> str:
    """Rows as an aligned text table with a header rule."""
    cells = [[c.header for c in columns]] + [[c.cell(r) for c in columns] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]

    def line(row: list[str]) -> str:
        parts = [
            (v.rjust(w) if c.right else v.ljust(w))
            for v, w, c in zip(row, widths, columns, strict=True)
        ]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule, *(line(r) for r in cells[1:])])


def _util(name: str) -> Callable[[Summary], str]:
    return lambda s: _pct(s.utilization.get(name)) if name in s.utilization else "-"


def summary_table(summaries: Sequence[Summary]) -> str:
    """One row per run: policy, admitted, completed, utility, JCT, utilization, wall time."""
    columns = [
        Column("policy", lambda s: s.policy, right=False),
        Column("admitted", lambda s: f"{s.admitted}/{s.jobs}"),
        Column("completed", lambda s: f"{s.completed}/{s.jobs}"),
        Column("total utility", lambda s: _num(s.total_utility)),
        Column("avg JCT", lambda s: format_duration(s.avg_jct_s)),
        Column("p99 JCT", lambda s: format_duration(s.p99_jct_s)),
        Column("missed", lambda s: str(s.deadline_misses)),
    ]
    if any(s.quotes for s in summaries):  # a pricing policy ran
        columns.extend(
            [
                Column("revenue", lambda s: _num(s.revenue)),
                Column("accepted", lambda s: _pct(s.acceptance_rate)),
            ]
        )
    names = {n for s in summaries for n in s.utilization}
    columns.extend(
        Column(f"{label} util", _util(name))
        for name, label in (("gpu", "GPU"), ("cpu", "CPU"), ("bw_gbps", "BW"))
        if name in names
    )
    columns.append(Column("wall", lambda s: f"{s.wall_seconds:.2f}s"))
    return format_table(summaries, columns)


def metric_table(
    summary: Mapping[str, Mapping[str, Any]], metrics: Sequence[tuple[str, str]]
) -> str:
    """policy -> metric -> value (an experiment's ``summary``) as a table of ``metrics``
    given as (key, header) pairs; times (keys ending in ``_s``) shown as durations."""

    def cell(key: str) -> Callable[[tuple[str, Mapping[str, Any]]], str]:
        def get(row: tuple[str, Mapping[str, Any]]) -> str:
            value = row[1].get(key)
            if value is None:
                return "-"
            if key == "wall_seconds":
                return f"{float(value):.2f}s"
            if key.endswith("_s"):
                return format_duration(float(value))
            if key.endswith(("_fraction", "_rate")):
                return _pct(float(value))
            return _num(float(value), 1 if isinstance(value, float) else 0)

        return get

    columns = [Column("policy", lambda r: r[0], right=False)]
    columns.extend(Column(header, cell(key)) for key, header in metrics)
    return format_table(list(summary.items()), columns)


def checks_table(checks: Sequence[Mapping[str, Any]]) -> str:
    """An experiment's checks: PASS/FAIL, name and detail."""
    return format_table(
        checks,
        [
            Column("result", lambda c: "PASS" if c.get("passed") else "FAIL", right=False),
            Column("check", lambda c: str(c.get("name", "")), right=False),
            Column("detail", lambda c: str(c.get("detail", "")), right=False),
        ],
    )


def write_jobs_csv(rows: Sequence[Mapping[str, Any]], path: str | Path) -> Path:
    """Per-job rows (:func:`mlsched.engine.summary.job_rows`) as CSV; None is empty."""
    p = Path(path)
    columns = list(rows[0]) if rows else []
    same = all(list(row) == columns for row in rows)  # one run's rows share their keys
    if not same:  # every key of every row, in first-seen order
        columns = list(dict.fromkeys(k for row in rows for k in row))
    with p.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)  # writes None as an empty field
        writer.writerow(columns)
        if same:
            writer.writerows(row.values() for row in rows)
        else:
            writer.writerows([row.get(k) for k in columns] for row in rows)
    return p


def write_json(data: Mapping[str, Any], path: str | Path) -> Path:
    """Pretty JSON with NaN/inf as null (see :func:`to_json`)."""
    p = Path(path)
    p.write_text(json.dumps(to_json(data), indent=2) + "\n", encoding="utf-8")
    return p


def to_json(value: Any) -> Any:
    """JSON-ready copy: numpy scalars to Python, NaN/inf to None, tuples to lists."""
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, np.ndarray):
        return to_json(value.tolist())
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, Path):
        return str(value)
    return value


def run_header(workload: Any, seed: int) -> str:
    """One line saying what a simulate run is about to do."""
    horizon = workload.horizon_slots or "open"
    return (
        f"{workload.name}: {len(workload.jobs)} jobs on {len(workload.cluster)} servers, "
        f"horizon {horizon} slots of {workload.slot_seconds:g} s, seed {seed}"
    )


def truth_line(truth: Any, workload: Any) -> str:
    """One line saying what the simulated truth charges, and what a profile covers."""
    text = (
        f"truth: restart {truth.restart_s:g} s, start-up {truth.startup_s:g} s"
        + ("" if truth.compute_scale == 1 else f", compute x{truth.compute_scale:g}")
        + ("" if truth.comm_scale == 1 else f", communication x{truth.comm_scale:g}")
        + ("" if not truth.noise else f", noise sigma {truth.noise:g}")
    )
    if truth.profile is None:
        return text + "; iterations from the job specs"
    from mlsched.perfmodel.profiled import ProfileLookup

    jobs = {j.job_id: j for j in workload.jobs}
    covered, missing = ProfileLookup(truth.profile).coverage(jobs)
    host = truth.profile.machine.get("hostname", "?")
    text += (
        f"; profile of {host} ({len(truth.profile.cells)} cells) covers {covered} of "
        f"{len(jobs)} jobs (their iterations, start-up and restarts from it)"
    )
    if missing:
        shown = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
        text += f"; the rest run at their specs' speed (no cell for {shown})"
    return text


def run_footer(summary: Summary) -> str:
    """The metrics of one run that the table leaves out."""
    error = "-" if summary.model_error is None else f"{100 * summary.model_error:.1f}%"
    stalled = ", STALLED" if summary.stalled else ""
    return (
        f"slots {summary.slots}, deadline misses {summary.deadline_misses}, restarts "
        f"{summary.restarts} ({summary.restarts_per_job:.2f} per job run), revenue "
        f"{summary.revenue:.2f} (profit {summary.profit:.2f}: no cost model), quotes accepted "
        f"{_pct(summary.acceptance_rate)} of {summary.quotes}, model error {error}{stalled}"
    )


def write_run(
    out_dir: str | Path,
    summary: Summary,
    rows: Sequence[Mapping[str, Any]],
    *,
    workload: Any,
    seed: int,
    truth: Mapping[str, Any],
) -> tuple[Path, Path]:
    """``summary.json`` (the headline keys, then every metric under ``metrics``; times in
    seconds) and ``jobs.csv`` (one row per job) for one simulated run."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = {
        "policy": summary.policy,
        "workload": workload.name,
        "seed": seed,
        "jobs": summary.jobs,
        "admitted": summary.admitted,
        "completed": summary.completed,
        "total_utility": summary.total_utility,
        "avg_jct": summary.avg_jct_s,
        "p99_jct": summary.p99_jct_s,
        "makespan": summary.makespan_s,
        "utilization": summary.utilization,
        "wall_seconds": summary.wall_seconds,
        "time_unit": "s",
        "slot_seconds": workload.slot_seconds,
        "horizon_slots": workload.horizon_slots,
        "truth": dict(truth),
        "workload_notes": dict(workload.notes),
        "metrics": summary.to_dict(),
    }
    return write_json(data, out / "summary.json"), write_jobs_csv(rows, out / "jobs.csv")


_EXPERIMENT_METRICS = (
    ("admitted_fraction", "admitted"),
    ("completed_fraction", "completed"),
    ("total_utility", "total utility"),
    ("avg_jct_s", "avg JCT"),
    ("p99_jct_s", "p99 JCT"),
    ("deadline_misses", "missed"),
    ("wall_seconds", "wall"),
)


#: Shown beside the others when the summary's schemes posted prices.
_PRICING_METRICS = (("profit", "profit"), ("acceptance_rate", "accepted"))


def experiment_report(results: Mapping[str, Any]) -> str:
    """An experiment's results for the terminal: header, summary table and checks."""
    parts = [
        f"{results['experiment']} ({results['scale']} scale, {results['seeds']} seeds): "
        f"{results['wall_seconds']:.1f}s"
    ]
    if results.get("summary"):
        metrics: tuple[tuple[str, str], ...] = _EXPERIMENT_METRICS
        if any(row.get("quotes") for row in results["summary"].values()):
            metrics = (*metrics[:3], *_PRICING_METRICS, *metrics[3:])
        parts.append(metric_table(results["summary"], metrics))
    parts.append(checks_table(results.get("checks", [])))
    for group in results.get("identical", []):
        parts.append(f"identical results: {', '.join(group['policies'])}: {group['reason']}")
    return "\n".join(parts)
