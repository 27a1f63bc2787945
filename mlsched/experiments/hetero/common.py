"""Shared pieces of the hetero experiment: scales, schemes, one run and its record."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from mlsched.core.allocation import JobState
from mlsched.engine.builder import Failure, SimulationConfig, try_simulate
from mlsched.engine.engine import RunResult
from mlsched.engine.summary import summarize
from mlsched.experiments.costs import CLUSTER, Costs, slot_share
from mlsched.scheduler.hetero.catalogue import DEFAULT_CATALOGUE
from mlsched.scheduler.placement import can_ever_run
from mlsched.workloads.base import Workload
from mlsched.workloads.hetero import instances
from mlsched.workloads.loading import load_workload

#: What a restart costs (results.json says): 0.1 slot for the verdicts, spec 002 AMB-15's
#: preemption penalty, charged to every scheme alike; a cluster's beside, on hetero-paper's
#: one-hour slot.
COSTS = Costs(
    slot_share(0.1, "0.1 slot, spec 002 AMB-15's preemption penalty, to every scheme alike"),
    CLUSTER,
    3600.0,
)

PRIMARY = "hetero"
#: A_online as the paper has it decides the checks; with the spec's compacted offsets
#: (each round's window right after the last committed job, not at alpha tau_i; ours) it
#: runs beside, its checks rows of their own.
VARIANT = "hetero-compact"
#: Our additions to the paper's algorithm: scheme -> the label of its checks' rows.
ADDITIONS: dict[str, str] = {VARIANT: "A_online + compacted offsets (ours)"}
#: The compared schemes (spec 002 §5): name -> (policy, options). The baselines run each
#: job's ideal bundle (the workload's default worker, v100x4). FIFO draws each job's worker
#: count from [1, 30] capped at D_j (§5 item 1; ``worker_rule="drawn"``); Tiresias (the
#: least-attained-service scheduler the paper cites, [20]), 2D-LAS (ranked by remaining
#: work x resources, how the paper's §7 describes Tiresias) and the AntMan-style baseline
#: run the ideal count min(D_j, 30) (AMB-13; ``worker_rule="ideal"``), capped where the
#: cluster holds fewer; each with the fewest PSs its bandwidth needs. DRF fills
#: progressively. A_online's T of lambda is the nominal horizon, set per run
#: (:func:`run_item`).
#: Constraint (2i) for the baselines as for A_online (spec 002 §5 item 1): a job's PSs all
#: on one server (AMB-6), ps_needed(W) of them, which cover every worker placed elsewhere.
_2I: dict[str, Any] = {"one_ps_host": True}
SCHEMES: dict[str, tuple[str, dict[str, Any]]] = {
    PRIMARY: ("hetero", {}),
    VARIANT: ("hetero", {"compact_offsets": True}),
    "fifo": ("fifo", {"ps_rule": "needed", "worker_rule": "drawn", **_2I}),
    "drf": ("drf", {**_2I}),
    "tiresias": ("tiresias", {"ps_rule": "needed", "worker_rule": "ideal", **_2I}),
    "las2d": ("las2d", {"ps_rule": "needed", "worker_rule": "ideal", **_2I}),
    "antman": ("antman", {"ps_rule": "needed", "worker_rule": "ideal", **_2I}),
}
HETEROS = (PRIMARY, VARIANT)
#: The schemes with a fixed worker count (``max_workers``).
FIXED_COUNTS = ("fifo", "tiresias", "las2d", "antman")
#: AMB-13's bound on the ideal worker count.
MAX_WORKERS = 30
BASELINES = tuple(name for name in SCHEMES if name not in (PRIMARY, VARIANT))
#: The baselines that preempt, as the paper names them ("AntMan and Tiresias are much
#: worse than the rest because of frequent preemption"): Tiresias as its authors define it.
PREEMPTING = ("tiresias", "antman")
#: The same claim with Tiresias as the paper's §7 describes it (2D-LAS), a check beside.
PREEMPTING_AS_DESCRIBED = ("las2d", "antman")
#: The paper's claim: A_online's total weighted completion time is at least 30 % lower
#: than every baseline's (Figs. 2 and 5).
CLAIMED_REDUCTION = 0.30
#: The architectures, each its own part as the paper evaluates them (Fig. 2: PS, Fig. 5:
#: ring-all-reduce), and both mixed half and half (an extra row): name -> ring share.
ARCHS: dict[str, float] = {"ps": 0.0, "ring": 1.0, "mix": 0.5}
#: The parts whose figures decide the claims.
CLAIM_ARCHS = ("ps", "ring")


@dataclass(frozen=True)
class HeteroScale:
    """Sizes of one scale.

    schemes: every scheme on ``jobs`` jobs arriving over the first half of the paper's
    horizon ``horizon`` (T, also lambda's T), PS-only and ring-only, on clusters holding
    each of ``capacities`` of the jobs' ideal demand (the cluster's GPUs over the sum of
    every job's ideal bundle's, spec 002 §5: 0.2-0.5); the mix of both at
    ``default_capacity``. A run lasts until every job finished, bounded at ``run_factor``
    T (far past the last completion; the unfinished count is reported and fails a check).
    alpha: hetero at each of ``alphas`` (besides the default 4) at the default capacity.
    maxweight (Fig. 8): one A_maxweight call and Jain et al.'s greedy on a batch of each of
    ``batch_jobs`` jobs (PS-only) over a window of ``batch_tau`` slots on the cluster of
    the schemes' PS part at ``default_capacity`` (one cluster for every batch size).
    """

    jobs: int
    horizon: int
    capacities: tuple[float, ...]
    default_capacity: float
    run_factor: int
    alphas: tuple[int, ...]
    batch_jobs: tuple[int, ...]
    batch_tau: int
    #: Figs. 11-12: A_maxweight on the smallest batch at each F (besides the default 10)
    #: and on the clusters of each of ``capacities`` (more servers: H).
    batch_fs: tuple[float, ...] = ()
    #: Fig. 4: A_online at each F besides the policy's default, at the default capacity.
    fs: tuple[float, ...] = ()
    #: Fig. 7: A_online's time on PS jobs at each of these job counts (and ``jobs``) on the
    #: servers of the default capacity's cluster.
    runtime_jobs: tuple[int, ...] = ()
    #: Fig. 9: A_online with every PS job held to each of these worker types, at the
    #: default capacity, beside A_online free to choose.
    forced_types: tuple[str, ...] = ()
    #: Fig. 10: A_online with every PS job held to at most each of these worker counts
    #: (besides each job's own D_j, the schemes' run), at the default capacity.
    worker_caps: tuple[int, ...] = ()


#: Fig. 9's four EC2 types (p3.4xlarge, p2.2xlarge, p3.2xlarge, p2.xlarge; the first two do
#: not exist, AMB-14) as the catalogue's V100 and K80 bundles of four and one GPUs.
FORCED_TYPES = ("v100x4", "k80x4", "v100x1", "k80x1")

SCALE_SETTINGS: dict[str, HeteroScale] = {
    "smoke": HeteroScale(
        jobs=6,
        horizon=150,
        capacities=(0.35,),
        default_capacity=0.35,
        run_factor=64,
        alphas=(1,),
        batch_jobs=(6,),
        batch_tau=64,
        batch_fs=(2.5,),
        fs=(2.5,),
        runtime_jobs=(3, 6),
        forced_types=("v100x4", "k80x1"),
        worker_caps=(4,),
    ),
    # The paper's T and capacities; 10 jobs keep the clusters at 20-60 servers (A_online's
    # rounds cost seconds per run there).
    "default": HeteroScale(
        jobs=10,
        horizon=150,
        capacities=(0.2, 0.35, 0.5),
        default_capacity=0.35,
        run_factor=64,
        alphas=(1,),
        # Batches of 20 and 40 jobs offer 2-3x the weight one window holds (at 10 both
        # schedulers took the same jobs on most seeds: nearly every job fit); a 40-job
        # batch costs about 10 s per seed.
        batch_jobs=(20, 40),
        batch_tau=64,
        batch_fs=(2.5, 40.0),
        # A_online with F = 40 beside the default 10 (at 2.5, 10 and 40 it scheduled
        # alike to the digit: F's prices stay far below the weights here).
        fs=(40.0,),
        runtime_jobs=(5, 20),
        forced_types=FORCED_TYPES,
        worker_caps=(1, 2, 4, 8),
    ),
    "paper": HeteroScale(
        jobs=40,
        horizon=150,
        capacities=(0.2, 0.35, 0.5),
        default_capacity=0.35,
        run_factor=64,
        alphas=(1, 2, 8),
        batch_jobs=(50, 100, 200),
        batch_tau=64,
        batch_fs=(1.0, 2.5, 40.0, 160.0),
        fs=(1.0, 2.5, 40.0, 160.0),
        runtime_jobs=(10, 20, 40, 80),
        forced_types=FORCED_TYPES,
        worker_caps=(1, 2, 4, 8, 16),
    ),
}

#: GPUs of the ideal worker bundle (v100x4).
IDEAL_GPUS = float(DEFAULT_CATALOGUE.workers["v100x4"].demand["gpu"])


def is_free_run(r: dict[str, Any], s: HeteroScale, arch: str | None = None) -> bool:
    """``r`` is A_online's own run in the schemes part at the default capacity (of ``arch``
    when given): the run each held, capped, sized or varied part is set against."""
    return (
        r["part"] == "schemes"
        and r["scheme"] == PRIMARY
        and r["capacity"] == s.default_capacity
        and (arch is None or r["arch"] == arch)
    )


def ideal_gpus(w: Workload) -> float:
    """The jobs' ideal demand: every job's ideal bundle, min(D_j, 30) v100x4 workers."""
    return sum(min(j.worker_cap, MAX_WORKERS) * IDEAL_GPUS for j in w.jobs)


def servers_for(capacity: float, demand_gpus: float, sizes: str = "mixed") -> int:
    """The fewest servers (cycling the workload's instance types of ``sizes``) whose GPUs
    reach ``capacity`` of ``demand_gpus``."""
    kinds = instances(sizes)
    total, n = 0.0, 0
    while total < capacity * demand_gpus or n == 0:
        total += kinds[n % len(kinds)][2]
        n += 1
    return n


@lru_cache(maxsize=16)
def on_servers(
    seed: int,
    jobs: int,
    horizon: int,
    arch: str,
    servers: int,
    run_factor: int,
    sizes: str = "mixed",
) -> Workload:
    """A seed's jobs of one architecture part (the same whatever the cluster) on
    ``servers`` servers, the run bounded at run_factor T."""
    return load_workload(
        "hetero-paper",
        seed=seed,
        jobs=jobs,
        horizon=horizon,
        options={
            "servers": servers,
            "ra_share": ARCHS[arch],
            "run_slots": run_factor * horizon,
            "sizes": sizes,
        },
    )


def workload(
    seed: int,
    jobs: int,
    horizon: int,
    arch: str,
    capacity: float,
    run_factor: int,
    sizes: str = "mixed",
) -> Workload:
    """A seed's jobs of one architecture part on the cluster holding ``capacity`` of their
    ideal demand."""
    demand = ideal_gpus(on_servers(seed, jobs, horizon, arch, 1, run_factor))
    servers = servers_for(capacity, demand, sizes)
    return on_servers(seed, jobs, horizon, arch, servers, run_factor, sizes)


@dataclass(frozen=True)
class Item:
    """One run: part (``schemes`` or ``alpha``), architecture part, cluster capacity, seed,
    scheme name, policy and options."""

    part: str
    arch: str
    capacity: float
    seed: int
    name: str
    policy: str
    options: tuple[tuple[str, Any], ...] = ()
    scale: HeteroScale = field(default_factory=lambda: SCALE_SETTINGS["smoke"])
    cost: str = "paper"  # whose restart cost it charges: the paper's or a cluster's
    #: Another number of jobs on the same servers (Fig. 7's runs; the policy's time is
    #: measured); None: the scale's, on the cluster of ``capacity``.
    jobs: int | None = None
    #: What every job is held to (:func:`held`): ``("worker_type", name)`` (Fig. 9) or
    #: ``("worker_cap", n)`` (Fig. 10); None: the jobs as generated.
    hold: tuple[str, Any] | None = None
    #: The server sizes of the cluster (``hetero-paper``'s ``sizes``: Figs. 3 and 6 vary H
    #: at about constant capacity).
    sizes: str = "mixed"


def worker_cap(w: Workload) -> int:
    """The ideal count's bound: AMB-13's 30, or less where the empty cluster cannot hold
    some job's min(D_j, bound) workers beside the PSs they need (a count that can never
    run would charge the run's bound for the size of the cluster, not for its
    scheduler): the largest such bound, the PSs on one server as (2i) wants them."""
    for cap in range(MAX_WORKERS, 0, -1):
        if all(can_ever_run(j, w.cluster, min(j.worker_cap, cap), True) for j in w.jobs):
            return cap
    return 1


def weighted_from_arrival(result: RunResult, charge: int) -> float:
    """Sum of w_j (c_j - a_j) (the spec's second metric); a job not done is charged
    ``charge`` as its completion, as in ``weighted_completion_time``."""
    total = 0.0
    for r in result.records.values():
        done = r.state is JobState.DONE and r.completion_slot is not None
        c = r.completion_slot + 1 if done else charge  # type: ignore[operator]
        total += r.spec.weight * (c - r.spec.arrival_slot)
    return total


def held(w: Workload, what: str, value: Any) -> Workload:
    """The workload with every job held to one worker type (``worker_type``: its only
    type, bundle and speed, Fig. 9's "all jobs forced onto a single worker type") or to at
    most ``value`` workers (``worker_cap``, Fig. 10's worker count)."""
    jobs = []
    for j in w.jobs:
        if what == "worker_type":
            demand = j.worker_types[value]
            j = dataclasses.replace(
                j,
                worker=demand,
                worker_types={value: demand},
                compute_s=j.compute_s_for(value),
            )
        elif what == "worker_cap":
            j = dataclasses.replace(j, max_workers=min(j.worker_cap, int(value)))
        else:
            raise ValueError(f"hold must be worker_type or worker_cap, got {what!r}")
        jobs.append(j)
    return dataclasses.replace(w, jobs=tuple(jobs))


def run_item(item: Item) -> dict[str, Any] | Failure:
    s = item.scale
    w = workload(item.seed, s.jobs, s.horizon, item.arch, item.capacity, s.run_factor, item.sizes)
    if item.jobs is not None:
        servers = len(w.cluster.servers)
        w = on_servers(item.seed, item.jobs, s.horizon, item.arch, servers, s.run_factor)
    if item.hold is not None:
        w = held(w, *item.hold)
    run_slots = w.horizon_slots or s.run_factor * s.horizon
    options = dict(item.options)
    if item.name in FIXED_COUNTS:
        options.setdefault("max_workers", worker_cap(w))
    if item.policy == "hetero":
        options.setdefault("horizon", s.horizon)  # lambda's T: the paper's, not the bound
    config = SimulationConfig(
        item.policy,
        seed=item.seed,
        policy_options=options,
        truth=COSTS.of(item.cost).truth(w.slot_seconds),
        # Faithful windows start at alpha tau_i: the cluster may idle for long stretches
        # while jobs wait for theirs; that is not a stall.
        stall_slots=run_slots,
    )
    calls: list[float] = []
    outcome = try_simulate(
        w,
        config,
        context={"part": item.part, "arch": item.arch, "capacity": item.capacity,
                 "scheme": item.name},
        # The policy's own time (Fig. 7), only where asked: a watched run is not cached.
        observe=(lambda _what, seconds: calls.append(seconds)) if item.jobs else None,
    )  # fmt: skip
    if isinstance(outcome, Failure):
        return outcome
    summary = summarize(outcome)
    unfinished = sum(r.state is not JobState.DONE for r in outcome.records.values())
    return {
        "part": item.part,
        "arch": item.arch,
        "capacity": item.capacity,
        "servers": len(w.cluster.servers),
        "scheme": item.name,
        "seed": item.seed,
        "options": options,
        "summary": summary.to_dict(),
        "weighted_completion_time": summary.weighted_completion_time,
        "weighted_from_arrival": weighted_from_arrival(outcome, run_slots),
        "completed": summary.completed,
        "restarts": summary.restarts,
        # Seconds charged for them (the run's restart cost times the restarts).
        "restart_s": float(sum(r.restart_s for r in outcome.records.values())),
        "cost": item.cost,
        "unfinished": unfinished,
        "slots": outcome.slots,
        "jobs": len(outcome.records),
        "policy_seconds": float(sum(calls)) if item.jobs else None,
        "hold": list(item.hold) if item.hold is not None else None,
        "wall_seconds": outcome.wall_seconds,
    }
