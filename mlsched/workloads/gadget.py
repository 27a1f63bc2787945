"""The GADGET simulation setting (spec 003 §5) with the spec's recommended resolutions.

Ring-all-reduce jobs on a two-tier tree (A18): ``servers`` (S = 50) servers split at random
into 2-5 racks (every rack non-empty), each with 1, 2, 4 or 8 GPUs (uniform) and a server
link U[10, 100] Gbit/s each way; each rack's link to the core U[200, 3200] Gbit/s each
way. Servers offer GPUs only and a worker takes one GPU (§5, A24). Hops inside a server are
free (A30); the intra-server rate stays the topology default.

Jobs (integers uniform in the paper's ranges): N_i in [1, 5] (``max_workers``), budget F_i
in [1000, 6000] iterations, zeta_i in [50, 500] iterations per worker per slot, b_i in
[100, 5000] Mbit/s (``hop_gbps``, reserved on every link of every inter-server hop);
sigmoid utility over progress mu(x) = l1 / (1 + exp(-l2 (x - l3))), l1 U[1, 100], l2 a
real U(0, 1) (A14), l3 in [300, 3000] iterations.

Units (A3, A4, paper mode). The budget is in iterations: a job's total work is F_i work
units (``epochs = chunks = 1``, ``batches_per_chunk = F_i``). A ring step of w workers
completes w units (worker-iterations), so with ``compute_s = slot_seconds / zeta_i`` and
``gradient_mb = 0`` (no communication time: zeta is a constant of the job, whatever the
placement) w workers progress w zeta_i units per slot, and x in mu(x) is the job's progress
in iterations. The lifetime budget U_i = F_i / zeta_i worker-slots follows.
``budget_mode="worker_slots"`` takes the experiment's formula literally instead (A3): F_i
is a budget of worker-slots, so a job's total work is F_i zeta_i iterations and U_i = F_i;
with N_i <= 5 the budget then never binds within T = 200 and every job wants every slot,
the load under which the paper's Fig. 4 separates the schemes.

Chosen here, where the paper is silent:

* **Slot length** 60 s (the spec's testbed range is 60-300 s; only ratios matter in paper
  mode, since compute_s is derived from it).
* **Arrivals** (A22: the Google trace is not available): Poisson with bursty rate
  modulation, a two-state Markov-modulated Poisson process over the T slots. The state
  (calm or burst) changes at each slot boundary with probability 0.1 (calm -> burst) or
  0.25 (burst -> calm): bursts last 4 slots on average, calm spells 10, and about 2/7 of the
  slots are bursts; the first slot's state is drawn from that stationary share. A burst
  slot's rate is 5 x a calm one's. Conditioned on exactly n = ``jobs`` arrivals, the
  arrival slots are n i.i.d. draws with probability proportional to each slot's rate.
  ``arrivals="poisson"``: one rate throughout (uniform slots).

The cluster, the jobs and the arrivals come from separate streams of the seed: the same
seed gives the same jobs whatever ``servers``, ``horizon`` and the scales. ``node_scale``
and ``link_scale`` multiply every server's GPUs and every link (A23's sweeps;
:meth:`Cluster.scaled`).
"""

from __future__ import annotations

import math

import numpy as np

from mlsched.core.cluster import Cluster, Server, Topology
from mlsched.core.job import Arch, JobSpec, SyncMode
from mlsched.core.resources import ResourceVector
from mlsched.core.utility import Utility, UtilityKind
from mlsched.workloads.base import Workload, register_workload
from mlsched.workloads.oasis import _check, _is_count, _is_number

__all__ = ["BUDGET_MODES", "BURST", "GPU_CHOICES", "bursty_weights", "gadget_paper"]

#: GPUs per server (following Themis).
GPU_CHOICES: tuple[int, ...] = (1, 2, 4, 8)
#: The arrival process: P(calm -> burst), P(burst -> calm) per slot, burst rate / calm rate.
BURST: tuple[float, float, float] = (0.1, 0.25, 5.0)
_WORKER = ResourceVector({"gpu": 1})  # A24: one GPU per worker


def bursty_weights(rng: np.random.Generator, horizon: int) -> tuple[np.ndarray, np.ndarray]:
    """(per-slot arrival rate, up to a factor; which slots are bursts) of the two-state
    modulated process (module docstring)."""
    to_burst, to_calm, factor = BURST
    burst = np.zeros(horizon, dtype=bool)
    state = bool(rng.random() < to_burst / (to_burst + to_calm))
    flips = rng.random(horizon)
    for t in range(horizon):
        burst[t] = state
        state = bool(flips[t] >= to_calm) if state else bool(flips[t] < to_burst)
    return np.where(burst, factor, 1.0), burst


def _cluster(rng: np.random.Generator, servers: int) -> tuple[Cluster, dict[str, int]]:
    n_racks = min(int(rng.integers(2, 6)), servers)
    # The first n_racks servers of a random order open one rack each: none is empty.
    rack_of = np.empty(servers, dtype=np.intp)
    perm = rng.permutation(servers)
    rack_of[perm[:n_racks]] = np.arange(n_racks)
    rack_of[perm[n_racks:]] = rng.integers(0, n_racks, size=servers - n_racks)
    gpus = rng.choice(GPU_CHOICES, size=servers)
    links = rng.uniform(10.0, 100.0, size=servers)
    out = [
        Server(
            f"s{h:03d}",
            ResourceVector({"gpu": int(gpus[h])}),
            rack=f"rack{int(rack_of[h])}",
            uplink_gbps=round(float(links[h]), 3),
        )
        for h in range(servers)
    ]
    uplinks = {f"rack{r}": round(float(rng.uniform(200.0, 3200.0)), 3) for r in range(n_racks)}
    sizes = {f"rack{r}": int((rack_of == r).sum()) for r in range(n_racks)}
    return Cluster(tuple(out), Topology(rack_uplink_gbps=uplinks)), sizes


