"""Experiment ``oasis``: spec 001's Figs. 3-6 and its headline results H1-H4 (§5.3, §5.5).

Four parts, all on the ``oasis-paper`` workload, each seed a different workload:

* **H1 (Fig. 3)**: total utility vs number of jobs for OASiS and the paper's baselines
  (FIFO, DRF, RRH, Dorm), every scheme on the same jobs.
* **H2 (Fig. 4)**: actual minus target completion duration (``completion - arrival -
  gamma3``, in slots) of the completed time-sensitive and time-critical jobs, per scheme,
  on a workload of those two classes only (half each); jobs not completed are counted
  separately. A job's class is read off its sigmoid's decay gamma2 (0: insensitive,
  [0.01, 1]: sensitive, [4, 6]: critical; ``workloads/oasis.py``).
* **H3 (Fig. 5)**: the performance ratio OPT / OASiS on 10-job instances with T = 10 and
  a few servers (the total split between the pools, the worker pool taking the odd one),
  for several ranges of the priority gamma1 (the workload's gamma1 in [1, 100] mapped
  linearly onto the range, which raises the spread of utilities and so U/L). OPT is the
  MILP of :mod:`mlsched.scheduler.offline` under a time limit; its status and gap are
  recorded, and a ratio from an unproven optimum is a lower estimate.
* **H4 (Fig. 6)**: OASiS's total utility vs number of jobs when its U is scaled by
  ``ul_ratio_scale`` (U/L under- or over-estimated, L kept; spec A24).

OASiS runs twice: ``oasis`` with the spec's defaults and ``oasis-floor1`` with
``utility_floor=1.0``. With the defaults the time-critical sigmoids make L astronomically
small (spec A7), prices stay near zero and admission is almost greedy; the floor bounds f
from below in U and L only (jobs are still scored by their true utility), which makes the
prices bite. The checks report both; a hypothesis is said to hold for OASiS when it holds
for either variant, and the detail names which.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mlsched.controller.engine import RunResult
from mlsched.core.allocation import JobState
from mlsched.core.job import JobSpec
from mlsched.core.utility import Utility, UtilityKind
from mlsched.perfmodel.estimator import RuntimeEstimator
from mlsched.scheduler.offline import offline_optimum, performance_ratio
from mlsched.testbed.experiments.base import (
    Check,
    ProgressFactory,
    mean_summary,
    register_experiment,
)
from mlsched.testbed.experiments.runner import Failure, SimulationConfig, try_simulate
from mlsched.testbed.metrics import Summary, summarize
from mlsched.testbed.plots import plot_bars, plot_lines
from mlsched.testbed.workloads.base import Workload, load_workload

__all__ = [
    "BASELINES",
    "OASIS_VARIANTS",
    "SCALE_SETTINGS",
    "OasisScale",
    "job_class",
    "run_oasis",
]

log = logging.getLogger(__name__)

#: OASiS variants: name -> policy options.
OASIS_VARIANTS: dict[str, dict[str, Any]] = {
    "oasis": {},
    "oasis-floor1": {"utility_floor": 1.0},
}
#: The paper's baselines (spec 001 §5.2).
BASELINES: tuple[str, ...] = ("fifo", "drf", "rrh", "dorm")
#: Fig. 6's U/L estimates as multiples of the true value.
UL_SCALES: tuple[float, ...] = (0.2, 0.5, 1.0, 3.0, 5.0, 10.0)


@dataclass(frozen=True)
class OasisScale:
    """Size of one scale.

    H1/H4: ``servers`` per pool, horizon ``horizon``, job counts ``jobs`` (``default_jobs``
    is the point the ``summary`` reports). H2: ``h2_jobs`` on ``h2_servers`` per pool over
    ``h2_horizon``. H3: ``h3_servers`` total server counts, ``h3_priorities`` gamma1
    ranges, ``h3_time_limit_s`` per MILP. H4: ``ul_scales``.
    """

    servers: int
    horizon: int
    jobs: tuple[int, ...]
    default_jobs: int
    h2_jobs: int
    h2_servers: int
    h2_horizon: int
    h3_servers: tuple[int, ...]
    h3_priorities: tuple[tuple[float, float], ...]
    h3_time_limit_s: float
    ul_scales: tuple[float, ...]


SCALE_SETTINGS: dict[str, OasisScale] = {
    "smoke": OasisScale(
        servers=4,
        horizon=20,
        jobs=(5, 10),
        default_jobs=10,
        h2_jobs=10,
        h2_servers=4,
        h2_horizon=20,
        h3_servers=(3,),
        h3_priorities=((1.0, 100.0),),
        h3_time_limit_s=5.0,
        ul_scales=(0.2, 1.0, 5.0),
    ),
    # The paper's arrivals per server and slot on 20 + 20 servers over 100 slots (as the
    # baselines experiment); Fig. 4 at 60 jobs on 20 + 20.
    "default": OasisScale(
        servers=20,
        horizon=100,
        jobs=(15, 30, 60),
        default_jobs=30,
        h2_jobs=60,
        h2_servers=20,
        h2_horizon=100,
        h3_servers=(3, 6, 12),
        h3_priorities=((1.0, 100.0), (50.0, 100.0)),
        h3_time_limit_s=10.0,
        ul_scales=UL_SCALES,
    ),
    "paper": OasisScale(
        servers=50,
        horizon=300,
        jobs=(100, 200, 300, 400),
        default_jobs=200,
        h2_jobs=200,
        h2_servers=50,
        h2_horizon=100,
        h3_servers=(3, 6, 9, 12),
        h3_priorities=((75.0, 100.0), (50.0, 100.0), (25.0, 100.0), (1.0, 100.0)),
        h3_time_limit_s=60.0,
        ul_scales=UL_SCALES,
    ),
}

_CLASSES = ("sensitive", "critical")


def job_class(spec: JobSpec) -> str:
    """The oasis-paper utility class of a job, from its sigmoid decay gamma2:
    ``insensitive`` (0), ``sensitive`` ([0.01, 1]) or ``critical`` ([4, 6]); ``other`` for
    non-sigmoid utilities."""
    u = spec.utility
    if u.kind is not UtilityKind.SIGMOID:
        return "other"
    decay = float(u.params["decay"])
    if decay <= 0:
        return "insensitive"
    return "sensitive" if decay <= 2.0 else "critical"


def _schemes() -> list[tuple[str, str, dict[str, Any]]]:
    """(name, policy, options) of every scheme compared in H1/H2."""
    return [(n, "oasis", dict(o)) for n, o in OASIS_VARIANTS.items()] + [
        (b, b, {}) for b in BASELINES
    ]


def _workload(seed: int, jobs: int, horizon: int, servers: int, **extra: Any) -> Workload:
    return load_workload(
        "oasis-paper",
        seed=seed,
        jobs=jobs,
        horizon=horizon,
        options={"servers": servers, **extra},
    )


def _run(
    workload: Workload, name: str, policy: str, options: dict[str, Any], seed: int, ctx: dict
) -> RunResult | Failure:
    outcome = try_simulate(
        workload,
        SimulationConfig(policy, seed=seed, policy_options=options),
        context={"scheme": name, **ctx},
    )
    if isinstance(outcome, Failure):
        # Report the scheme's name, not the policy's, so variants are told apart.
        return Failure(name, outcome.seed, outcome.error, outcome.context)
    return outcome


@register_experiment(
    "oasis",
    "spec 001 Figs. 3-6: OASiS vs FIFO/DRF/RRH/Dorm, completion vs target, OPT ratio, U/L",
)
def run_oasis(
    *, scale: str, seeds: int, out_dir: Path, progress: ProgressFactory
) -> dict[str, Any]:
    s = SCALE_SETTINGS[scale]
    schemes = _schemes()
    points = sorted(set(s.jobs) | {s.default_jobs})
    n_h3 = len(s.h3_servers) * len(s.h3_priorities) * seeds
    total = (
        len(points) * seeds * len(schemes)  # H1
        + seeds * len(schemes)  # H2
        + n_h3  # H3
        + len(points) * seeds * len(s.ul_scales) * len(OASIS_VARIANTS)  # H4
    )
    failures: list[Failure] = []
    with progress(total, f"oasis ({scale})") as advance:
        h1, runs = _h1(s, points, seeds, schemes, advance, failures)
        h2 = _h2(s, seeds, schemes, advance, failures)
        h3 = _h3(s, seeds, advance, failures)
        h4 = _h4(s, points, seeds, advance, failures)

    names = [n for n, _, _ in schemes]
    summary = {
        n: mean_summary(h1.get((n, s.default_jobs), [])) for n in names if (n, s.default_jobs) in h1
    }
    sweep = _sweep(names, points, h1)
    h2_out = _h2_stats(h2, names)
    h4_sweep = _h4_sweep(points, h4, s.ul_scales)
    plots = _plots(out_dir, s, points, sweep, h2_out, h3, h4_sweep)
    checks = [
        *_check_h1(names, points, sweep),
        _check_h2(names, h2_out),
        _check_h3(h3),
        _check_h4(points, h4_sweep),
        _check_no_failures(failures),
    ]
    return {
        "summary": summary,
        "checks": [c.to_dict() for c in checks],
        "schemes": {n: {"policy": p, "options": o} for n, p, o in schemes},
        "default_point": {"jobs": s.default_jobs},
        "settings": dataclasses.asdict(s),
        "h1": {"sweep": sweep, "runs": runs},
        "h2": h2_out,
        "h3": h3,
        "h4": h4_sweep,
        "failures": [f.to_dict() for f in failures],
        "plots": [p.name for p in plots],
    }


# H1 ---------------------------------------------------------------------------------------
def _h1(
    s: OasisScale,
    points: Sequence[int],
    seeds: int,
    schemes: Sequence[tuple[str, str, dict[str, Any]]],
    advance: Callable[[int], None],
    failures: list[Failure],
) -> tuple[dict[tuple[str, int], list[Summary]], list[dict[str, Any]]]:
    summaries: dict[tuple[str, int], list[Summary]] = {}
    runs: list[dict[str, Any]] = []
    for n_jobs in points:
        for seed in range(seeds):
            workload = _workload(seed, n_jobs, s.horizon, s.servers)
            for name, policy, options in schemes:
                outcome = _run(
                    workload, name, policy, options, seed, {"part": "h1", "jobs": n_jobs}
                )
                advance(1)
                if isinstance(outcome, Failure):
                    failures.append(outcome)
                    continue
                summary = summarize(outcome)
                summaries.setdefault((name, n_jobs), []).append(summary)
                runs.append(
                    {
                        "scheme": name,
                        "jobs": n_jobs,
                        "seed": seed,
                        "total_utility": summary.total_utility,
                        "admitted": summary.admitted,
                        "completed": summary.completed,
                        "wall_seconds": summary.wall_seconds,
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
    first = Check(
        "H1: OASiS has the highest total utility at every job count",
        bool(held),
        f"jobs {list(points)} (mean over seeds); {table}; {lead}"
        + (f"; holds for {', '.join(held)}" if held else "; holds for no OASiS variant"),
    )
    grows = [
        o
        for o in oasis
        if len(points) > 1 and margins[o][-1] > 0 and margins[o][-1] > margins[o][0]
    ]
    second = Check(
        "H1: OASiS leads at the most jobs and its lead grows with the number of jobs",
        bool(grows),
        f"{lead}" + (f"; holds for {', '.join(grows)}" if grows else "; holds for no variant"),
    )
    return [first, second]


# H2 ---------------------------------------------------------------------------------------
def _h2(
    s: OasisScale,
    seeds: int,
    schemes: Sequence[tuple[str, str, dict[str, Any]]],
    advance: Callable[[int], None],
    failures: list[Failure],
) -> dict[str, dict[str, dict[str, Any]]]:
    """scheme -> class -> {"deltas": [...], "not_completed": n, "jobs": n}."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for seed in range(seeds):
        workload = _workload(seed, s.h2_jobs, s.h2_horizon, s.h2_servers, class_mix=(0.0, 0.5, 0.5))
        for name, policy, options in schemes:
            outcome = _run(workload, name, policy, options, seed, {"part": "h2"})
            advance(1)
            if isinstance(outcome, Failure):
                failures.append(outcome)
                continue
            per = out.setdefault(
                name, {c: {"deltas": [], "not_completed": 0, "jobs": 0} for c in _CLASSES}
            )
            for record in outcome.records.values():
                cls = job_class(record.spec)
                if cls not in per:
                    continue
                per[cls]["jobs"] += 1
                if record.state is JobState.DONE and record.completion_slot is not None:
                    target = float(record.spec.utility.params["target"])
                    per[cls]["deltas"].append(
                        record.completion_slot - record.spec.arrival_slot - target
                    )
                else:
                    per[cls]["not_completed"] += 1
    return out


