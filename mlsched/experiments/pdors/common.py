"""Shared pieces of the pdors experiment: scales, schemes, one run and its record."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from mlsched.core.allocation import JobState
from mlsched.engine.builder import Failure, SimulationConfig, try_simulate
from mlsched.engine.engine import JobRecord
from mlsched.engine.summary import summarize
from mlsched.experiments.costs import CLUSTER, FREE, Costs
from mlsched.workloads.base import Workload
from mlsched.workloads.loading import load_workload
from mlsched.workloads.pdors import alone_slots
from mlsched.workloads.trace_arrivals import PHILLY_ARRIVALS_S, arrival_window

#: What a restart costs (results.json says): free for the verdicts, as the paper assumes
#: (reconfiguration between slots costs nothing in its model); a cluster's beside, on
#: pdors-paper's one-hour slot.
COSTS = Costs(FREE, CLUSTER, 3600.0)

PRIMARY = "pd_ors"
#: PD-ORS as its paper defines it decides the checks: L as written (no utility floor, spec
#: A3) and the cheapest plan of its DP (``steady_slack=0``: no level plans). PD-ORS as
#: shipped adds both (ours); its checks are rows of their own.
PAPER = "pd_ors-nofloor"
VARIANTS: dict[str, dict[str, Any]] = {PAPER: {"utility_floor": 0.0, "steady_slack": 0.0}}
PDORS = (PRIMARY, *VARIANTS)
#: Our additions to the paper's algorithm: scheme -> the label of its checks' rows.
ADDITIONS: dict[str, str] = {PRIMARY: "PD-ORS + utility floor + level plans (ours)"}
#: The paper's job mix and its Google-trace-like one (spec 000 §5.1).
MIXES: dict[str, tuple[float, float, float]] = {
    "10/55/35": (0.10, 0.55, 0.35),
    "30/69/1": (0.30, 0.69, 0.01),
}


@dataclass(frozen=True)
class Scheme:
    """A compared scheme: the policy, its options and the machine layout it runs on."""

    policy: str
    options: dict[str, Any]
    pools: str = "shared"


def schemes() -> dict[str, Scheme]:
    """PD-ORS and the baselines of spec 000 §5.2, under the summary's names."""
    return {
        "pd_ors": Scheme("pd_ors", {}),
        **{name: Scheme("pd_ors", dict(options)) for name, options in VARIANTS.items()},
        # OASiS as its paper defines it (spec 001: no utility floor, no level plans) keeps
        # workers and PSs on disjoint halves of the machines (item 4).
        "oasis": Scheme("oasis", {"utility_floor": 0.0, "steady_slack": 0.0}, "split"),
        # n_s = ceil(n_w / gamma) (A24).
        "fifo": Scheme("fifo", {"ps_rule": "needed"}),
        "drf": Scheme("drf", {}),
        # Fairness 0.8 x DRF, at most 20 % of the running jobs adjusted (item 3, A25). The
        # MILP stops at Dorm's own node limit and gap (its clock limit is a safety net that
        # these programs do not reach): a run gives the same result on any machine.
        "dorm": Scheme("dorm", {"adjust_fraction": 0.2, "fairness": 0.8}),
    }


@dataclass(frozen=True)
class PdorsScale:
    """Sizes of one scale (jobs, machines H, horizon T for each part).

    utility (checks 1-2, Figs. 7-8): every scheme at ``jobs`` on ``servers`` over
    ``horizon``; ``default_jobs`` is the summary's point. median (check 3, Fig. 9): every
    scheme at one point. ratio (check 4, Fig. 10): ``ratio_jobs`` over ``ratio_horizon`` on
    each of ``ratio_servers``, OPT under ``ratio_time_limit_s``. rounding (check 5,
    Fig. 11): PD-ORS at each of ``gains``, a draw that breaks a cover row accepted as the
    paper does (:data:`ROUNDING_COVER`), and exact. mix (check 6, Figs. 14-17): PD-ORS and
    OASiS under both job mixes.
    """

    servers: int
    horizon: int
    jobs: tuple[int, ...]
    default_jobs: int
    median_point: tuple[int, int, int]  # jobs, servers, horizon
    ratio_servers: tuple[int, ...]
    ratio_jobs: int
    ratio_horizon: int
    ratio_time_limit_s: float
    gains: tuple[float, ...]
    rounding_point: tuple[int, int, int]
    mix_point: tuple[int, int, int]
    #: Fig. 6: PD-ORS, FIFO, DRF and Dorm at ``default_jobs`` on each number of machines
    #: (the utility part's ``servers`` among them, its runs reused).
    machines: tuple[int, ...] = ()
    #: Figs. 12-13: every scheme at this point (jobs, servers, horizon) with a public
    #: trace's real arrivals (:data:`~mlsched.workloads.trace_arrivals.PHILLY_ARRIVALS_S`,
    #: a stand-in for the paper's Google sample); None: not run.
    trace_point: tuple[int, int, int] | None = None


GAINS = (0.2, 0.4, 0.6, 0.8, 1.0, 1.2)
#: Fig. 11's rounding keeps a draw that breaks the cover constraint when none covers (§6:
#: "the violation of the cover constraint in one iteration may be acceptable"); redrawn
#: until one covers, every G_delta < 1 failed alike (no draw covers, the job is refused).
ROUNDING_COVER = "accept"

