"""OASiS decision latency: wall time of ``on_arrival`` per arriving job (spec 001 §5.3).

Runs ``oasis`` on ``oasis-paper`` at the paper's scale (T = 300, 50 worker + 50 PS
servers) through the engine and simulator, and reports p50/p99/max of the time each
``on_arrival`` call took (recorded by the policy in ``OasisPolicy.decisions``), with the
policy's defaults (``utility_floor=1.0``) and with the paper's constants as written
(``utility_floor=0``, nearly zero prices: most searches stop early). Goals: p50 < 50 ms, p99 < 250 ms.

    python -m benchmarks.oasis_latency                  # 200 and 400 jobs, seed 0
    python -m benchmarks.oasis_latency --jobs 400 --seeds 0,1
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.machine import machine
from mlsched.engine.builder import build_engine
from mlsched.engine.simulator import SimulatedExecutor
from mlsched.engine.summary import summarize
from mlsched.scheduler.oasis.policy import OasisPolicy
from mlsched.scheduler.registry import create
from mlsched.workloads.loading import load_workload

RESULTS = Path(__file__).resolve().parent / "results"
GOALS_MS = {"p50": 50.0, "p99": 250.0}
VARIANTS: dict[str, dict[str, Any]] = {"oasis": {}, "oasis-nofloor": {"utility_floor": 0.0}}


def measure(jobs: int, seed: int, options: dict[str, Any]) -> dict[str, Any]:
    """One simulated run; latency figures of its arrivals in milliseconds."""
    workload = load_workload(
        "oasis-paper", seed=seed, jobs=jobs, horizon=300, options={"servers": 50}
    )
    policy = create("oasis", **options)
    assert isinstance(policy, OasisPolicy)
    executor = SimulatedExecutor(
        workload.cluster, workload.slot_seconds, families=workload.runtime, seed=seed
    )
    engine = build_engine(
        workload.cluster,
        policy,
        workload.jobs,
        slot_seconds=workload.slot_seconds,
        horizon=workload.horizon_slots,
        seed=seed,
        families=workload.runtime,
        executor=executor,
    )
    start = time.perf_counter()
    try:
        result = engine.run()
    finally:
        executor.close()
    wall = time.perf_counter() - start
    ms = np.array([d.seconds * 1e3 for d in policy.decisions])
    return {
        "jobs": jobs,
        "seed": seed,
        "options": options,
        "arrivals": int(ms.size),
        "p50_ms": float(np.percentile(ms, 50)),
        "p99_ms": float(np.percentile(ms, 99)),
        "max_ms": float(ms.max()),
        "mean_ms": float(ms.mean()),
        "admitted": int(sum(d.admitted for d in policy.decisions)),
        "total_utility": summarize(result).total_utility,
        "simulation_wall_s": wall,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", default="200,400", help="comma-separated job counts")
    parser.add_argument("--seeds", default="0", help="comma-separated seeds")
    parser.add_argument("--out", default=str(RESULTS / "oasis_latency.json"))
    args = parser.parse_args(argv)
    rows = []
    for variant, options in VARIANTS.items():
        for jobs in (int(j) for j in args.jobs.split(",")):
            for seed in (int(s) for s in args.seeds.split(",")):
                row = {"variant": variant, **measure(jobs, seed, options)}
                row["meets_goals"] = (
                    row["p50_ms"] < GOALS_MS["p50"] and row["p99_ms"] < GOALS_MS["p99"]
                )
                rows.append(row)
                print(
                    f"{variant:13s} jobs={jobs:4d} seed={seed}: p50 {row['p50_ms']:.1f} ms, "
                    f"p99 {row['p99_ms']:.1f} ms, max {row['max_ms']:.1f} ms "
                    f"({row['arrivals']} arrivals; run {row['simulation_wall_s']:.1f} s)"
                )
    out = {
        "benchmark": "oasis_latency",
        "setting": "oasis-paper, T=300, 50 worker + 50 PS servers",
        "goals_ms": GOALS_MS,
        "machine": machine(),
        "runs": rows,
    }
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {path}")
    return 0 if all(r["meets_goals"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