def _h2_stats(raw: dict[str, dict[str, dict[str, Any]]], names: Sequence[str]) -> dict[str, Any]:
    stats: dict[str, Any] = {}
    for name in names:
        if name not in raw:
            continue
        stats[name] = {}
        for cls in _CLASSES:
            d = raw[name][cls]["deltas"]
            stats[name][cls] = {
                "completed": len(d),
                "not_completed": raw[name][cls]["not_completed"],
                "jobs": raw[name][cls]["jobs"],
                "mean": float(np.mean(d)) if d else None,
                "std": float(np.std(d)) if d else None,
                "mean_abs": float(np.mean(np.abs(d))) if d else None,
            }
    return stats


def _check_h2(names: Sequence[str], stats: dict[str, Any]) -> Check:
    """Closest to zero = smallest mean |actual - target|; plus the smallest spread."""
    oasis = [n for n in names if n in OASIS_VARIANTS and n in stats]
    base = [n for n in names if n not in OASIS_VARIANTS and n in stats]
    held: list[str] = []
    parts: list[str] = []
    for cls in _CLASSES:
        parts.append(
            f"{cls}: "
            + ", ".join(
                f"{n} {_fmt(stats[n][cls]['mean'])}±{_fmt(stats[n][cls]['std'])} "
                f"({stats[n][cls]['completed']} done, {stats[n][cls]['not_completed']} not)"
                for n in stats
            )
        )
    for o in oasis:
        ok = True
        for cls in _CLASSES:
            mine = stats[o][cls]
            if mine["mean_abs"] is None:
                ok = False
                continue
            for b in base:
                other = stats[b][cls]
                if other["mean_abs"] is None:
                    continue
                if mine["mean_abs"] > other["mean_abs"] or mine["std"] > other["std"]:
                    ok = False
        if ok:
            held.append(o)
    return Check(
        "H2: OASiS's completion time minus target is closest to 0 with the smallest spread, "
        "in both classes",
        bool(held),
        "slots, completed jobs, mean±std over seeds; "
        + "; ".join(parts)
        + (f"; holds for {', '.join(held)}" if held else "; holds for no OASiS variant"),
    )


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


