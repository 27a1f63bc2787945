"""Simulator throughput: seeded simulations at scale, one case and one policy per process.

Three cases, all built here from :mod:`mlsched.core` types so the benchmark needs no data:

``scale``
    10,000 PS (async and sync) and ring-all-reduce jobs with 1-8 workers each, Poisson
    arrivals over the first 900 slots, on 100 servers (8 GPUs, 64 CPUs, 256 GB each, ten
    racks of ten). Each job is sized to take 2-18 slots at its requested worker count, so
    the cluster is busy (about two thirds of its GPUs on average) but most jobs finish
    before the 1,000-slot horizon.
``trace``
    The shape of a well-known simulator's standard trace: 5,000 single-GPU jobs of 1-4
    hours (uniform) arriving at 20 per hour (Poisson) on 108 GPUs (27 servers x 4 GPUs) with
    360-second slots (about 2,600 slots until the last job is done). Every job is a
    one-worker ring-all-reduce job (``min_workers = max_workers = 1``) whose ``compute_s``
    and ``total_work`` give its duration under the runtime model: one worker and no
    communication make an iteration take ``compute_s`` and complete one unit. The engine
    runs its closed loop: every slot the simulator reports measurements and the runtime
    model is refitted.
``trace-open-loop``
    The same trace with measurements off (``TruthConfig(measure=False)``): no model
    refits, which is what the other simulator does and so the like-for-like comparison.

Run one case in this process with ``python -m benchmarks.sim_throughput CASE POLICY``; it
prints one JSON object (the figures measured inside the process). ``python -m benchmarks``
runs every case in a subprocess so that interpreter start-up and imports count.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

__all__ = [
    "CASES",
    "GOALS",
    "Case",
    "build_scale",
    "build_trace",
    "build_trace_open_loop",
    "main",
    "run_case",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Case:
    """A workload to simulate."""

    name: str
    description: str
    cluster: Any  # mlsched.core.Cluster (imported lazily: import time is measured)
    jobs: tuple[Any, ...]  # mlsched.core.JobSpec
    slot_seconds: float
    horizon: int | None
    #: False: the simulator reports no measurements, so the runtime model is never refitted
    #: (what simulators without a closed loop do).
    measure: bool = True


def build_scale(seed: int = 0) -> Case:
    """10,000 jobs on 100 servers over 1,000 slots (see the module docstring)."""
    from mlsched.core import Arch, Cluster, JobSpec, ResourceVector, Server, SyncMode, Utility

    rng = np.random.default_rng(seed)
    n_servers, per_rack = 100, 10
    servers = tuple(
        Server(
            f"s{i:03d}",
            ResourceVector({"gpu": 8, "cpu": 64, "mem_gb": 256, "bw_gbps": 40}),
            rack=f"rack{i // per_rack}",
            uplink_gbps=40.0,
        )
        for i in range(n_servers)
    )
    cluster = Cluster(servers)
    slot_s = 60.0
    n_jobs, arrival_slots = 10_000, 900
    arrivals = np.sort(rng.uniform(0, arrival_slots, n_jobs)).astype(int)
    kinds = (("ps", "async"), ("ps", "sync"), ("allreduce", "sync"))
    models = ("resnet50", "vgg16", "bert", "lstm", "transformer")
    jobs = []
    for i in range(n_jobs):
        arch, sync = kinds[int(rng.integers(len(kinds)))]
        workers = int(rng.integers(1, 9))
        compute_s = float(rng.uniform(0.1, 0.5))
        gradient_mb = float(rng.uniform(5, 100))
        # Iteration time is compute plus a few gradient transfers at the 40 Gbit/s uplink;
        # size the job to about `slots` slots at `workers` workers.
        comm_s = 2 * gradient_mb * 8e6 / 40e9
        slots = int(rng.integers(2, 19))
        per_worker_batches = max(1, round(slots * slot_s / (compute_s + comm_s)))
        jobs.append(
            JobSpec(
                job_id=f"j{i:05d}",
                arrival_slot=int(arrivals[i]),
                model=models[i % len(models)],
                arch=Arch(arch),
                sync=SyncMode(sync),
                chunks=workers,
                batches_per_chunk=per_worker_batches,
                max_workers=workers,
                requested_workers=workers,
                requested_ps=1 if arch == "ps" else None,
                worker=ResourceVector({"gpu": 1, "cpu": 4, "mem_gb": 16}),
                ps=ResourceVector({"cpu": 2, "mem_gb": 8}),
                compute_s=compute_s,
                gradient_mb=gradient_mb,
                utility=Utility.sigmoid(
                    priority=float(rng.uniform(1, 10)), decay=0.1, target=float(slots * 2)
                ),
            )
        )
    return Case(
        "scale",
        "10,000 jobs, 100 servers, 1,000 slots",
        cluster,
        tuple(jobs),
        slot_s,
        1000,
    )


def build_trace(seed: int = 0) -> Case:
    """5,000 single-GPU jobs of 1-4 h, 20/h, 108 GPUs, 360-s slots (see the docstring)."""
    from mlsched.core import Arch, Cluster, JobSpec, ResourceVector, Server, Utility

    rng = np.random.default_rng(seed)
    servers = tuple(
        Server(f"g{i:02d}", ResourceVector({"gpu": 4, "cpu": 32}), rack=f"rack{i // 9}")
        for i in range(27)
    )
    cluster = Cluster(servers)
    slot_s = 360.0
    n_jobs, per_hour = 5_000, 20.0
    arrival_s = np.cumsum(rng.exponential(3600.0 / per_hour, n_jobs))
    duration_s = rng.uniform(3600.0, 4 * 3600.0, n_jobs)
    compute_s = 1.0  # one iteration = one unit = one second on one worker
    jobs = tuple(
        JobSpec(
            job_id=f"t{i:04d}",
            arrival_slot=int(arrival_s[i] // slot_s),
            model="trace",
            arch=Arch.ALLREDUCE,
            chunks=1,
            batches_per_chunk=max(1, round(duration_s[i] / compute_s)),
            min_workers=1,
            max_workers=1,
            worker=ResourceVector({"gpu": 1, "cpu": 4}),
            compute_s=compute_s,
            gradient_mb=100.0,
            utility=Utility.constant(1.0),
        )
        for i in range(n_jobs)
    )
    horizon = math.ceil(arrival_s[-1] / slot_s) + 200
    return Case(
        "trace",
        "5,000 single-GPU jobs (1-4 h, 20/h) on 108 GPUs, 360-s slots",
        cluster,
        jobs,
        slot_s,
        horizon,
    )


def build_trace_open_loop(seed: int = 0) -> Case:
    """The trace case with measurements off: no model refits, as in the other simulator."""
    case = build_trace(seed)
    return replace(
        case, name="trace-open-loop", description=case.description + ", no refits", measure=False
    )


CASES: dict[str, Callable[[int], Case]] = {
    "scale": build_scale,
    "trace": build_trace,
    "trace-open-loop": build_trace_open_loop,
}

#: Goal for each case's whole-process wall time (seconds) and the policies it runs by
#: default (None: every registered policy).
GOALS: dict[str, tuple[float, tuple[str, ...] | None]] = {
    "scale": (60.0, None),
    "trace": (3.0, ("fifo",)),
    "trace-open-loop": (3.0, ("fifo",)),
}


def run_case(case: Case, policy_name: str, *, seed: int = 0) -> dict[str, Any]:
    """Run ``case`` under ``policy_name`` in this process; return the figures."""
    from mlsched.core import JobState
    from mlsched.engine.builder import build_engine
    from mlsched.engine.simulator import TruthConfig
    from mlsched.scheduler import create

    start = time.perf_counter()
    engine = build_engine(
        case.cluster,
        create(policy_name),
        slot_seconds=case.slot_seconds,
        horizon=case.horizon,
        seed=seed,
        truth=TruthConfig(measure=case.measure),
    )
    engine.submit_all(case.jobs)
    result = engine.run()
    engine_s = time.perf_counter() - start
    states = [r.state for r in result.records.values()]
    done = [r for r in result.records.values() if r.state is JobState.DONE]
    jct = [(r.completion_time_s or 0.0) - r.spec.arrival_slot * case.slot_seconds for r in done]
    return {
        "case": case.name,
        "policy": policy_name,
        "seed": seed,
        "jobs": len(case.jobs),
        "servers": len(case.cluster),
        "slots": result.slots,
        "done": len(done),
        "rejected": sum(s is JobState.REJECTED for s in states),
        "unfinished": sum(s.is_active for s in states) + (len(case.jobs) - len(states)),
        "stalled": result.stalled,
        "mean_jct_h": float(np.mean(jct) / 3600.0) if jct else None,
        "mean_gpu_util": _mean_util(result, "gpu"),
        "engine_s": engine_s,
        "slots_per_s": result.slots / engine_s if engine_s > 0 else None,
    }


def _mean_util(result: Any, resource: str) -> float | None:
    if resource not in result.resource_names or not len(result.utilization):
        return None
    return float(result.utilization[:, result.resource_names.index(resource)].mean())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.sim_throughput", description=__doc__.splitlines()[0]
    )
    parser.add_argument("case", choices=sorted(CASES))
    parser.add_argument("policy")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", metavar="FILE", help="write cProfile stats of the run to FILE")
    args = parser.parse_args(argv)
    build_start = time.perf_counter()
    case = CASES[args.case](args.seed)
    build_s = time.perf_counter() - build_start
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
        figures = profiler.runcall(run_case, case, args.policy, seed=args.seed)
        profiler.dump_stats(args.profile)
    else:
        figures = run_case(case, args.policy, seed=args.seed)
    figures["build_s"] = build_s
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
