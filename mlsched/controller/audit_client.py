"""``mlsched whoami`` and ``mlsched audit``: who the controller takes the caller for, and its
audit record (submits, cancels and refusals; :mod:`mlsched.controller.tenancy`)."""

from __future__ import annotations

import argparse
import json
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mlsched.v1 import jobs_pb2_grpc

__all__ = ["run_audit", "run_whoami"]


def run_whoami(stub: jobs_pb2_grpc.JobServiceStub, args: argparse.Namespace) -> int:
    from mlsched.v1 import jobs_pb2

    me = stub.WhoAmI(jobs_pb2.WhoAmIRequest(), timeout=args.timeout)
    gpus = "no limit" if me.quota_gpus < 0 else str(me.quota_gpus)
    queued = "no limit" if me.quota_queued < 0 else str(me.quota_queued)
    print(f"{me.user} ({me.role}); quota: gpus {gpus}, queued {queued}")
    return 0


def run_audit(stub: jobs_pb2_grpc.JobServiceStub, args: argparse.Namespace) -> int:
    from google.protobuf import json_format

    from mlsched.v1 import jobs_pb2

    request = jobs_pb2.GetAuditRequest(
        user=args.user or "", job_id=args.job or "", limit=args.limit
    )
    entries = stub.GetAudit(request, timeout=args.timeout).entries
    if args.json:
        print(json.dumps([json_format.MessageToDict(e) for e in entries], indent=2))
        return 0
    print(f"{'when (UTC)':<20} {'user':<16} {'action':<8} {'job':<24} {'outcome':<8} detail")
    for e in entries:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(e.at_unix))
        print(f"{when:<20} {e.user:<16} {e.action:<8} {e.job_id or '-':<24} {e.outcome:<8} "
              f"{e.detail}")  # fmt: skip
    return 0
