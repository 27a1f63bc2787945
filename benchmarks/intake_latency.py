"""Intake latency for the largest documents the controller accepts.

Builds the largest accepted submission (just under the 1 MiB limit, distinct plausible ResNet
and VGG jobs) as JSON and as YAML, and times (a) the validation alone, in this process, and
(b) the whole ``SubmitJobs`` RPC to a real controller on loopback (parsing, validation,
the SQLite write), a fresh controller per document. Figures go to
``benchmarks/results/intake_latency.json``.

    python -m benchmarks.intake_latency
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from benchmarks.__main__ import machine
from benchmarks.output import out_file, ready
from mlsched.controller.intake import parse_jobs
from mlsched.controller.server import Controller, ControllerConfig
from mlsched.core.limits import MAX_DOCUMENT_BYTES, MAX_JOBS_PER_DOCUMENT
from mlsched.net.auth import ClientAuth, client_channel
from mlsched.v1 import jobs_pb2, jobs_pb2_grpc

RESULTS = Path(__file__).resolve().parent / "results"
MODELS = ("resnet20", "resnet56", "vgg11-narrow", "resnet18", "vgg16")


def job(i: int) -> dict[str, Any]:
    model = MODELS[i % len(MODELS)]
    return {
        "job_id": f"job-{i:05d}",
        "model": model,
        "arch": "allreduce" if i % 2 else "ps",
        "batch_size": 32,
        "epochs": 1 + i % 5,
        "chunks": 4,
        "batches_per_chunk": 500,
        "max_workers": 4,
        "worker": {"gpu": 1, "cpu": 2, "mem_gb": 8},
        "utility": {"kind": "sigmoid", "priority": 1 + i % 9, "decay": 0.5, "target": 20},
        "training": {"lr": 0.05, "image_size": 224 if model in ("resnet18", "vgg16") else 32},
    }


def largest(fmt: str) -> tuple[str, int]:
    """The largest document of ``fmt`` within the limits, and its job count."""
    dump = (
        (lambda jobs: json.dumps(jobs))
        if fmt == "json"
        else (lambda jobs: yaml.safe_dump(jobs, default_flow_style=None, sort_keys=False))
    )
    lo, hi = 1, MAX_JOBS_PER_DOCUMENT
    while lo < hi:  # the most jobs whose document fits
        mid = (lo + hi + 1) // 2
        if len(dump([job(i) for i in range(mid)]).encode()) <= MAX_DOCUMENT_BYTES:
            lo = mid
        else:
            hi = mid - 1
    return dump([job(i) for i in range(lo)]), lo


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument(
        "--out", type=out_file("intake_latency.json"), default=RESULTS / "intake_latency.json"
    )
    a = p.parse_args(argv)
    a.out = ready(p, a.out)
    result: dict[str, Any] = {"machine": machine(), "documents": {}}
    print(f"{'document':<8} {'bytes':>9} {'jobs':>6} {'validate s':>11} {'SubmitJobs s':>13}")
    for fmt in ("json", "yaml"):
        doc, n = largest(fmt)
        local = []
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            assert len(parse_jobs(doc)) == n
            local.append(time.perf_counter() - t0)
        rpc = []
        for _ in range(a.repeat):
            tmp = Path(tempfile.mkdtemp(prefix="mlsched-intake-"))
            ctl = Controller(
                ControllerConfig(
                    listen="127.0.0.1:0", db=str(tmp / "s.db"), checkpoint_root=str(tmp / "c")
                )
            ).start()
            try:
                stub = jobs_pb2_grpc.JobServiceStub(client_channel(ctl.address, ClientAuth()))
                if fmt == "yaml":  # the YAML worker starts with the first document
                    stub.SubmitJobs(jobs_pb2.SubmitJobsRequest(document="- {job_id: w}"))
                t0 = time.perf_counter()
                resp = stub.SubmitJobs(jobs_pb2.SubmitJobsRequest(document=doc), timeout=300)
                rpc.append(time.perf_counter() - t0)
                assert len(resp.job_ids) == n
            finally:
                ctl.stop()
        row = {
            "bytes": len(doc.encode()),
            "jobs": n,
            "validate_s": statistics.median(local),
            "submit_rpc_s": statistics.median(rpc),
        }
        result["documents"][fmt] = row
        print(
            f"{fmt:<8} {row['bytes']:>9} {n:>6} {row['validate_s']:>11.2f} "
            f"{row['submit_rpc_s']:>13.2f}"
        )
    a.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
