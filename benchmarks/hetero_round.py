"""hetero decision time: wall time of one A_online round (A_dual on a batch) at the
paper's scale (spec 002 §5: H = 150 servers, 8 worker types, 10 PS types, T = 150).

A round is what a policy call that decides costs: the batch's candidate shapes (durations
from the runtime model), then up to alpha A_maxweight calls, each a cost minimisation per
job over every shape and start slot. The batch is a seed's jobs of ``hetero-paper``, all
waiting (none started) at the round of ``--tau`` (its window ``tau - 1`` slots); the shapes
and the A_dual calls are timed apart. The paper's figure is under 2 minutes per run of
A_online in MATLAB (Fig. 7); no goal is set here beyond reporting.

    python -m benchmarks.hetero_round                       # 50 and 100 jobs, seeds 0-2
    python -m benchmarks.hetero_round --jobs 25 --seeds 0 --servers 30
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.machine import machine
from mlsched.perfmodel.estimator import RuntimeEstimator
from mlsched.scheduler.hetero.batch import round_inputs
from mlsched.scheduler.hetero.maxweight import dual
from mlsched.scheduler.hetero.policy import DEFAULT_ALPHA
from mlsched.scheduler.view import ClusterView
from mlsched.workloads.loading import load_workload

RESULTS = Path(__file__).resolve().parent / "results"


def measure(jobs: int, servers: int, seed: int, tau: int, alpha: int) -> dict[str, Any]:
    w = load_workload(
        "hetero-paper", seed=seed, jobs=jobs, horizon=150, options={"servers": servers}
    )
    view = ClusterView(
        slot=tau - 1,
        slot_seconds=w.slot_seconds,
        horizon=w.horizon_slots,
        cluster=w.cluster,
        runtime=RuntimeEstimator(w.cluster, w.runtime),
        jobs={},
    )
    start = time.perf_counter()
    inputs = round_inputs(
        ((j, 0.0) for j in w.jobs), view, w.cluster.types, tau, w.horizon_slots or 2400, 10.0
    )
    shaped = time.perf_counter()
    chosen = dual(inputs.batch, inputs.grid, tau, alpha, "spec")
    done = time.perf_counter()
    return {
        "jobs": jobs,
        "servers": servers,
        "seed": seed,
        "tau": tau,
        "alpha": alpha,
        "shapes": int(sum(len(js.shapes) for js in inputs.batch)),
        "scheduled": len(chosen),
        "shapes_s": shaped - start,
        "dual_s": done - shaped,
        "round_s": done - start,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--jobs", default="50,100", help="batch sizes (comma-separated)")
    p.add_argument("--servers", type=int, default=150)
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--tau", type=int, default=64, help="the round's tau (window tau - 1)")
    p.add_argument("--alpha", type=int, default=DEFAULT_ALPHA)
    a = p.parse_args(argv)
    rows = []
    for n in (int(x) for x in a.jobs.split(",")):
        for seed in (int(x) for x in a.seeds.split(",")):
            row = measure(n, a.servers, seed, a.tau, a.alpha)
            rows.append(row)
            print(
                f"{n:4d} jobs  {a.servers} servers  seed {seed}  tau {a.tau}: shapes "
                f"{row['shapes_s']:6.2f} s, A_dual {row['dual_s']:6.2f} s, round "
                f"{row['round_s']:6.2f} s ({row['scheduled']} scheduled)",
                flush=True,
            )
    by_jobs = {
        n: float(np.median([r["round_s"] for r in rows if r["jobs"] == n]))
        for n in sorted({r["jobs"] for r in rows})
    }
    print("median round time: " + ", ".join(f"{n} jobs {s:.2f} s" for n, s in by_jobs.items()))
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "hetero_round.json"
    out.write_text(
        json.dumps({"machine": machine(), "rows": rows, "median_round_s": by_jobs}, indent=2) + "\n"
    )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
