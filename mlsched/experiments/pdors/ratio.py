"""Check 4 (Fig. 10): OPT / PD-ORS on tiny instances (I=10, T=10, H <= 12)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mlsched.engine.builder import Failure, SimulationConfig, try_simulate
from mlsched.engine.summary import summarize
from mlsched.experiments.pdors.common import COSTS, PAPER, PdorsScale, schemes, workload
from mlsched.experiments.pool import Runner
from mlsched.perfmodel.estimator import RuntimeEstimator
from mlsched.scheduler.offline import pdors_optimum


@dataclass(frozen=True)
class RatioItem:
    seed: int
    servers: int
    jobs: int
    horizon: int
    time_limit_s: float


def ratio_items(s: PdorsScale, seeds: int) -> list[RatioItem]:
    return [
        RatioItem(seed, h, s.ratio_jobs, s.ratio_horizon, s.ratio_time_limit_s)
        for h in s.ratio_servers
        for seed in range(seeds)
    ]


def _one(item: RatioItem) -> dict[str, Any] | Failure:
    """One instance: the offline optimum and PD-ORS on it."""
    w = workload(item.seed, item.jobs, item.servers, item.horizon, "shared")
    opt = pdors_optimum(
        w.jobs,
        w.cluster,
        RuntimeEstimator(w.cluster, w.runtime),
        w.slot_seconds,
        item.horizon,
        time_limit_s=item.time_limit_s,
    )
    scheme = schemes()[PAPER]  # the paper's algorithm: check 4 is its claim
    outcome = try_simulate(
        w,
        SimulationConfig(
            scheme.policy,
            seed=item.seed,
            policy_options=scheme.options,
            truth=COSTS.paper.truth(w.slot_seconds),
        ),
        context={"part": "ratio", "servers": item.servers},
    )
    if isinstance(outcome, Failure):
        return outcome
    return {
        "servers": item.servers,
        "seed": item.seed,
        "opt_utility": opt.total_utility,
        "opt_bound": opt.bound,
        "opt_status": opt.status.value,
        "opt_gap": opt.gap,
        "opt_seconds": opt.seconds,
        "pd_ors_utility": summarize(outcome).total_utility,
    }


def run_ratio(
    items: list[RatioItem],
    runner: Runner,
    advance: Callable[[int], None],
    failures: list[Failure],
) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    for outcome in runner.map(_one, items, advance):
        if isinstance(outcome, Failure):
            failures.append(outcome)
        else:
            rows.append(outcome)
    first = items[0] if items else None
    return {
        "jobs": first.jobs if first else None,
        "horizon": first.horizon if first else None,
        "time_limit_s": first.time_limit_s if first else None,
        "rows": rows,
    }
