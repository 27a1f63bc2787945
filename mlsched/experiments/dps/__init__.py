"""Experiment ``dps``: spec 004's evaluation (§5) and its acceptance checks (i)-(iv).

Every part runs on the ``dps-paper`` workload; each seed is one workload that every scheme
and variant sees:

* **schemes** (Figs. 2, 3, 7; checks i-iii): DPS, DPS-simple (θ = 0), BFP (best fixed
  prices found offline by replaying the model on the whole trace), the TOP stand-in,
  Random and DPS-RS (random placement). ``summary`` holds their means at this point,
  ``profit`` among them; regret vs BFP is under ``regret``.
* **delta** and **theta** (Figs. 5, 6; check iv): DPS with Theorem 2's δ times each of
  ``delta_scales`` and with each θ of ``thetas`` (the values equal to DPS's or DPS-simple's
  reuse those runs). They stay out of ``summary``.
* **jobs** (Fig. 4; check v): DPS and BFP with N times each of ``job_ratios``
  (:mod:`.jobs`).
* **shift** (a cause, not a claim): DPS and BFP with the second half's valuations times
  each of ``value_shifts`` (:mod:`.shift`).

Eight seeds by default: the claims compare means whose spread between seeds is about a
tenth of their size (see docs/algorithms/dps.md for the measured spread). The runs are
independent and spread over the machine's cores (:mod:`mlsched.experiments.pool`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mlsched.engine.builder import Failure
from mlsched.experiments.base import (
    Check,
    ProgressFactory,
    check_no_failures,
    decided_per_algorithm,
    mean_summary,
    register_experiment,
)
from mlsched.experiments.dps.common import (
    ADDITIONS,
    BENCHMARK,
    COSTS,
    PAPER_RADIUS,
    PRIMARY,
    SCALE_SETTINGS,
    SCHEMES,
    DpsScale,
    Item,
    run_item,
)
from mlsched.experiments.dps.diagnosis import diagnose, explain
from mlsched.experiments.dps.jobs import check_jobs, jobs_items, jobs_sweep
from mlsched.experiments.dps.plots import plots
from mlsched.experiments.dps.profit import check_profit_order, check_regret, regret_facts
from mlsched.experiments.dps.runtime import check_runtime, runtime_curves
from mlsched.experiments.dps.shift import shift_items, shift_table
from mlsched.experiments.dps.sweeps import check_u_shape, sweep_regrets
from mlsched.experiments.pool import Runner

__all__ = ["SCALE_SETTINGS", "DpsScale", "run_dps"]

#: The defaults the sweeps' variants coincide with: (part, value) -> scheme.
_SAME = {("delta", 1.0): PRIMARY, ("theta", 0.11): PRIMARY, ("theta", 0.0): "dps-simple"}


def _variant(part: str, value: float) -> str:
    return _SAME.get((part, value)) or f"{part}={value:g}"


def _items(s: DpsScale, seeds: int) -> list[Item]:
    # BFP's search is the longest run of a seed: first, so the pool ends together.
    order = [BENCHMARK, *(n for n in SCHEMES if n != BENCHMARK)]
    items = [
        Item("schemes", seed, name, SCHEMES[name][0], tuple(SCHEMES[name][1].items()), s)
        for name in order
        for seed in range(seeds)
    ]
    for part, option, values in (
        ("delta", "delta_scale", s.delta_scales),
        ("theta", "explore_fraction", s.thetas),
    ):
        items += [
            Item(part, seed, _variant(part, v), "dps", (*PAPER_RADIUS.items(), (option, v)), s)
            for v in values
            if (part, v) not in _SAME
            for seed in range(seeds)
        ]
    # the largest N's BFP searches first
    return [*jobs_items(s, seeds), *items, *shift_items(s, seeds)]


def _sweep(
    records: Sequence[dict[str, Any]], part: str, values: Sequence[float]
) -> dict[str, list[Any]]:
    names = [_variant(part, v) for v in values]
    means, stds = sweep_regrets(records, names)
    return {"values": list(values), "runs": names, "regret": means, "std": stds}


@register_experiment(
    "dps",
    "spec 004 Figs. 2-7: DPS vs BFP/DPS-simple/TOP/Random/DPS-RS: profit, regret over "
    "time, PA vs random placement, delta and theta sweeps",
    default_seeds=8,
    costs=COSTS,
)
def run_dps(*, scale: str, seeds: int, out_dir: Path, progress: ProgressFactory) -> dict[str, Any]:
    s = SCALE_SETTINGS[scale]
    items = _items(s, seeds)
    records: list[dict[str, Any]] = []
    failures: list[Failure] = []
    with progress(len(items), f"dps ({scale})") as advance, Runner() as runner:
        for outcome in runner.map(run_item, items, advance):
            if isinstance(outcome, Failure):
                failures.append(outcome)
            else:
                records.append(outcome)

    schemes = [r for r in records if r["part"] == "schemes"]
    summary = {
        name: mean_summary([r["summary"] for r in schemes if r["scheme"] == name])
        for name in SCHEMES
        if any(r["scheme"] == name for r in schemes)
    }
    facts = regret_facts(schemes)
    diagnosis = diagnose(schemes, PRIMARY, BENCHMARK)
    # The N sweep's runs are BFP and DPS on other workloads: not the delta/theta sweeps'.
    same_n = [r for r in records if r["part"] not in ("jobs", "shift")]
    sweeps = {
        "delta": _sweep(same_n, "delta", s.delta_scales),
        "theta": _sweep(same_n, "theta", s.thetas),
    }
    by_jobs = jobs_sweep(records, s)
    why = explain(diagnosis)
    profit = {d: check_profit_order(schemes, why, d) for d in (PRIMARY, *ADDITIONS)}
    regret = {d: check_regret(regret_facts(schemes, d)) for d in (PRIMARY, *ADDITIONS)}
    # Each of (i) and (ii) decided for the paper's DPS, our normalised radii a row apart.
    checks: list[Check] = [
        *(
            c
            for i in range(len(profit[PRIMARY]))
            for c in decided_per_algorithm(_nth(profit, i), PRIMARY, ADDITIONS)
        ),
        *decided_per_algorithm(regret.__getitem__, PRIMARY, ADDITIONS),
        check_runtime(schemes),
        check_u_shape("delta (x Theorem 2's)", s.delta_scales, sweeps["delta"]["regret"], 1.0),
        check_u_shape("theta", s.thetas, sweeps["theta"]["regret"], 0.11),
        check_jobs(by_jobs),
        _check_no_restarts(records),
        check_no_failures(failures),
    ]
    paths = plots(out_dir, s, schemes, sweeps)
    step = max(1, s.horizon // s.curve_points)
    return {
        "summary": summary,
        "checks": [c.to_dict() for c in checks],
        "schemes": {n: {"policy": p, "options": o} for n, (p, o) in SCHEMES.items()},
        "default_point": {"jobs": s.jobs, "servers": s.servers, "horizon": s.horizon},
        "settings": dataclasses.asdict(s),
        "regret": {
            **facts,
            "slots": list(range(0, s.horizon, step)),
            "mean": _thin(
                [r["curve"] for r in schemes if r["scheme"] == BENCHMARK],
                [r["curve"] for r in schemes if r["scheme"] == PRIMARY],
                step,
            ),
        },
        "runtime": runtime_curves(schemes),
        "sweeps": sweeps,
        "jobs_sweep": by_jobs,
        "value_shift": shift_table(records, s),
        "diagnosis": diagnosis,
        "bfp": {
            r["seed"]: {
                "prices": r.get("prices"),
                "replay_profit": r.get("replay_profit"),
                "engine_profit": r["profit"],
            }
            for r in schemes
            if r["scheme"] == BENCHMARK
        },
        "runs": [
            {k: v for k, v in r.items() if k not in ("curve", "runtimes", "summary", "offers")}
            for r in records
        ],
        "failures": [f.to_dict() for f in failures],
        "plots": [p.name for p in paths],
    }


def _nth(by_scheme: dict[str, list[Check]], i: int) -> Callable[[str], Check]:
    return lambda scheme: by_scheme[scheme][i]


def _thin(bench: Sequence[Any], ours: Sequence[Any], step: int) -> list[float]:
    """The mean regret curve at every ``step``-th slot (results.json keeps it short)."""
    import numpy as np

    if not bench or not ours or len(bench) != len(ours):
        return []
    mean = np.mean([b - o for b, o in zip(bench, ours, strict=True)], axis=0)
    return [float(v) for v in mean[::step]]


def _check_no_restarts(records: list[dict[str, Any]]) -> Check:
    """The experiment states one restart cost (``common.COSTS``) because no run restarts a
    job: non-preemptive placement, as the paper has it."""
    moved = sorted({r["scheme"] for r in records if r.get("restarts")})
    return Check(
        "no run restarts a job (placement is non-preemptive, so restart costs change nothing)",
        not moved,
        f"restarts in {', '.join(moved)}" if moved else f"0 restarts in {len(records)} runs",
    )
