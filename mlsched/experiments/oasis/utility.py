"""H1 (Fig. 3) and H4 (Fig. 6): total utility vs number of jobs, and with U/L mis-estimated."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mlsched.engine.builder import Failure
from mlsched.engine.summary import Summary, summarize
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


# H1 ---------------------------------------------------------------------------------------
def _h1_one(item: tuple[int, int, str, str, dict[str, Any], int, int, str]) -> Summary | Failure:
    n_jobs, seed, name, policy, options, horizon, servers, cost = item
    workload = _workload(seed, n_jobs, horizon, servers)
    ctx = {"part": "h1", "jobs": n_jobs, "cost": cost}
    outcome = _run(workload, name, policy, options, seed, ctx, cost)
    return outcome if isinstance(outcome, Failure) else summarize(outcome)


def _h1(
    s: OasisScale,
    points: Sequence[int],
    seeds: int,
    schemes: Sequence[tuple[str, str, dict[str, Any]]],
    runner: Runner,
    advance: Callable[[int], None],
    failures: list[Failure],
    cost: str = "paper",
) -> tuple[dict[tuple[str, int], list[Summary]], list[dict[str, Any]]]:
    """Every scheme at every point and seed, charging ``cost``'s restart cost."""
    items = [
        (n_jobs, seed, name, policy, options, s.horizon, s.servers, cost)
        for n_jobs in points
        for seed in range(seeds)
        for name, policy, options in schemes
    ]
    summaries: dict[tuple[str, int], list[Summary]] = {}
    runs: list[dict[str, Any]] = []
    for item, outcome in zip(items, runner.map(_h1_one, items, advance), strict=True):
        n_jobs, seed, name = item[0], item[1], item[2]
        if isinstance(outcome, Failure):
            failures.append(outcome)
            continue
        summaries.setdefault((name, n_jobs), []).append(outcome)
        runs.append(
            {
                "scheme": name,
                "jobs": n_jobs,
                "seed": seed,
                "total_utility": outcome.total_utility,
                "admitted": outcome.admitted,
                "completed": outcome.completed,
                "restarts": outcome.restarts,
                "cost": cost,
                "wall_seconds": outcome.wall_seconds,
            }
        )
    return summaries, runs


def _sweep(
    names: Sequence[str], points: Sequence[int], summaries: dict[tuple[str, int], list[Summary]]
) -> dict[str, Any]:
    out: dict[str, Any] = {"x": "jobs", "values": list(points), "metrics": {}}
    for metric in ("total_utility", "completed_fraction", "admitted_fraction"):
        per: dict[str, Any] = {}
        for name in names:
            means: list[float | None] = []
            stds: list[float | None] = []
            for n in points:
                vals = [float(getattr(x, metric)) for x in summaries.get((name, n), [])]
                means.append(float(np.mean(vals)) if vals else None)
                stds.append(float(np.std(vals)) if vals else None)
            per[name] = {"mean": means, "std": stds}
        out["metrics"][metric] = per
    return out


def _check_h1(names: Sequence[str], points: Sequence[int], sweep: dict[str, Any]) -> list[Check]:
    util = sweep["metrics"]["total_utility"]
    oasis = [n for n in names if n in OASIS_VARIANTS]
    base = [n for n in names if n not in OASIS_VARIANTS]

    def value(name: str, i: int) -> float:
        v = util[name]["mean"][i]
        return -math.inf if v is None else float(v)

    every: dict[str, bool] = {}
    margins: dict[str, list[float]] = {}
    for o in oasis:
        margins[o] = [value(o, i) - max(value(b, i) for b in base) for i in range(len(points))]
        every[o] = all(m >= 0 for m in margins[o])
    table = "; ".join(
        f"{n}: " + " / ".join("-" if v is None else f"{v:.0f}" for v in util[n]["mean"])
        for n in names
    )
    lead = "; ".join(
        f"{o} - best baseline: " + " / ".join(f"{m:+.0f}" for m in margins[o]) for o in oasis
    )
    held = [o for o in oasis if every[o]]
    first = per_algorithm(
        "H1: OASiS has the highest total utility at every job count",
        f"jobs {list(points)} (mean over seeds); {table}; {lead}",
        held,
        PAPER,
        ADDITIONS,
    )
    grows = [
        o
        for o in oasis
        if len(points) > 1 and margins[o][-1] > 0 and margins[o][-1] > margins[o][0]
    ]
    second = per_algorithm(
        "H1: OASiS leads at the most jobs and its lead grows with the number of jobs",
        lead,
        grows,
        PAPER,
        ADDITIONS,
    )
    return [*first, *second]


# H4 ---------------------------------------------------------------------------------------
def _h4_one(item: tuple[int, int, str, dict[str, Any], float, int, int]) -> float | Failure:
    n_jobs, seed, name, options, factor, horizon, servers = item
    workload = _workload(seed, n_jobs, horizon, servers)
    outcome = _run(
        workload,
        name,
        "oasis",
        {**options, "ul_ratio_scale": factor},
        seed,
        {"part": "h4", "jobs": n_jobs, "ul_ratio_scale": factor},
    )
    return outcome if isinstance(outcome, Failure) else summarize(outcome).total_utility


def _h4(
    s: OasisScale,
    points: Sequence[int],
    seeds: int,
    runner: Runner,
    advance: Callable[[int], None],
    failures: list[Failure],
) -> dict[tuple[str, float, int], list[float]]:
    items = [
        (n_jobs, seed, name, options, factor, s.horizon, s.servers)
        for n_jobs in points
        for seed in range(seeds)
        for name, options in OASIS_VARIANTS.items()
        for factor in s.ul_scales
    ]
    out: dict[tuple[str, float, int], list[float]] = {}
    for item, outcome in zip(items, runner.map(_h4_one, items, advance), strict=True):
        if isinstance(outcome, Failure):
            failures.append(outcome)
            continue
        n_jobs, name, factor = item[0], item[2], item[4]
        out.setdefault((name, factor, n_jobs), []).append(outcome)
    return out


def _h4_sweep(
    points: Sequence[int], raw: dict[tuple[str, float, int], list[float]], scales: Sequence[float]
) -> dict[str, Any]:
    per: dict[str, Any] = {}
    for name in OASIS_VARIANTS:
        per[name] = {}
        for factor in scales:
            vals = [raw.get((name, factor, n), []) for n in points]
            per[name][f"{factor:g}"] = {
                "mean": [float(np.mean(v)) if v else None for v in vals],
                "std": [float(np.std(v)) if v else None for v in vals],
            }
    return {"x": "jobs", "values": list(points), "ul_ratio_scale": list(scales), "utility": per}


def _check_h4(points: Sequence[int], sweep: dict[str, Any]) -> list[Check]:
    """At the most jobs (scarcest resources), under-estimates (< 1) beat over-estimates (> 1)
    on mean utility."""
    parts: list[str] = []
    held: list[str] = []
    for name, per in sweep["utility"].items():
        under = [
            v["mean"][-1] for k, v in per.items() if float(k) < 1 and v["mean"][-1] is not None
        ]
        over = [v["mean"][-1] for k, v in per.items() if float(k) > 1 and v["mean"][-1] is not None]
        shown = ", ".join(f"x{k} {_fmt(v['mean'][-1])}" for k, v in per.items())
        parts.append(f"{name} at {points[-1]} jobs: {shown}")
        if under and over and float(np.mean(under)) > float(np.mean(over)):
            held.append(name)
    return per_algorithm(
        "H4: under-estimating U/L gives more utility than over-estimating it when resources "
        "are scarce",
        "; ".join(parts),
        held,
        PAPER,
        ADDITIONS,
    )
