"""Experiment ``baselines``: every registered policy on the spec-001 workload (oasis-paper).

For each number of jobs in the sweep and each seed, one workload is generated and every
registered policy runs on it (the same jobs for all policies; a policy that supports none
of its job kinds is listed under ``not_applicable`` instead). The runs are independent and
spread over the machine's cores (:mod:`mlsched.experiments.pool`). A policy whose run fails is
skipped for that run with a warning and listed under ``failures``. Outputs: total utility
vs number of jobs (spec 001 Fig. 3's axes), completed fraction vs jobs, and the JCT CDF at
the default point, plus checks that hold for any correct run (no paper claim: those are the
paper experiments'), and the policies whose results are identical, with the reason.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mlsched.engine.builder import Failure, SimulationConfig, try_simulate
from mlsched.engine.summary import Summary, jct_s, summarize
from mlsched.experiments.base import (
    Check,
    ProgressFactory,
    mean_summary,
    register_experiment,
)
from mlsched.experiments.costs import CLUSTER
from mlsched.experiments.plots import plot_cdf, plot_lines
from mlsched.experiments.pool import Runner
from mlsched.scheduler.registry import available, registered
from mlsched.workloads.loading import load_workload

__all__ = ["SCALE_SETTINGS", "BaselinesScale", "run_baselines"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BaselinesScale:
    """Size of one scale: servers per pool, horizon T (slots), the job-count sweep and
    which point of it the ``summary`` reports."""

    servers: int
    horizon: int
    jobs: tuple[int, ...]
    default_jobs: int


SCALE_SETTINGS: dict[str, BaselinesScale] = {
    "smoke": BaselinesScale(servers=4, horizon=20, jobs=(5, 10), default_jobs=10),
    # The paper's 100-400 jobs on 50+50 servers over 300 slots, scaled to the same arrivals
    # per server and slot on 20+20 servers over 100 slots, is about 13-53 jobs.
    "default": BaselinesScale(servers=20, horizon=100, jobs=(15, 30, 60), default_jobs=30),
    "paper": BaselinesScale(servers=50, horizon=300, jobs=(100, 200, 300, 400), default_jobs=200),
}

_SWEEP_METRICS = (
    "total_utility",
    "completed_fraction",
    "admitted_fraction",
    "avg_jct_s",
    "deadline_misses",
)


#: What a restart costs here (every policy alike; results.json says): no paper's claim is
#: tested, so a cluster's.
RESTART = CLUSTER


@register_experiment(
    "baselines",
    "every registered policy on oasis-paper: utility vs number of jobs, JCT CDF, completion",
)
def run_baselines(
    *, scale: str, seeds: int, out_dir: Path, progress: ProgressFactory
) -> dict[str, Any]:
    setting = SCALE_SETTINGS[scale]
    # Policies whose model covers none of the workload's job kinds (GADGET: all-reduce
    # only, on a PS workload) are listed as not applicable, not run to reject everything.
    sample = load_workload(
        "oasis-paper",
        seed=0,
        jobs=setting.default_jobs,
        horizon=setting.horizon,
        options={"servers": setting.servers},
    )
    kinds = registered()
    not_applicable = [
        p for p in available() if p in kinds and not any(kinds[p].supports(j) for j in sample.jobs)
    ]
    policies = [p for p in available() if p not in not_applicable]
    if not_applicable:
        log.info("[baselines] not applicable to oasis-paper's jobs: %s", ", ".join(not_applicable))
    points = sorted(set(setting.jobs) | {setting.default_jobs})
    summaries: dict[tuple[str, int], list[Summary]] = {}
    jcts: dict[str, list[float]] = {p: [] for p in policies}
    failures: list[Failure] = []
    runs: list[dict[str, Any]] = []
    rejection: dict[tuple[int, int], float] = {}
    first: tuple[int, Summary] | None = None
    items = [
        _Item(
            policy, n_jobs, seed, setting.horizon, setting.servers, n_jobs == setting.default_jobs
        )
        for n_jobs in points
        for seed in range(seeds)
        for policy in policies
    ]
    with progress(len(items) + 1, f"baselines ({scale})") as advance, Runner() as runner:
        for item, (outcome, item_jcts, rate) in zip(
            items, runner.map(_run_one, items, advance), strict=True
        ):
            rejection[(item.jobs, item.seed)] = rate
            if isinstance(outcome, Failure):
                failures.append(outcome)
                continue
            summaries.setdefault((item.policy, item.jobs), []).append(outcome)
            runs.append({"jobs": item.jobs, "seed": item.seed, **outcome.to_dict()})
            if item.default_point:
                jcts[item.policy].extend(item_jcts)
                if first is None and item.seed == 0:
                    first = (item.seed, outcome)
        repeat = _repeat_check(first, setting, advance)

    summary_at_default = {
        p: mean_summary(summaries.get((p, setting.default_jobs), []))
        for p in policies
        if (p, setting.default_jobs) in summaries
    }
    sweep = _sweep(policies, points, summaries)
    plots = _plots(out_dir, points, sweep, jcts, setting)
    checks = [
        _check_completes(policies, summaries, setting.default_jobs),
        _check_counts(policies, summaries),
        _check_no_failures(policies, failures),
        repeat,
    ]
    return {
        "summary": summary_at_default,
        "checks": [c.to_dict() for c in checks],
        "policies": policies,
        "not_applicable": not_applicable,
        "default_point": {"jobs": setting.default_jobs},
        "workload": {
            "name": "oasis-paper",
            "servers_per_pool": setting.servers,
            "horizon_slots": setting.horizon,
            "mean_resample_rejection_rate": float(np.mean(list(rejection.values()))),
        },
        "sweep": sweep,
        # Policies with identical results at the default point, and why.
        "identical": identical(summary_at_default),
        "runs": runs,
        "failures": [f.to_dict() for f in failures],
        "plots": [p.name for p in plots],
    }


@dataclass(frozen=True)
class _Item:
    """One run of the sweep: a policy on the workload of a job count and seed."""

    policy: str
    jobs: int
    seed: int
    horizon: int
    servers: int
    default_point: bool  # its completed jobs' JCTs feed the CDF


def _run_one(item: _Item) -> tuple[Summary | Failure, list[float], float]:
    """One run on a pool worker: its summary (or failure), its completed jobs' JCTs in
    slots (at the default point) and the workload's resampling rejection rate."""
    workload = load_workload(
        "oasis-paper",
        seed=item.seed,
        jobs=item.jobs,
        horizon=item.horizon,
        options={"servers": item.servers},
    )
    rate = float(workload.notes["resample_rejection_rate"])
    outcome = try_simulate(
        workload,
        SimulationConfig(item.policy, seed=item.seed, truth=RESTART.truth(workload.slot_seconds)),
        context={"jobs": item.jobs},
    )
    if isinstance(outcome, Failure):
        return outcome, [], rate
    jcts = (
        [
            j / outcome.slot_seconds
            for r in outcome.records.values()
            if (j := jct_s(r, outcome.slot_seconds)) is not None
        ]
        if item.default_point
        else []
    )
    return summarize(outcome), jcts, rate