# H3 ---------------------------------------------------------------------------------------
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


def _h3(
    s: OasisScale, seeds: int, advance: Callable[[int], None], failures: list[Failure]
) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    for total in s.h3_servers:
        n_workers = (total + 1) // 2
        n_ps = max(1, total - n_workers)
        for lo, hi in s.h3_priorities:
            for seed in range(seeds):
                base = _workload(seed, 10, 10, n_workers, ps_servers=n_ps, max_min_duration=5)
                workload = _remap_priority(base, lo, hi)
                opt = offline_optimum(
                    workload.jobs,
                    workload.cluster,
                    RuntimeEstimator(workload.cluster, workload.runtime),
                    workload.slot_seconds,
                    10,
                    time_limit_s=s.h3_time_limit_s,
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
                rows.append(row)
                advance(1)
    return {"rows": rows, "time_limit_s": s.h3_time_limit_s}


def _check_h3(h3: dict[str, Any]) -> Check:
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
    return Check(
        "H3: the performance ratio OPT/OASiS is about 1.1-1.5 (median in [1, 1.5])",
        bool(held),
        f"{len(rows)} instances (10 jobs, T=10), {proven} with a proven optimum, time limit "
        f"{h3['time_limit_s']:g}s; "
        + "; ".join(parts)
        + (f"; holds for {', '.join(held)}" if held else "; holds for no OASiS variant"),
    )


# H4 ---------------------------------------------------------------------------------------
def _h4(
    s: OasisScale,
    points: Sequence[int],
    seeds: int,
    advance: Callable[[int], None],
    failures: list[Failure],
) -> dict[tuple[str, float, int], list[float]]:
    out: dict[tuple[str, float, int], list[float]] = {}
    for n_jobs in points:
        for seed in range(seeds):
            workload = _workload(seed, n_jobs, s.horizon, s.servers)
            for name, options in OASIS_VARIANTS.items():
                for factor in s.ul_scales:
                    outcome = _run(
                        workload,
                        name,
                        "oasis",
                        {**options, "ul_ratio_scale": factor},
                        seed,
                        {"part": "h4", "jobs": n_jobs, "ul_ratio_scale": factor},
                    )
                    advance(1)
                    if isinstance(outcome, Failure):
                        failures.append(outcome)
                        continue
                    key = (name, factor, n_jobs)
                    out.setdefault(key, []).append(summarize(outcome).total_utility)
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


def _check_h4(points: Sequence[int], sweep: dict[str, Any]) -> Check:
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
    return Check(
        "H4: under-estimating U/L gives more utility than over-estimating it when resources "
        "are scarce",
        bool(held),
        "; ".join(parts)
        + (f"; holds for {', '.join(held)}" if held else "; holds for no OASiS variant"),
    )


def _check_no_failures(failures: Sequence[Failure]) -> Check:
    if not failures:
        return Check("every run finished without error", True, "no failures")
    names = sorted({f.policy for f in failures})
    return Check(
        "every run finished without error",
        False,
        f"{len(failures)} failed runs ({', '.join(names)}): {failures[0].error}",
    )


# Plots ------------------------------------------------------------------------------------
def _series(per: dict[str, Any]) -> dict[str, tuple[list[float], list[float]]]:
    return {
        name: (
            [np.nan if v is None else v for v in data["mean"]],
            [0.0 if v is None else v for v in data["std"]],
        )
        for name, data in per.items()
    }


def _plots(
    out_dir: Path,
    s: OasisScale,
    points: Sequence[int],
    sweep: dict[str, Any],
    h2: dict[str, Any],
    h3: dict[str, Any],
    h4: dict[str, Any],
) -> list[Path]:
    where = f"{s.servers}+{s.servers} servers, T={s.horizon}"
    paths = [
        plot_lines(
            out_dir / "fig3_utility_vs_jobs.png",
            points,
            _series(sweep["metrics"]["total_utility"]),
            xlabel="number of jobs",
            ylabel="total utility",
            title=f"Fig. 3: total utility vs number of jobs ({where})",
        )
    ]
    bars = {
        f"{name}/{cls}": (
            float(np.nan if st[cls]["mean"] is None else st[cls]["mean"]),
            float(0.0 if st[cls]["std"] is None else st[cls]["std"]),
        )
        for name, st in h2.items()
        for cls in _CLASSES
    }
    paths.append(
        plot_bars(
            out_dir / "fig4_completion_minus_target.png",
            bars,
            ylabel="completion - target (slots)",
            title=f"Fig. 4: completed jobs, {s.h2_jobs} jobs, T={s.h2_horizon}",
        )
    )
    ratio_series: dict[str, tuple[list[float], list[float]]] = {}
    for name in OASIS_VARIANTS:
        for lo, hi in s.h3_priorities:
            means: list[float] = []
            stds: list[float] = []
            for total in s.h3_servers:
                vals = [
                    r[f"{name}_ratio"]
                    for r in h3["rows"]
                    if r["servers"] == total
                    and r["priority"] == [lo, hi]
                    and math.isfinite(r.get(f"{name}_ratio", math.inf))
                ]
                means.append(float(np.mean(vals)) if vals else np.nan)
                stds.append(float(np.std(vals)) if vals else 0.0)
            ratio_series[f"{name} g1 [{lo:g},{hi:g}]"] = (means, stds)
    paths.append(
        plot_lines(
            out_dir / "fig5_performance_ratio.png",
            list(s.h3_servers),
            ratio_series,
            xlabel="total servers",
            ylabel="OPT / OASiS utility",
            title="Fig. 5: performance ratio (10 jobs, T=10)",
        )
    )
    for name, per in h4["utility"].items():
        paths.append(
            plot_lines(
                out_dir / f"fig6_ul_sensitivity_{name}.png",
                points,
                _series({f"U/L x{k}": v for k, v in per.items()}),
                xlabel="number of jobs",
                ylabel="total utility",
                title=f"Fig. 6: {name} with U/L misestimated ({where})",
            )
        )
    return paths