#: A3's two readings of the budget F_i.
BUDGET_MODES = ("iterations", "worker_slots")


def _job(
    rng: np.random.Generator, i: int, arrival: int, slot_seconds: float, budget_mode: str
) -> JobSpec:
    job_id = f"g{i:04d}"
    workers = int(rng.integers(1, 6))
    budget = int(rng.integers(1000, 6001))
    zeta = int(rng.integers(50, 501))
    hop_mbps = int(rng.integers(100, 5001))
    utility = Utility(
        UtilityKind.SIGMOID_PROGRESS,
        {
            "priority": round(float(rng.uniform(1.0, 100.0)), 3),
            "sensitivity": 1.0 - float(rng.random()),  # in (0, 1]: never a flat 0
            "expected": int(rng.integers(300, 3001)),
        },
    )
    return JobSpec(
        job_id=job_id,
        utility=utility,
        arrival_slot=arrival,
        model=f"syn-{job_id}",  # the runtime model fits per model name: one per job
        arch=Arch.ALLREDUCE,
        sync=SyncMode.SYNC,
        epochs=1,
        chunks=1,
        # Iterations: F_i of them. Worker-slots: F_i of them, zeta_i iterations each.
        batches_per_chunk=budget if budget_mode == "iterations" else budget * zeta,
        max_workers=workers,
        worker=_WORKER,
        compute_s=slot_seconds / zeta,
        gradient_mb=0.0,
        hop_gbps=hop_mbps / 1000.0,
    )


@register_workload(
    "gadget-paper",
    "spec 003 §5: ring-all-reduce jobs reserving per-hop bandwidth on a two-tier tree of "
    "1-8 GPU servers in 2-5 racks, sigmoid progress utilities, bursty Poisson arrivals, "
    "T=200 one-minute slots",
)
def gadget_paper(
    seed: int = 0,
    jobs: int = 100,
    servers: int = 50,
    horizon: int = 200,
    slot_seconds: float = 60.0,
    arrivals: str = "bursty",
    node_scale: float = 1.0,
    link_scale: float = 1.0,
    budget_mode: str = "iterations",
) -> Workload:
    """Spec 003's simulated job mix (module docstring); same seed, same workload."""
    _check("jobs", jobs, _is_count(jobs), "an integer >= 1")
    _check("servers", servers, _is_count(servers) and servers >= 2, "an integer >= 2")
    _check("horizon", horizon, _is_count(horizon), "an integer >= 1")
    _check(
        "slot_seconds",
        slot_seconds,
        _is_number(slot_seconds) and 0 < slot_seconds < math.inf,
        "a number > 0",
    )
    _check("arrivals", arrivals, arrivals in ("bursty", "poisson"), "bursty or poisson")
    _check("budget_mode", budget_mode, budget_mode in BUDGET_MODES, " or ".join(BUDGET_MODES))
    for name, value in (("node_scale", node_scale), ("link_scale", link_scale)):
        _check(name, value, _is_number(value) and 0 < value < math.inf, "a scale > 0")
    cluster, rack_sizes = _cluster(np.random.default_rng([seed, 0]), servers)
    if node_scale != 1.0 or link_scale != 1.0:
        cluster = cluster.scaled(float(node_scale), links=float(link_scale))
    arrival_rng = np.random.default_rng([seed, 2])
    if arrivals == "bursty":
        rates, burst = bursty_weights(arrival_rng, horizon)
    else:
        rates, burst = np.ones(horizon), np.zeros(horizon, dtype=bool)
    slots = np.sort(arrival_rng.choice(horizon, size=jobs, p=rates / rates.sum()))
    job_rng = np.random.default_rng([seed, 1])
    specs = [
        _job(job_rng, i, int(a), float(slot_seconds), budget_mode) for i, a in enumerate(slots)
    ]
    gpus = float(cluster.total[cluster.resource_names.index("gpu")])
    notes = {
        "spec": "003 §5",
        "fixes": [
            "A3 iteration budget: total work F_i, w workers progress w zeta_i per slot"
            if budget_mode == "iterations"
            else "A3 literal worker-slot budget: total work F_i zeta_i, U_i = F_i",
            "A4 constant zeta (paper mode): no communication time",
            "A14 sensitivity a real U(0, 1)",
            "A18 two-tier tree, intra-server hops free",
            "A22 bursty Poisson arrivals (two-state modulated; the Google trace is unavailable)",
            "A24 one GPU per worker",
        ],
        "servers": servers,
        "racks": rack_sizes,
        "arrivals": arrivals,
        "burst_slots": int(burst.sum()),
        "slot_seconds": float(slot_seconds),
        "node_scale": float(node_scale),
        "link_scale": float(link_scale),
        "budget_mode": budget_mode,
        "gpus": gpus,
        # Budgets in worker-slots (U_i = F_i / zeta_i) over the GPU-slots of the horizon.
        "offered_load": round(
            sum(j.total_work * j.compute_s / float(slot_seconds) for j in specs) / (gpus * horizon),
            4,
        ),
    }
    if arrivals == "bursty":
        notes["burst"] = {"to_burst": BURST[0], "to_calm": BURST[1], "rate_factor": BURST[2]}
    return Workload(
        name="gadget-paper",
        cluster=cluster,
        jobs=tuple(specs),
        horizon_slots=horizon,
        slot_seconds=float(slot_seconds),
        runtime={"allreduce": "ring"},
        description=f"spec 003 §5: {jobs} ring-all-reduce jobs over {horizon} slots on "
        f"{servers} servers in {len(rack_sizes)} racks ({arrivals} arrivals, seed {seed})",
        notes=notes,
    )