SCALE_SETTINGS: dict[str, PdorsScale] = {
    "smoke": PdorsScale(
        servers=6,
        horizon=12,
        jobs=(6, 12),
        default_jobs=12,
        median_point=(10, 6, 20),
        ratio_servers=(3,),
        ratio_jobs=5,
        ratio_horizon=6,
        ratio_time_limit_s=5.0,
        gains=(0.4, 1.0, 1.2),
        rounding_point=(10, 6, 12),
        mix_point=(12, 6, 12),
        machines=(4, 6),
        trace_point=(12, 6, 12),
    ),
    # Contended points (fewer machines than Figs. 7-9's) keep the schemes apart and the
    # runs short; T as the paper's where the check's figure fixes it.
    "default": PdorsScale(
        servers=20,
        horizon=20,
        jobs=(15, 30, 50),
        default_jobs=50,
        median_point=(40, 20, 60),
        ratio_servers=(2, 4, 8, 12),
        ratio_jobs=10,
        ratio_horizon=10,
        ratio_time_limit_s=20.0,
        gains=GAINS,
        # Fig. 11's own point (I = 50 jobs on H = 100 machines, T = 20), cover violations
        # accepted as the paper does: a run there takes 0.4-7 s.
        rounding_point=(50, 100, 20),
        mix_point=(60, 20, 40),
        # Fig. 6's axis up to the utility part's 20 machines, 50 jobs throughout (at 40,
        # Dorm's MILPs cost 50 s a run).
        machines=(5, 10, 20),
        # The mix part's contended point (the paper's T = 80, I = 100, H = 30 scaled as
        # Figs. 14-17's is).
        trace_point=(60, 20, 40),
    ),
    "paper": PdorsScale(
        servers=100,
        horizon=20,
        jobs=(10, 20, 30, 40, 50),
        default_jobs=50,
        median_point=(100, 30, 80),
        ratio_servers=(2, 4, 6, 8, 10, 12),
        ratio_jobs=10,
        ratio_horizon=10,
        ratio_time_limit_s=60.0,
        gains=GAINS,
        rounding_point=(50, 100, 20),
        mix_point=(100, 30, 80),
        machines=(50, 100, 150, 200),
        trace_point=(100, 30, 80),
    ),
}


def workload(
    seed: int,
    jobs: int,
    servers: int,
    horizon: int,
    pools: str,
    mix: str = "10/55/35",
    trace: bool = False,
) -> Workload:
    """The seed's jobs; with ``trace``, arriving at a window of the public trace's times
    (:func:`trace_start`), the same jobs otherwise."""
    options: dict[str, Any] = {"servers": servers, "pools": pools, "class_mix": list(MIXES[mix])}
    if trace:
        options["arrival_times"] = arrival_window(jobs, trace_start(seed))
    return load_workload("pdors-paper", seed=seed, jobs=jobs, horizon=horizon, options=options)


def trace_start(seed: int) -> int:
    """Where a seed's window of the trace's arrivals begins: drawn per seed, so the seeds
    see different stretches of it."""
    return int(np.random.default_rng([seed, 13]).integers(0, len(PHILLY_ARRIVALS_S)))


def training_slots(record: JobRecord, horizon: int) -> float:
    """t~ - a of a completed job; T for one that did not complete or was rejected (A27)."""
    if record.state is JobState.DONE and record.completion_slot is not None:
        return float(record.completion_slot - record.spec.arrival_slot)
    return float(horizon)


@dataclass(frozen=True)
class Item:
    """One simulated run: which part, seed, point and scheme (picklable for the pool)."""

    part: str
    seed: int
    jobs: int
    servers: int
    horizon: int
    name: str
    scheme: Scheme
    mix: str = "10/55/35"
    extra: tuple[tuple[str, Any], ...] = ()  # policy options on top of the scheme's
    cost: str = "paper"  # whose restart cost it charges: the paper's or a cluster's
    trace: bool = False  # arrivals from the public trace (Figs. 12-13's stand-in)


def run_item(item: Item) -> dict[str, Any] | Failure:
    """Run one item; its record (utility, completions, training times, restarts)."""
    w = workload(
        item.seed, item.jobs, item.servers, item.horizon, item.scheme.pools, item.mix, item.trace
    )
    options = {**item.scheme.options, **dict(item.extra)}
    outcome = try_simulate(
        w,
        SimulationConfig(
            item.scheme.policy,
            seed=item.seed,
            policy_options=options,
            truth=COSTS.of(item.cost).truth(w.slot_seconds),
        ),
        context={"part": item.part, "scheme": item.name, "jobs": item.jobs},
    )
    if isinstance(outcome, Failure):
        return Failure(item.name, outcome.seed, outcome.error, outcome.context)
    summary = summarize(outcome)
    records = list(outcome.records.values())
    times = [training_slots(r, item.horizon) for r in records]
    # Jobs that cannot finish even alone count T under every scheme (A27); the median over
    # the others is the one that can tell schemes apart.
    feasible = [
        training_slots(r, item.horizon)
        for r in records
        if alone_slots(r.spec, "internal", w.slot_seconds) <= item.horizon - r.spec.arrival_slot
    ]
    return {
        "part": item.part,
        "scheme": item.name,
        "seed": item.seed,
        "jobs": item.jobs,
        "servers": item.servers,
        "horizon": item.horizon,
        "mix": item.mix,
        "cost": item.cost,
        "extra": dict(item.extra),
        "total_utility": summary.total_utility,
        "admitted": summary.admitted,
        "completed": summary.completed,
        "median_training_slots": float(np.median(times)) if times else math.nan,
        "median_training_slots_feasible": float(np.median(feasible)) if feasible else math.nan,
        "feasible_alone": len(feasible),
        "restarts": summary.restarts,
        "restarts_per_job": summary.restarts_per_job,
        "wall_seconds": summary.wall_seconds,
        "summary": summary.to_dict(),
    }
