"""Shared pieces of the hetero experiment: scales, schemes, one run and its record."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from mlsched.core.allocation import JobState
from mlsched.engine.builder import Failure, SimulationConfig, try_simulate
from mlsched.engine.engine import RunResult
from mlsched.engine.summary import summarize
from mlsched.experiments.costs import CHARGED, RestartCost
from mlsched.scheduler.hetero.grid import fit_count
from mlsched.workloads.base import Workload
from mlsched.workloads.loading import load_workload

#: What a restart costs in this experiment (every scheme alike; results.json says).
RESTART: RestartCost = CHARGED

PRIMARY = "hetero"
#: A_online as the paper has it decides the checks; with the spec's compacted offsets
#: (each round's window right after the last committed job, not at alpha tau_i) it runs
#: beside, and each check says whether it holds for it too.
VARIANT = "hetero-compact"
#: Our additions to the paper's algorithm: scheme -> the label of its checks' rows.
ADDITIONS: dict[str, str] = {VARIANT: "A_online + compacted offsets (ours)"}
#: The compared schemes (spec 002 §5): name -> (policy, options). The baselines run each
#: job's ideal bundle (the workload's default worker, v100x4). FIFO, 2D-LAS (Tiresias by
#: remaining work x resources) and the AntMan-style baseline fix a job's worker count at
#: arrival, drawn from [1, 30] (the spec's FIFO rule), with the fewest PSs (2i) allows;
#: DRF fills progressively.
SCHEMES: dict[str, tuple[str, dict[str, Any]]] = {
    PRIMARY: ("hetero", {}),
    VARIANT: ("hetero", {"compact_offsets": True}),
    "fifo": ("fifo", {"ps_rule": "needed"}),
    "drf": ("drf", {}),
    "las2d": ("las2d", {"ps_rule": "needed"}),
    "antman": ("antman", {"ps_rule": "needed"}),
}
#: The schemes with a drawn worker count (``max_workers``).
FIXED_COUNTS = ("fifo", "las2d", "antman")
#: The spec's bound on a drawn worker count (for 150 servers).
MAX_WORKERS = 30
BASELINES = tuple(name for name in SCHEMES if name not in (PRIMARY, VARIANT))
#: The baselines that preempt (the paper: "much worse than the rest because of frequent
#: preemption").
PREEMPTING = ("las2d", "antman")
#: The paper's claim: A_online's total weighted completion time is at least 30 % lower
#: than every baseline's (Figs. 2 and 5).
CLAIMED_REDUCTION = 0.30


@dataclass(frozen=True)
class HeteroScale:
    """Sizes of one scale.

    schemes: every scheme on ``jobs`` jobs, ``servers`` servers, arrivals over the first half
    of ``horizon`` (the run lasts 16 horizons, so late windows still count). alpha: hetero at
    each of ``alphas`` at the same point. maxweight (Fig. 8): one A_maxweight call and Jain
    et al.'s greedy on a batch of each of ``batch_jobs`` jobs over a window of ``batch_tau``
    slots on the same servers.
    """

    jobs: int
    servers: int
    horizon: int
    alphas: tuple[int, ...]
    batch_jobs: tuple[int, ...]
    batch_tau: int


SCALE_SETTINGS: dict[str, HeteroScale] = {
    "smoke": HeteroScale(
        jobs=12, servers=8, horizon=40, alphas=(2,), batch_jobs=(12,), batch_tau=16
    ),
    # Resource shortage as in the paper (most jobs cannot run at once; the baselines can
    # place every job's ideal bundle): 20 jobs on 12 servers.
    "default": HeteroScale(
        jobs=20,
        servers=12,
        horizon=40,
        alphas=(1, 2, 4, 8),
        batch_jobs=(10, 20, 40),
        batch_tau=32,
    ),
    # The paper's servers and horizon; its job counts are on the figures' missing axes.
    "paper": HeteroScale(
        jobs=100,
        servers=150,
        horizon=150,
        alphas=(1, 2, 4, 8),
        batch_jobs=(50, 100, 200),
        batch_tau=64,
    ),
}


@lru_cache(maxsize=8)
def workload(seed: int, jobs: int, servers: int, horizon: int) -> Workload:
    """A seed's jobs (the same whatever ``servers``; kept: every scheme of a seed runs them)."""
    return load_workload(
        "hetero-paper",
        seed=seed,
        jobs=jobs,
        horizon=horizon,
        options={"servers": servers},
    )


@dataclass(frozen=True)
class Item:
    """One run: part (``schemes`` or ``alpha``), seed, scheme name, policy and options."""

    part: str
    seed: int
    name: str
    policy: str
    options: tuple[tuple[str, Any], ...] = ()
    scale: HeteroScale = field(default_factory=lambda: SCALE_SETTINGS["smoke"])


def worker_cap(w: Workload) -> int:
    """The drawn worker count's bound: the spec's 30, but at most half the ideal bundles
    the empty cluster holds, so that a count drawn on a cluster smaller than the paper's
    is not one that can never run (a job rejected as infeasible would be charged the
    horizon for the size of the cluster, not for its scheduler). 30 at the paper's 150
    servers; 10 on the default point's 12."""
    ideal = w.jobs[0].worker if w.jobs else None
    if ideal is None:
        return MAX_WORKERS
    demand = w.cluster.demand_array(ideal)
    held = int(fit_count(np.asarray(w.cluster.capacity, dtype=float), demand).sum())
    return max(1, min(MAX_WORKERS, held // 2))


def weighted_from_arrival(result: RunResult, charge: int) -> float:
    """Sum of w_j (c_j - a_j) (the spec's second metric); a job not done is charged
    ``charge`` as its completion, as in ``weighted_completion_time``."""
    total = 0.0
    for r in result.records.values():
        done = r.state is JobState.DONE and r.completion_slot is not None
        c = r.completion_slot + 1 if done else charge  # type: ignore[operator]
        total += r.spec.weight * (c - r.spec.arrival_slot)
    return total


def run_item(item: Item) -> dict[str, Any] | Failure:
    s = item.scale
    w = workload(item.seed, s.jobs, s.servers, s.horizon)
    run_slots = w.horizon_slots or 16 * s.horizon
    options = dict(item.options)
    if item.name in FIXED_COUNTS:
        options.setdefault("max_workers", worker_cap(w))
    config = SimulationConfig(
        item.policy,
        seed=item.seed,
        policy_options=options,
        truth=RESTART.truth,
        # Faithful windows start at alpha tau_i: the cluster may idle for long stretches
        # while jobs wait for theirs; that is not a stall.
        stall_slots=run_slots,
    )
    outcome = try_simulate(w, config, context={"part": item.part, "scheme": item.name})
    if isinstance(outcome, Failure):
        return outcome
    summary = summarize(outcome)
    return {
        "part": item.part,
        "scheme": item.name,
        "seed": item.seed,
        "options": options,
        "summary": summary.to_dict(),
        "weighted_completion_time": summary.weighted_completion_time,
        "weighted_from_arrival": weighted_from_arrival(outcome, run_slots),
        "completed": summary.completed,
        "jobs": len(outcome.records),
        "wall_seconds": outcome.wall_seconds,
    }
