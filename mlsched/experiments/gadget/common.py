"""Shared pieces of the gadget experiment: scales, schemes, one run and its record."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from mlsched.core.allocation import Allocation
from mlsched.engine.builder import Failure, SimulationConfig, try_simulate
from mlsched.engine.summary import summarize
from mlsched.experiments.costs import CLUSTER, Costs, RestartCost
from mlsched.experiments.gadget.replay import Replay
from mlsched.scheduler.policy import Policy
from mlsched.scheduler.view import ClusterView
from mlsched.workloads.base import Workload
from mlsched.workloads.loading import load_workload

#: The gadget-paper workload's slot (one minute).
SLOT_SECONDS = 60.0
#: What a restart costs (results.json says): free for the verdicts, as the paper assumes
#: (footnote 2: suspend and resume cost nothing; spec 003 A21); a cluster's beside, on the
#: gadget-paper workload's 60-s slot.
COSTS = Costs(
    RestartCost("free: the paper assumes suspend and resume cost nothing (footnote 2, A21)"),
    CLUSTER,
    SLOT_SECONDS,
)

#: GADGET as the paper and the spec have it: a job without a ring this slot pauses (no
#: ``idle_fill``). It decides the checks. Every positive gain counts (:mod:`.tiers`), so
#: the least-attained-service backfill of idle GPUs once run beside (ours; ``idle_fill``)
#: finds nothing idle that a job could use: it scored the same on every run.
PAPER = "gadget"
#: Our additions to the paper's algorithm: scheme -> the label of its checks' rows.
ADDITIONS: dict[str, str] = {}
#: The GADGET schemes, the paper's first.
GADGETS: tuple[str, ...] = (PAPER,)
#: The compared schemes (spec 003 §5): name -> (policy, options). The baselines place rings
#: with P0 and reserve b_i on every hop (``placement=ring``); FIFO and LAS (Tiresias) run a
#: fixed count k_i ~ U{1..10} capped at N_i (``max_workers=10``), DRF fills progressively.
SCHEMES: dict[str, tuple[str, dict[str, Any]]] = {
    PAPER: ("gadget", {"idle_fill": False}),
    "fifo": ("fifo", {"placement": "ring", "max_workers": 10}),
    "drf": ("drf", {"placement": "ring"}),
    "tiresias": ("tiresias", {"placement": "ring", "max_workers": 10}),
}
BASELINES = tuple(name for name in SCHEMES if name not in GADGETS)
#: A3's two readings of F_i: the spec's iterations (the default) and the literal worker-slots
#: (under which the paper's load exists); Q1 is checked under each.
BUDGET_MODES: tuple[str, ...] = ("iterations", "worker_slots")
#: A23's multiplicative sweeps of node (GPU) and link capacity.
CAPACITY_SCALES = (0.25, 0.5, 1.0, 2.0, 4.0)


@dataclass(frozen=True)
class GadgetScale:
    """Sizes of one scale.

    utility (Q1, Fig. 4): every scheme at each of ``jobs`` on ``servers`` servers over
    ``horizon`` slots; ``default_jobs`` is the summary's point. capacity (Q2, Figs. 5/6):
    GADGET at the default point with every server's GPUs scaled by each of ``node_scales``,
    and every link by each of ``link_scales``, on the first ``capacity_seeds`` seeds (all
    when None). ratio (Q3, Fig. 7): ``ratio_draws`` slot
    problems per seed on each of ``ratio_servers`` servers with ``ratio_jobs`` jobs,
    LP-RS-MDE against the MILP solved under ``ratio_time_limit_s``.
    """

    servers: int
    horizon: int
    jobs: tuple[int, ...]
    default_jobs: int
    default_reason: str
    node_scales: tuple[float, ...]
    link_scales: tuple[float, ...]
    capacity_seeds: int | None
    ratio_servers: tuple[int, ...]
    ratio_jobs: int
    ratio_draws: int
    ratio_time_limit_s: float
    #: Q1 again at the paper's size (Fig. 4's 50 servers and 200 slots): (servers, horizon,
    #: job counts), every scheme under both budget readings; None: not run.
    paper_point: tuple[int, int, tuple[int, ...]] | None = None


# At the paper's 50 servers and 200 slots the budgets fill 2-11 % of the GPU-slots: GADGET
# and DRF score the same (seed 0: equal at every count) and FIFO and LAS trail only by their
# fixed worker counts. The default scale shrinks the cluster and the horizon so that the
# paper's job counts run from light load to overload. "Servable load": :func:`loads`.
SCALE_SETTINGS: dict[str, GadgetScale] = {
    "smoke": GadgetScale(
        servers=6,
        horizon=20,
        jobs=(20, 40),
        default_jobs=40,
        default_reason="the larger count: mean servable load 1.40 over seeds 0-7 (contended)",
        node_scales=(0.5, 1.0, 2.0),
        link_scales=(0.5, 1.0, 2.0),
        capacity_seeds=None,
        ratio_servers=(4,),
        ratio_jobs=6,
        ratio_draws=1,
        ratio_time_limit_s=10.0,
        paper_point=(8, 24, (20, 40)),
    ),
    "default": GadgetScale(
        servers=10,
        horizon=50,
        jobs=(50, 100, 150, 200, 250),
        default_jobs=150,
        default_reason=(
            "the smallest count whose mean servable load over seeds 0-7 exceeds 1 (1.20; "
            "0.81 at 100 jobs): the jobs can use more GPU-slots than the horizon has, so the "
            "schedulers must choose"
        ),
        node_scales=CAPACITY_SCALES,
        link_scales=CAPACITY_SCALES,
        capacity_seeds=None,  # every seed (the paper's Figs. 5/6 average 3 trials)
        ratio_servers=(4, 6, 8, 10),
        ratio_jobs=10,
        ratio_draws=4,
        ratio_time_limit_s=30.0,
        # The paper's size at three of its job counts (a run there takes 0.3-8 s).
        paper_point=(50, 200, (50, 150, 250)),
    ),
    "paper": GadgetScale(
        servers=50,
        horizon=200,
        jobs=(50, 100, 150, 200, 250),
        default_jobs=250,
        default_reason=(
            "the most loaded count; even there the servable load is about 0.11, so no point "
            "of the paper's size is contended"
        ),
        node_scales=CAPACITY_SCALES,
        link_scales=CAPACITY_SCALES,
        capacity_seeds=None,
        ratio_servers=(2, 4, 6, 8, 10),
        ratio_jobs=10,
        ratio_draws=10,
        ratio_time_limit_s=60.0,
    ),
}


@lru_cache(maxsize=16)
def workload(
    seed: int,
    jobs: int,
    servers: int,
    horizon: int,
    node: float = 1.0,
    link: float = 1.0,
    budget_mode: str = "iterations",
) -> Workload:
    """A seed's jobs (the same whatever the sizes and scales: separate random streams)."""
    return load_workload(
        "gadget-paper",
        seed=seed,
        jobs=jobs,
        horizon=horizon,
        options={
            "servers": servers,
            "node_scale": node,
            "link_scale": link,
            "budget_mode": budget_mode,
        },
    )


