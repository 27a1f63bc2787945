"""``mlsched trace import``: a public trace file -> a workload file, with a summary."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mlsched.cli.parser import positive_float, positive_int

__all__ = ["add_trace_parser", "run_trace"]


def add_trace_parser(sub: Any) -> None:
    from mlsched.workloads.traces import FORMATS
    from mlsched.workloads.traces.columns import FIELDS

    p = sub.add_parser(
        "trace",
        help="import a public GPU-cluster trace as a workload file",
        description="Work with public GPU-cluster traces (docs/traces.md).",
    )
    tsub = p.add_subparsers(dest="trace_command", metavar="ACTION", required=True)
    fields = "; ".join(
        f"{name}{' (required)' if required else ''}: {text}"
        for name, (required, text) in FIELDS.items()
    )
    q = tsub.add_parser(
        "import",
        help="turn a trace file into a workload file (mlsched simulate --workload OUT)",
        description="Read a trace, choose the slot length, keep each job's own speed, and "
        "write a workload file whose notes record what was assumed. Formats: "
        + "; ".join(f"{k}: {v}" for k, v in FORMATS.items())
        + f". Fields of --column (csv): {fields}.",
    )
    q.add_argument("file", type=Path, help="trace file (alibaba-pai: the job table or its folder)")
    q.add_argument("--format", required=True, choices=list(FORMATS), help="source format")
    q.add_argument("--out", required=True, type=Path, help="workload file to write (.yaml/.json)")
    q.add_argument(
        "--cluster",
        help="cluster file (YAML/JSON): written into the workload, "
        "and the summary reports the load on it",
    )
    q.add_argument(
        "--slot-seconds",
        type=positive_float,
        help="slot length (default: chosen so a median job spans >= 10 slots)",
    )
    q.add_argument(
        "--column",
        action="append",
        default=[],
        metavar="FIELD=COLUMN",
        help="csv: bind a trace field to a column (repeatable; default: the column named as "
        "the field)",
    )
    q.add_argument(
        "--throughputs",
        type=Path,
        help="gavel: its throughput table (default: simulation_throughputs.json beside the trace)",
    )
    q.add_argument(
        "--tasks",
        type=Path,
        help="alibaba-pai: the task table (default: pai_task_table.csv beside the job table)",
    )
    q.add_argument("--jobs", type=positive_int, help="keep the first N jobs by arrival")
    q.add_argument(
        "--ignore-gpu-type",
        action="store_true",
        help="let jobs run on any GPU, not only the type they ran on in the trace",
    )
    q.add_argument(
        "--skip-invalid",
        action="store_true",
        help="skip rows that fail validation (counted in the notes) instead of "
        "stopping at the first",
    )
    q.add_argument("--json", action="store_true", help="print the summary as JSON")
    _add_generate(tsub)


def _add_generate(tsub: Any) -> None:
    g = tsub.add_parser(
        "generate",
        help="write a Philly-shaped synthetic trace (any size) in Philly's own format",
        description="Draw jobs from the shape of Microsoft's Philly trace (most jobs on one "
        "GPU, heavy-tailed run times, retried failures, a daily cycle; docs/traces.md) and "
        "write them as a cluster_job_log JSON list, which `mlsched trace import --format "
        "philly` reads. The arrival rate makes --load of the cluster's GPUs busy on average.",
    )
    g.add_argument("--jobs", required=True, type=positive_int, help="number of jobs")
    g.add_argument("--gpus", required=True, type=positive_int, help="the cluster's GPUs")
    g.add_argument(
        "--load",
        type=positive_float,
        default=0.8,
        help="average busy share of the cluster's GPUs over the arrivals (default 0.8)",
    )
    g.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    g.add_argument("--out", required=True, type=Path, help="trace file to write (JSON)")
    g.add_argument(
        "--cluster-out",
        type=Path,
        help="also write a cluster file of --gpus GPUs on 8-GPU machines (YAML)",
    )


def run_trace(args: argparse.Namespace) -> int:
    if args.trace_command == "generate":
        return _run_generate(args)
    from mlsched.core.batch_gc import batch_gc, no_exit_collection
    from mlsched.workloads.trace import load_cluster_file
    from mlsched.workloads.traces import import_trace, write_workload
    from mlsched.workloads.traces.columns import parse_columns

    cluster = load_cluster_file(args.cluster) if args.cluster else None
    no_exit_collection()
    with batch_gc():
        imported = import_trace(
            args.file,
            args.format,
            columns=parse_columns(args.column),
            throughputs=args.throughputs,
            tasks=args.tasks,
            cluster=cluster,
            slot_seconds=args.slot_seconds,
            ignore_gpu_type=args.ignore_gpu_type,
            skip_invalid=args.skip_invalid,
            limit=args.jobs,
        )
        written = write_workload(imported, args.out)
    if args.json:
        out = {"written": [str(p) for p in written], **imported.notes}
        print(json.dumps(out, indent=2))
        return 0
    _print_summary(imported.notes, written, cluster is not None)
    return 0


def _print_summary(notes: dict[str, Any], written: list[Path], has_cluster: bool) -> None:
    lines = summary_lines(notes, has_cluster)
    lines.append("wrote " + ", ".join(str(p) for p in written))
    print("\n".join(lines), file=sys.stdout)


def summary_lines(notes: Mapping[str, Any], has_cluster: bool) -> list[str]:
    """What an import found and assumed (its workload's notes), as printed."""
    s, src = notes["summary"], notes["source"]
    lines = [
        f"{src['format']} trace {src['file']}: {src['rows']} rows -> {s['jobs']} jobs",
        f"  span        {s['span_h']:.2f} h of arrivals ({s['slots_spanned']} slots)",
        f"  slot length {notes['slot_seconds']}",
        f"  GPU-hours   {s['gpu_hours']:.1f} (median run {s['median_run_s']:.0f} s, "
        f"largest job {s['max_gpus']} GPUs)",
    ]
    if "load" in s:
        lines.append(
            f"  load        {s['load']:.2f} of {s['cluster_gpus']} GPUs over the span "
            "(> 1: the queue grows)"
        )
    elif not has_cluster:
        lines.append("  load        pass --cluster to see the load (and simulate with --cluster)")
    for reason, count in sorted(src.get("skipped", {}).items()):
        lines.append(f"  skipped     {count} ({reason})")
    for text in src.get("invalid_rows", []):
        lines.append(f"    {text}")
    lines.append("  assumed:")
    lines += [f"    - {a}" for a in notes["assumptions"]]
    return lines


def _run_generate(args: argparse.Namespace) -> int:
    import yaml

    from mlsched.workloads.traces.synth import generate_philly, philly_cluster

    jobs = generate_philly(args.jobs, cluster_gpus=args.gpus, load=args.load, seed=args.seed)
    with args.out.open("w", encoding="utf-8") as fh:
        json.dump(jobs, fh, separators=(",", ":"))
    written = [str(args.out)]
    if args.cluster_out:
        args.cluster_out.write_text(
            yaml.safe_dump(philly_cluster(args.gpus), sort_keys=False), encoding="utf-8"
        )
        written.append(str(args.cluster_out))
    print(
        f"{len(jobs)} Philly-shaped jobs for {args.gpus} GPUs at load {args.load:g} "
        f"(seed {args.seed}); wrote {', '.join(written)}",
        file=sys.stdout,
    )
    return 0
