"""H3 (Fig. 5): the performance ratio OPT / OASiS on small instances."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from mlsched.core.utility import Utility
from mlsched.engine.builder import Failure
from mlsched.engine.summary import summarize
from mlsched.experiments.base import Check, per_algorithm
from mlsched.experiments.oasis.common import (
    ADDITIONS,
    OASIS_VARIANTS,
    PAPER,
    OasisScale,
    _fmt,
    _run,
    _workload,
)
from mlsched.experiments.pool import Runner
from mlsched.perfmodel.estimator import RuntimeEstimator
from mlsched.scheduler.offline import offline_optimum, performance_ratio
from mlsched.workloads.base import Workload


def _remap_priority(workload: Workload, lo: float, hi: float) -> Workload:
    """gamma1 in [1, 100] mapped linearly onto [lo, hi]; everything else unchanged."""
    if (lo, hi) == (1.0, 100.0):
        return workload
    jobs = []
    for job in workload.jobs:
        p = dict(job.utility.params)
        p["priority"] = lo + (float(p["priority"]) - 1.0) / 99.0 * (hi - lo)
        jobs.append(
            dataclasses.replace(
                job, utility=Utility.sigmoid(p["priority"], p["decay"], p["target"])
            )
        )
    return dataclasses.replace(workload, jobs=tuple(jobs))


def _h3_one(
    item: tuple[int, float, float, int, float],
) -> tuple[dict[str, Any], list[Failure]]:
    """One instance: the offline optimum and every OASiS variant on it."""
    total, lo, hi, seed, time_limit_s = item
    n_workers = (total + 1) // 2
    n_ps = max(1, total - n_workers)
    base = _workload(seed, 10, 10, n_workers, ps_servers=n_ps, max_min_duration=5)
    workload = _remap_priority(base, lo, hi)
    opt = offline_optimum(
        workload.jobs,
        workload.cluster,
        RuntimeEstimator(workload.cluster, workload.runtime),
        workload.slot_seconds,
        10,
        time_limit_s=time_limit_s,
    )
    row: dict[str, Any] = {
        "servers": total,
        "worker_servers": n_workers,
        "ps_servers": n_ps,
        "priority": [lo, hi],
        "seed": seed,
        "opt_utility": opt.total_utility,
        "opt_bound": opt.bound,
        "opt_status": opt.status.value,
        "opt_gap": opt.gap,
        "opt_seconds": opt.seconds,
    }
    failures: list[Failure] = []
    for name, options in OASIS_VARIANTS.items():
        outcome = _run(workload, name, "oasis", options, seed, {"part": "h3"})
        if isinstance(outcome, Failure):
            failures.append(outcome)
            continue
        online = summarize(outcome).total_utility
        row[f"{name}_utility"] = online
        row[f"{name}_ratio"] = performance_ratio(opt.total_utility, online)
        if opt.bound is not None and math.isfinite(opt.bound):
            row[f"{name}_ratio_bound"] = performance_ratio(max(opt.bound, 0.0), online)
    return row, failures


def _h3(
    s: OasisScale,
    seeds: int,
    runner: Runner,
    advance: Callable[[int], None],
    failures: list[Failure],
) -> dict[str, Any]:
    items = [
        (total, lo, hi, seed, s.h3_time_limit_s)
        for total in s.h3_servers
        for lo, hi in s.h3_priorities
        for seed in range(seeds)
    ]
    rows: list[dict[str, Any]] = []
    for row, failed in runner.map(_h3_one, items, advance):
        rows.append(row)
        failures.extend(failed)
    return {"rows": rows, "time_limit_s": s.h3_time_limit_s}


def _check_h3(h3: dict[str, Any]) -> list[Check]:
    rows = h3["rows"]
    proven = sum(r["opt_status"] == "optimal" for r in rows)
    parts: list[str] = []
    held: list[str] = []
    for name in OASIS_VARIANTS:
        ratios = [r[f"{name}_ratio"] for r in rows if f"{name}_ratio" in r]
        finite = [x for x in ratios if math.isfinite(x)]
        if not ratios:
            continue
        n_inf = len(ratios) - len(finite)
        med = float(np.median(ratios))
        parts.append(
            f"{name}: median {med:.2f}, mean of finite {_fmt(np.mean(finite) if finite else None)}"
            f", range {_fmt(min(finite) if finite else None)}-{_fmt(max(finite) if finite else None)}"
            f", {n_inf} infinite (OASiS earned 0)"
        )
        if 1.0 - 1e-6 <= med <= 1.5:
            held.append(name)
    return per_algorithm(
        "H3: the performance ratio OPT/OASiS is about 1.1-1.5 (median in [1, 1.5])",
        f"{len(rows)} instances (10 jobs, T=10), {proven} with a proven optimum, time limit "
        f"{h3['time_limit_s']:g}s; " + "; ".join(parts),
        held,
        PAPER,
        ADDITIONS,
    )
