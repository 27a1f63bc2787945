"""gadget decision time: wall time of one slot's decision (spec 003's Algorithm 1 step:
the gains, LP-RS-MDE, the kept servers and the idle fill) at 50 and 500 servers.

The slot's jobs are a seed's ``gadget-paper`` jobs, all active, each within one slot of its
sigmoid's rise (progress uniform on [m - N zeta, m), m = min(lambda_3, F), as the
experiment's Q3 draws them: every job has something to gain, the hard case; jobs far from
their rise or past it gain nothing and only the idle fill places them); the
cluster is ``gadget-paper``'s at the given size (racks, GPUs per server and link speeds as
the spec draws them). Two jobs per server by default: their best rings ask for more GPUs
than the cluster has, so the LPs run (with one job per server every best ring fits and
LP-RS-MDE's shortcut decides without an LP). Spec 003 §3.6 gives O((|I[t]| |G_s|)^3 + u_b |I[t]|) and no
measured figure; the goal here is a decision well inside a testbed slot (60-300 s).

    python -m benchmarks.gadget_slot                          # 50 and 500 servers, seeds 0-2
    python -m benchmarks.gadget_slot --servers 50 --jobs-per-server 1 --seeds 0
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.machine import machine
from mlsched.core.allocation import JobState
from mlsched.engine.results import JobRecord
from mlsched.perfmodel.estimator import RuntimeEstimator
from mlsched.scheduler.gadget import GadgetPolicy
from mlsched.scheduler.view import ClusterView, RunContext
from mlsched.workloads.loading import load_workload

RESULTS = Path(__file__).resolve().parent / "results"


def measure(
    servers: int, jobs: int, seed: int, trials: int, max_lp_jobs: int = 200
) -> dict[str, Any]:
    w = load_workload("gadget-paper", seed=seed, jobs=jobs, options={"servers": servers})
    runtime = RuntimeEstimator(w.cluster, w.runtime)
    rng = np.random.default_rng(seed)
    records = {}
    for j in w.jobs:
        rise = min(float(j.utility.params.get("expected", j.total_work)), j.total_work)
        zeta = w.slot_seconds / j.compute_s  # iterations per worker per slot
        progress = float(rng.uniform(max(0.0, rise - j.worker_cap * zeta), rise))
        records[j.job_id] = JobRecord(j, state=JobState.RUNNING, progress=progress, admitted_slot=0)
    view = ClusterView(
        slot=1,
        slot_seconds=w.slot_seconds,
        horizon=w.horizon_slots,
        cluster=w.cluster,
        runtime=runtime,
        jobs=records,
    )
    policy = GadgetPolicy(trials=trials, max_lp_jobs=max_lp_jobs)
    policy.setup(RunContext(w.cluster, w.slot_seconds, w.horizon_slots, seed, runtime))
    policy.allocate(0, view)  # warm-up: imports and the first HiGHS call
    start = time.perf_counter()
    allocation = policy.allocate(1, view)
    seconds = time.perf_counter() - start
    record = policy.decisions[-1]
    gpus = int(w.cluster.total[w.cluster.resource_names.index("gpu")])
    return {
        "servers": servers,
        "gpus": gpus,
        "links": len(w.cluster.links),
        "jobs": jobs,
        "seed": seed,
        "placed": len(allocation),
        "value": record.value,
        "lp_value": record.lp_value,
        "columns": record.columns,
        "slot_s": seconds,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--servers", default="50,500", help="cluster sizes (comma-separated)")
    p.add_argument(
        "--jobs-per-server",
        type=float,
        default=2.0,
        help="active jobs per slot, per server (2: a contended slot)",
    )
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--trials", type=int, default=50, help="u_b, the rounding trials")
    p.add_argument(
        "--max-lp-jobs", type=int, default=200, help="gadget's max_lp_jobs (jobs in the LP)"
    )
    a = p.parse_args(argv)
    rows = []
    for servers in (int(x) for x in a.servers.split(",")):
        for seed in (int(x) for x in a.seeds.split(",")):
            jobs = max(1, round(a.jobs_per_server * servers))
            row = measure(servers, jobs, seed, a.trials, a.max_lp_jobs)
            rows.append(row)
            print(
                f"{servers:4d} servers ({row['gpus']} GPUs, {row['links']} links)  {jobs} jobs  "
                f"seed {seed}: {row['slot_s']:7.3f} s, {row['placed']} placed, "
                f"value {row['value']:.1f} of LP {row['lp_value']:.1f}, "
                f"{row['columns']} columns",
                flush=True,
            )
    by_size = {
        n: float(np.median([r["slot_s"] for r in rows if r["servers"] == n]))
        for n in sorted({r["servers"] for r in rows})
    }
    print(
        "median slot decision: " + ", ".join(f"{n} servers {s:.3f} s" for n, s in by_size.items())
    )
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "gadget_slot.json"
    out.write_text(
        json.dumps({"machine": machine(), "rows": rows, "median_slot_s": by_size}, indent=2) + "\n"
    )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