def loads(w: Workload) -> dict[str, float]:
    """Contention of a workload. ``offered``: the jobs' budgets in worker-slots over the
    horizon's GPU-slots (the workload's note). ``servable``: the same with each budget capped
    at what the job could run from its arrival to the horizon at N_i workers per slot, the
    work the horizon could hold if capacity were unlimited; above 1 the schemes must choose."""
    horizon = w.horizon_slots or 1
    gpus = float(w.notes["gpus"])
    servable = sum(
        min(j.total_work * j.compute_s / w.slot_seconds, j.worker_cap * (horizon - j.arrival_slot))
        for j in w.jobs
    )
    return {"offered": float(w.notes["offered_load"]), "servable": servable / (gpus * horizon)}


@dataclass(frozen=True)
class Item:
    """One run: part (``utility`` or ``capacity``), seed, job count, scheme, the capacity
    scales (picklable for the pool)."""

    part: str
    seed: int
    jobs: int
    scheme: str
    node_scale: float = 1.0
    link_scale: float = 1.0
    scale: GadgetScale = field(default_factory=lambda: SCALE_SETTINGS["smoke"])
    budget_mode: str = "iterations"
    #: (servers, horizon) for the paper-size part; None: the scale's own.
    size: tuple[int, int] | None = None
    #: Whose restart cost it charges: the paper's (``paper``) or a cluster's (``cluster``).
    cost: str = "paper"


def capacity_seeds(s: GadgetScale, seeds: int) -> int:
    """How many seeds (0, 1, ...) the capacity sweeps run on."""
    return seeds if s.capacity_seeds is None else min(seeds, s.capacity_seeds)


class _Recorder:
    """Per slot: the active jobs and those allocated, the independent replay (Q4), and the
    policy (GADGET's own per-slot records)."""

    def __init__(self, w: Workload) -> None:
        self.replay = Replay(w.cluster, {j.job_id: j for j in w.jobs})
        self.ratios: list[float] = []
        self.policy: Policy | None = None

    def __call__(self, policy: Policy, view: ClusterView, allocation: Allocation) -> None:
        self.policy = policy
        if len(view):
            self.ratios.append(len(allocation) / len(view))
        self.replay.check(allocation)


def _embedded_ratio(policy: Policy | None) -> float | None:
    """GADGET's embedded ratio (M2): LP-RS-MDE's rings over the active jobs, per slot,
    averaged over the slots with active jobs."""
    decisions = getattr(policy, "decisions", None)
    if not decisions:
        return None
    return float(np.mean([d.placed / d.jobs for d in decisions if d.jobs]))


def run_item(item: Item) -> dict[str, Any] | Failure:
    s = item.scale
    servers, horizon = item.size or (s.servers, s.horizon)
    w = workload(
        item.seed,
        item.jobs,
        servers,
        horizon,
        item.node_scale,
        item.link_scale,
        item.budget_mode,
    )
    policy, options = SCHEMES[item.scheme]
    recorder = _Recorder(w)
    cost = COSTS.of(item.cost)
    outcome = try_simulate(
        w,
        SimulationConfig(
            policy, seed=item.seed, policy_options=options, truth=cost.truth(w.slot_seconds)
        ),
        context={"part": item.part, "scheme": item.scheme, "jobs": item.jobs},
        on_allocate=recorder,
    )
    if isinstance(outcome, Failure):
        return outcome
    summary = summarize(outcome)
    return {
        "part": item.part,
        "scheme": item.scheme,
        "seed": item.seed,
        "jobs": item.jobs,
        "node_scale": item.node_scale,
        "link_scale": item.link_scale,
        "budget_mode": item.budget_mode,
        "cost": item.cost,
        "restarts": summary.restarts,
        "total_utility": summary.total_utility,
        "completed": summary.completed,
        "gpu_utilization": summary.utilization.get("gpu", 0.0),
        # Jobs allocated / active jobs per slot (GADGET: idle fill included).
        "allocated_ratio": float(np.mean(recorder.ratios)) if recorder.ratios else None,
        "embedded_ratio": _embedded_ratio(recorder.policy),
        "replay": recorder.replay.report(),
        **{f"{k}_load": v for k, v in loads(w).items()},
        "wall_seconds": outcome.wall_seconds,
        "summary": summary.to_dict(),
    }