def _sweep(
    policies: Sequence[str], points: Sequence[int], summaries: dict[tuple[str, int], list[Summary]]
) -> dict[str, Any]:
    metrics: dict[str, dict[str, dict[str, list[float | None]]]] = {}
    for metric in _SWEEP_METRICS:
        metrics[metric] = {}
        for policy in policies:
            means: list[float | None] = []
            stds: list[float | None] = []
            for n in points:
                values = [
                    v
                    for s in summaries.get((policy, n), [])
                    if (v := getattr(s, metric)) is not None
                ]
                means.append(float(np.mean(values)) if values else None)
                stds.append(float(np.std(values)) if values else None)
            metrics[metric][policy] = {"mean": means, "std": stds}
    return {"x": "jobs", "values": list(points), "metrics": metrics}


def _series(sweep: dict[str, Any], metric: str) -> dict[str, tuple[list[float], list[float]]]:
    out: dict[str, tuple[list[float], list[float]]] = {}
    for policy, data in sweep["metrics"][metric].items():
        mean = [np.nan if v is None else v for v in data["mean"]]
        std = [0.0 if v is None else v for v in data["std"]]
        out[policy] = (mean, std)
    return out


def _plots(
    out_dir: Path,
    points: Sequence[int],
    sweep: dict[str, Any],
    jcts: dict[str, list[float]],
    setting: BaselinesScale,
) -> list[Path]:
    where = f"{setting.servers}+{setting.servers} servers, T={setting.horizon}"
    return [
        plot_lines(
            out_dir / "utility_vs_jobs.png",
            points,
            _series(sweep, "total_utility"),
            xlabel="number of jobs",
            ylabel="total utility",
            title=f"Total utility vs number of jobs ({where})",
        ),
        plot_lines(
            out_dir / "completed_vs_jobs.png",
            points,
            _series(sweep, "completed_fraction"),
            xlabel="number of jobs",
            ylabel="completed fraction",
            title=f"Jobs completed by the horizon ({where})",
        ),
        plot_cdf(
            out_dir / "jct_cdf.png",
            jcts,
            xlabel="JCT (slots)",
            title=f"JCT of completed jobs, {setting.default_jobs} jobs ({where})",
        ),
    ]


