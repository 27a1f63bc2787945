"""Shared pieces of the oasis experiment: scales, schemes, workloads, one run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mlsched.core.allocation import JobState
from mlsched.core.job import JobSpec
from mlsched.core.utility import UtilityKind
from mlsched.engine.builder import Failure, SimulationConfig, try_simulate
from mlsched.engine.engine import JobRecord, RunResult
from mlsched.experiments.costs import CLUSTER, Costs, RestartCost
from mlsched.workloads.base import Workload
from mlsched.workloads.loading import load_workload

#: What a restart costs in this experiment (every scheme alike; results.json says).
COSTS = Costs(
    RestartCost(
        "free, as the paper assumes (spec 001: restart time is logged, not counted against "
        "the model)"
    ),
    CLUSTER,
    3600.0,
)

#: OASiS variants: name -> policy options. ``oasis-nofloor`` is the paper's algorithm: its
#: price constants as written (no utility floor, spec A7) and the cheapest plan of its DP
#: (``steady_slack=0``: no level plans); its checks decide the hypotheses. ``oasis``, the
#: policy as shipped, adds the utility floor (the spec's optional remedy for A7) and level
#: plans (docs/algorithms/pd_ors.md), both ours: its checks are rows of their own.
PRIMARY = "oasis"
PAPER = "oasis-nofloor"
#: OASiS as its paper defines it (also the baseline of the pdors experiment).
PAPER_OPTIONS: dict[str, Any] = {"utility_floor": 0.0, "steady_slack": 0.0}
OASIS_VARIANTS: dict[str, dict[str, Any]] = {
    "oasis": {},
    "oasis-nofloor": dict(PAPER_OPTIONS),
}
#: Our additions to the paper's algorithm: scheme -> the label of its checks' rows.
ADDITIONS: dict[str, str] = {PRIMARY: "OASiS + utility floor + level plans (ours)"}
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
    ranges, ``h3_time_limit_s`` per MILP. H4: ``ul_scales``. H5: ``testbed_seeds``
    workloads of the testbed setting (12 jobs each, cheap, so more seeds than the rest).
    H6: OASiS's decision time per job at ``h6_point``.
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
    testbed_seeds: int
    #: H6: (jobs, horizon, servers per pool) of the timed runs, on the first ``h6_seeds``.
    h6_point: tuple[int, int, int] = (10, 20, 4)
    h6_seeds: int = 1


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
        testbed_seeds=2,
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
        testbed_seeds=10,
        # The paper's H6 setting: T = 100 on 80 servers (40 + 40), 100 jobs arriving.
        h6_point=(100, 100, 40),
        h6_seeds=3,
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
        testbed_seeds=20,
        h6_point=(200, 100, 40),
        h6_seeds=6,
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
    workload: Workload,
    name: str,
    policy: str,
    options: dict[str, Any],
    seed: int,
    ctx: dict,
    cost: str = "paper",
) -> RunResult | Failure:
    """One run charging ``cost``'s restart cost (``paper`` or ``cluster``, :data:`COSTS`)."""
    truth = COSTS.of(cost).truth(workload.slot_seconds)
    outcome = try_simulate(
        workload,
        SimulationConfig(policy, seed=seed, policy_options=options, truth=truth),
        context={"scheme": name, **ctx},
    )
    if isinstance(outcome, Failure):
        # Report the scheme's name, not the policy's, so variants are told apart.
        return Failure(name, outcome.seed, outcome.error, outcome.context)
    return outcome


def target_miss(record: JobRecord) -> float | None:
    """Completion minus target duration in slots (``completion - arrival - gamma3``) of a
    completed job with a sigmoid utility; None for a job that did not complete."""
    if record.state is not JobState.DONE or record.completion_slot is None:
        return None
    target = float(record.spec.utility.params["target"])
    return record.completion_slot - record.spec.arrival_slot - target


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"
