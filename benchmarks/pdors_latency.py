"""PD-ORS decision latency: wall time of ``on_arrival`` per arriving job (spec 000 §3.3-3.7).

Runs ``pd_ors`` on ``pdors-paper`` at the paper's scale (H = 100 identical machines,
I = 50 jobs, T = 20 one-hour slots) through the engine and simulator, and reports
p50/p99/max of the time each ``on_arrival`` call took (recorded by the policy in
``PdorsPolicy.decisions``), pooled over several seeds, and per seed; also the p50 of the
arrivals that ran the search (many are rejected before it). Goals: p50 < 100 ms,
p99 < 1 s.

    python -m benchmarks.pdors_latency                     # 50 and 100 jobs, seeds 0-4
    python -m benchmarks.pdors_latency --jobs 50 --seeds 0,1
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
from mlsched.scheduler.pdors.policy import PdorsPolicy
from mlsched.scheduler.registry import create
from mlsched.workloads.loading import load_workload

RESULTS = Path(__file__).resolve().parent / "results"
GOALS_MS = {"p50": 100.0, "p99": 1000.0}


def measure(jobs: int, seed: int, options: dict[str, Any] | None = None) -> dict[str, Any]:
    """One simulated run; the latency of each of its arrivals in milliseconds."""
    workload = load_workload("pdors-paper", seed=seed, jobs=jobs)
    policy = create("pd_ors", **(options or {}))
    assert isinstance(policy, PdorsPolicy)
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
    return {
        "jobs": jobs,
        "seed": seed,
        "ms": [d.seconds * 1e3 for d in policy.decisions],
        # Arrivals that ran the search (the others were rejected before it: too long for
        # the window even alone, and take well under a millisecond).
        "searched_ms": [d.seconds * 1e3 for d in policy.decisions if d.slots_examined > 0],
        "admitted": int(sum(d.admitted for d in policy.decisions)),
        "total_utility": summarize(result).total_utility,
        "simulation_wall_s": wall,
    }


def _figures(ms: list[float], searched: list[float]) -> dict[str, Any]:
    arr = np.asarray(ms, dtype=float)
    found = np.asarray(searched, dtype=float)
    return {
        "arrivals": int(arr.size),
        "p50_ms": float(np.percentile(arr, 50)),
        "p99_ms": float(np.percentile(arr, 99)),
        "max_ms": float(arr.max()),
        "mean_ms": float(arr.mean()),
        "searched": int(found.size),
        "searched_p50_ms": float(np.percentile(found, 50)) if found.size else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", default="50,100", help="comma-separated job counts")
    parser.add_argument("--seeds", default="0,1,2,3,4", help="comma-separated seeds")
    parser.add_argument("--out", default=str(RESULTS / "pdors_latency.json"))
    args = parser.parse_args(argv)
    host = machine()
    pooled = []
    runs = []
    for jobs in (int(j) for j in args.jobs.split(",")):
        all_ms: list[float] = []
        all_searched: list[float] = []
        for seed in (int(s) for s in args.seeds.split(",")):
            run = measure(jobs, seed)
            all_ms += run["ms"]
            all_searched += run["searched_ms"]
            row = {k: v for k, v in run.items() if not k.endswith("ms")}
            row |= _figures(run["ms"], run["searched_ms"])
            runs.append(row)
            print(
                f"jobs={jobs:4d} seed={seed}: p50 {row['p50_ms']:.1f} ms, "
                f"p99 {row['p99_ms']:.1f} ms, max {row['max_ms']:.1f} ms "
                f"({row['arrivals']} arrivals, {row['admitted']} admitted, "
                f"utility {row['total_utility']:.4g}; run {row['simulation_wall_s']:.1f} s)",
                flush=True,
            )
        summary = {"jobs": jobs, "seeds": args.seeds} | _figures(all_ms, all_searched)
        summary["meets_goals"] = (
            summary["p50_ms"] < GOALS_MS["p50"] and summary["p99_ms"] < GOALS_MS["p99"]
        )
        pooled.append(summary)
        print(
            f"jobs={jobs:4d} all seeds: p50 {summary['p50_ms']:.1f} ms, "
            f"p99 {summary['p99_ms']:.1f} ms, max {summary['max_ms']:.1f} ms "
            f"({summary['arrivals']} arrivals; the {summary['searched']} that searched: "
            f"p50 {summary['searched_p50_ms']:.1f} ms) "
            f"{'meets the goals' if summary['meets_goals'] else 'MISSES the goals'}",
            flush=True,
        )
    out = {
        "benchmark": "pdors_latency",
        "setting": "pdors-paper, H=100 identical machines, T=20 one-hour slots",
        "goals_ms": GOALS_MS,
        "machine": host,
        "pooled": pooled,
        "runs": runs,
    }
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {path}")
    return 0 if all(r["meets_goals"] for r in pooled) else 1


if __name__ == "__main__":
    raise SystemExit(main())