def _check_completes(
    policies: Sequence[str], summaries: dict[tuple[str, int], list[Summary]], n_jobs: int
) -> Check:
    counts = {p: sum(s.completed for s in summaries.get((p, n_jobs), [])) for p in policies}
    bad = [p for p, c in counts.items() if c == 0]
    return Check(
        "every policy completes at least one job",
        not bad,
        f"{n_jobs} jobs: completed over seeds "
        + ", ".join(f"{p}={c}" for p, c in counts.items())
        + (f"; none completed by {', '.join(bad)}" if bad else ""),
    )


def _check_counts(
    policies: Sequence[str], summaries: dict[tuple[str, int], list[Summary]]
) -> Check:
    """Every run's counts are consistent: completed <= admitted <= jobs. (Replaces "utility
    grows with more jobs or saturates", a claim no paper makes and false under deadline
    utilities once the cluster congests: DRF 241 -> 309 -> 209 at 15/30/60 jobs.)"""
    bad = [
        f"{p} at {n} jobs ({s.completed} completed, {s.admitted} admitted of {s.jobs})"
        for (p, n), runs in sorted(summaries.items())
        for s in runs
        if not s.completed <= s.admitted <= s.jobs
    ]
    runs = sum(len(v) for v in summaries.values())
    return Check(
        "every run's completed <= admitted <= jobs",
        not bad and runs > 0,
        f"{runs} runs of {len(policies)} policies"
        + (f"; broken: {'; '.join(bad[:3])}" if bad else ""),
    )


#: Why schemes of one family give identical schedules on this workload.
_SAME_SCHEDULE = {
    "PostedPricePolicy": (
        "posted-price schemes (spec 004): oasis-paper's jobs carry no valuation, so every "
        "quote is accepted, and the schemes share one admission (the types' free capacity) "
        "and placement (PA): they differ only in the prices charged (revenue, profit)"
    ),
}


def identical(summary: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Groups of policies whose default-point results are identical (utility, completed,
    mean JCT), each with the reason where their family explains it; a group no family
    explains says so (the same decisions from different policies would be a bug)."""
    from mlsched.scheduler.registry import policy_class

    keys = ("total_utility", "completed", "avg_jct_s")
    groups: dict[tuple[Any, ...], list[str]] = {}
    for name, s in summary.items():
        groups.setdefault(tuple(s.get(k) for k in keys), []).append(name)
    out: list[dict[str, Any]] = []
    for names in groups.values():
        if len(names) < 2:
            continue
        families = {
            base.__name__
            for n in names
            for base in policy_class(n).__mro__
            if base.__name__ in _SAME_SCHEDULE
        }
        shared = [f for f in families if all(
            f in {b.__name__ for b in policy_class(n).__mro__} for n in names
        )]  # fmt: skip
        reason = _SAME_SCHEDULE[shared[0]] if shared else "unexplained: no shared family"
        out.append({"policies": sorted(names), "reason": reason})
    return out


def _check_no_failures(policies: Sequence[str], failures: Sequence[Failure]) -> Check:
    if not failures:
        return Check("every policy run finished without error", True, f"{len(policies)} policies")
    failed = sorted({f.policy for f in failures})
    return Check(
        "every policy run finished without error",
        False,
        f"{len(failures)} failed runs ({', '.join(failed)}): {failures[0].error}",
    )


def _repeat_check(
    first: tuple[int, Summary] | None, setting: BaselinesScale, advance: Any
) -> Check:
    """Re-run the first successful default-point run: the same seed must give the same
    numbers."""
    name = "same seed gives the same result"
    if first is None:
        advance(1)
        return Check(name, False, "no successful run to repeat")
    seed, summary = first
    workload = load_workload(
        "oasis-paper",
        seed=seed,
        jobs=setting.default_jobs,
        horizon=setting.horizon,
        options={"servers": setting.servers},
    )
    # A fresh run, never one read back from the run cache: this checks determinism.
    again = try_simulate(
        workload,
        SimulationConfig(summary.policy, seed=seed, truth=RESTART.truth(workload.slot_seconds)),
        cache=False,
    )
    advance(1)
    if isinstance(again, Failure):
        return Check(name, False, f"{summary.policy} failed when repeated: {again.error}")
    other = summarize(again)
    same = (
        other.total_utility == summary.total_utility
        and other.completed == summary.completed
        and other.admitted == summary.admitted
    )
    return Check(
        name,
        same,
        f"{summary.policy}, seed {seed}: utility "
        f"{summary.total_utility:.3f} vs {other.total_utility:.3f}",
    )
