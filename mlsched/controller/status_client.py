"""``mlsched status`` and ``mlsched describe``: the cluster and its jobs as a table (``-o
wide``: more columns), JSON or YAML, once or refreshed (``--watch``), and one job in full."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mlsched.v1 import jobs_pb2_grpc

__all__ = ["FORMATS", "run_describe", "run_status"]

FORMATS = ("table", "wide", "json", "yaml")
_CLEAR = "\033[H\033[2J"  # cursor home, clear screen: a refreshed view, as watch(1) shows


def _format(args: argparse.Namespace) -> str:
    return "json" if getattr(args, "json", False) else args.output


def _dump(doc: Any, fmt: str, *, one_line: bool = False) -> str:
    if fmt == "yaml":
        import yaml

        return yaml.safe_dump(doc, sort_keys=False).rstrip() + ("\n---" if one_line else "")
    return json.dumps(doc) if one_line else json.dumps(doc, indent=2)


def _view(stub: jobs_pb2_grpc.JobServiceStub, args: argparse.Namespace, fmt: str) -> str:
    from google.protobuf import json_format

    from mlsched.controller.serde import cluster_status_from_proto, job_status_from_proto
    from mlsched.controller.tables import cluster_summary, job_table
    from mlsched.v1 import jobs_pb2

    wide = fmt == "wide"
    watching = args.watch is not None
    if args.job:
        job = stub.GetJob(jobs_pb2.GetJobRequest(job_id=args.job), timeout=args.timeout).job
        if fmt in ("json", "yaml"):
            return _dump(json_format.MessageToDict(job), fmt, one_line=watching)
        return job_table([job_status_from_proto(job)], wide=wide)
    cluster = stub.GetClusterStatus(jobs_pb2.GetClusterStatusRequest(), timeout=args.timeout)
    request = jobs_pb2.ListJobsRequest(user=args.user or "")
    jobs = stub.ListJobs(request, timeout=args.timeout).jobs
    if fmt in ("json", "yaml"):
        doc = {
            "cluster": json_format.MessageToDict(cluster),
            "jobs": [json_format.MessageToDict(j) for j in jobs],
        }
        return _dump(doc, fmt, one_line=watching)
    summary = cluster_summary(cluster_status_from_proto(cluster))
    return f"{summary}\n\n{job_table([job_status_from_proto(j) for j in jobs], wide=wide)}"


def run_status(stub: jobs_pb2_grpc.JobServiceStub, args: argparse.Namespace) -> int:
    """Print the view once, or with ``--watch S`` every S seconds until Ctrl-C (or
    ``--count`` views): a table redraws the screen when it is a terminal; JSON and YAML
    print one document per view (JSON: one line each)."""
    fmt = _format(args)
    if args.watch is None:
        print(_view(stub, args, fmt))
        return 0
    redraw = fmt in ("table", "wide") and sys.stdout.isatty()
    shown = 0
    try:
        while args.count is None or shown < args.count:
            text = _view(stub, args, fmt)
            stamp = time.strftime("%H:%M:%S")
            if fmt in ("table", "wide"):
                head = f"every {args.watch:g}s, {stamp} (Ctrl-C to stop)\n"
                print((_CLEAR if redraw else "") + head + text, flush=True)
            else:
                print(text, flush=True)
            shown += 1
            if args.count is None or shown < args.count:
                time.sleep(args.watch)
    except KeyboardInterrupt:
        pass
    return 0


def run_describe(stub: jobs_pb2_grpc.JobServiceStub, args: argparse.Namespace) -> int:
    from google.protobuf import json_format

    from mlsched.controller.describe import render_description
    from mlsched.v1 import jobs_pb2

    request = jobs_pb2.DescribeJobRequest(job_id=args.job, limit=args.limit)
    reply = stub.DescribeJob(request, timeout=args.timeout)
    detail = json.loads(reply.detail_json)
    if args.output in ("json", "yaml"):
        print(_dump({"status": json_format.MessageToDict(reply.job), **detail}, args.output))
    else:
        print(render_description(reply.job, detail))
    return 0
