"""The heterogeneous batch-scheduling setting (spec 002 §5) with the spec's resolutions.

Servers after the AWS P3 (V100), P2 (K80) and G3 (M60) families, cycled (both sizes, or
one: ``sizes``); the cluster
declares the 8 worker types and 10 PS types of
:data:`~mlsched.scheduler.hetero.DEFAULT_CATALOGUE` and every job offers all of them.
Job parameters are drawn uniformly from the paper's ranges: weight [200, 5000], epochs
E [50, 100], chunks D [5, 50] (also the worker cap), mini-batches per chunk K [10, 50],
update time U [10, 100] ms, gradient pi [30, 575] MB, and a per-job base compute time
v in [0.001, 0.05] slots per mini-batch on one V100; a type's compute time is v over its
speed (GPUs x per-GPU speed, [AMB-13]). Half the jobs (``ra_share``) are ring-all-reduce,
the rest synchronous PS jobs: both architectures in one workload.

Unspecified in the paper ([AMB-13]) and chosen here: arrivals uniform over the first half
of the horizon T (``arrivals="poisson"``: a Poisson process of the same mean rate), one-hour
slots, and each job's default bundle (what the baselines run, the spec's "ideal
configuration") is the fastest worker type, v100x4, with ``compute_s_by_type`` also keyed by
GPU model so that bundle runs at the speed of whatever GPUs it lands on. The run lasts
``run_slots`` (default 16 T): A_online's doubling windows start at alpha tau_i, far past T
for late jobs, and the weighted completion time must count every completion.
"""

from __future__ import annotations

import math

import numpy as np

from mlsched.core.cluster import Cluster, Server, Topology
from mlsched.core.device_types import TypeCatalogue
from mlsched.core.job import Arch, JobSpec, SyncMode
from mlsched.core.resources import ResourceVector
from mlsched.scheduler.hetero.catalogue import DEFAULT_CATALOGUE, GPU_SPEED, speed
from mlsched.workloads.base import Workload, register_workload
from mlsched.workloads.oasis import _check, _is_count, _is_number

__all__ = [
    "IDEAL_PS",
    "IDEAL_WORKER",
    "INSTANCES",
    "SIZES",
    "catalogue",
    "hetero_paper",
    "instances",
]

#: (name, GPU model, GPUs, vCPUs, Gbit/s): p3/p2/g3 .8xlarge and .16xlarge.
INSTANCES: tuple[tuple[str, str, int, int, float], ...] = (
    ("p3-8x", "V100", 4, 32, 10.0),
    ("p2-8x", "K80", 8, 32, 10.0),
    ("g3-8x", "M60", 2, 32, 10.0),
    ("p3-16x", "V100", 8, 64, 25.0),
    ("p2-16x", "K80", 16, 64, 25.0),
    ("g3-16x", "M60", 4, 64, 25.0),
)
#: Server sizes a cluster may cycle: both (the default), or the .8xlarge or .16xlarge alone
#: (Figs. 3 and 6 vary H at about constant total capacity: a .16xlarge has twice a
#: .8xlarge's GPUs and vCPUs).
SIZES = ("mixed", "8x", "16x")
#: Each job's ideal configuration's types (AMB-13; what the baselines run).
IDEAL_WORKER = "v100x4"
IDEAL_PS = "ps10"
_IDEAL = IDEAL_WORKER


def instances(sizes: str = "mixed") -> tuple[tuple[str, str, int, int, float], ...]:
    """The instance types a cluster of ``sizes`` (one of :data:`SIZES`) cycles."""
    if sizes == "mixed":
        return INSTANCES
    return tuple(i for i in INSTANCES if i[0].endswith(f"-{sizes}"))


def catalogue(sizes: str = "mixed") -> TypeCatalogue:
    """The shipped types a cluster of ``sizes`` can hold: all of them, but on .8xlarge
    servers alone (10 Gbit/s) the PS types of more bandwidth go."""
    kinds = instances(sizes)

    def holds(demand: ResourceVector, gpu_model: str | None) -> bool:
        return any(
            demand["gpu"] <= gpus
            and demand["cpu"] <= cpus
            and demand["bw_gbps"] <= bw
            and (gpu_model is None or demand["gpu"] == 0 or gpu_model == model)
            for _, model, gpus, cpus, bw in kinds
        )

    return TypeCatalogue(
        tuple(w for w in DEFAULT_CATALOGUE.worker_types if holds(w.demand, w.gpu_model)),
        tuple(p for p in DEFAULT_CATALOGUE.ps_types if holds(p.demand, None)),
    )


def _cluster(servers: int, sizes: str = "mixed") -> Cluster:
    out = []
    kinds = instances(sizes)
    for h in range(servers):
        name, model, gpus, cpus, bw = kinds[h % len(kinds)]
        capacity = ResourceVector({"gpu": gpus, "cpu": cpus, "bw_gbps": bw})
        out.append(Server(f"{name}-{h:03d}", capacity, gpu_type=model, uplink_gbps=bw))
    return Cluster(tuple(out), Topology(), catalogue(sizes))


@register_workload(
    "hetero-paper",
    "spec 002 §5: PS and ring-all-reduce jobs on 8 worker types and 10 PS types over "
    "V100/K80/M60 servers, weights [200, 5000], one-hour slots",
)
def hetero_paper(
    seed: int = 0,
    jobs: int = 100,
    servers: int = 150,
    horizon: int = 150,
    arrivals: str = "uniform",
    ra_share: float = 0.5,
    run_slots: int | None = None,
    slot_seconds: float = 3600.0,
    sizes: str = "mixed",
) -> Workload:
    """Spec 002's job mix; the same seed gives the same jobs whatever ``servers``."""
    _check("jobs", jobs, _is_count(jobs), "an integer >= 1")
    _check("servers", servers, _is_count(servers), "an integer >= 1")
    _check("horizon", horizon, _is_count(horizon) and horizon >= 2, "an integer >= 2")
    _check("arrivals", arrivals, arrivals in ("uniform", "poisson"), "uniform or poisson")
    _check("sizes", sizes, sizes in SIZES, "one of " + ", ".join(SIZES))
    _check(
        "ra_share",
        ra_share,
        _is_number(ra_share) and 0 <= ra_share <= 1,
        "a number in [0, 1]",
    )
    _check(
        "run_slots",
        run_slots,
        run_slots is None or (_is_count(run_slots) and run_slots >= horizon),
        "an integer >= horizon, or null",
    )
    _check(
        "slot_seconds",
        slot_seconds,
        _is_number(slot_seconds) and 0 < slot_seconds < math.inf,
        "a number > 0",
    )
    rng = np.random.default_rng([seed, 2])
    span = horizon // 2
    if arrivals == "uniform":
        slots = np.sort(rng.integers(0, span, size=jobs))
    else:
        gaps = rng.exponential(span / jobs, size=jobs)
        slots = np.minimum(np.cumsum(gaps).astype(int), span - 1)
    types = catalogue(sizes)
    worker_types = {n: t.demand for n, t in types.workers.items()}
    ps_types = {n: t.demand for n, t in types.ps.items()}
    ideal = DEFAULT_CATALOGUE.workers[_IDEAL]
    # The ideal PS type, or the largest these servers hold.
    ideal_ps = types.ps.get(IDEAL_PS, types.ps_types[-1]).demand
    specs: list[JobSpec] = []
    for i, arrival in enumerate(slots):
        ring = bool(rng.random() < ra_share)
        base = float(rng.uniform(0.001, 0.05)) * slot_seconds  # seconds on one V100
        by_type = {n: base / speed(t) for n, t in types.workers.items()}
        gpus = ideal.demand["gpu"]
        by_type.update({m: base / (gpus * s) for m, s in GPU_SPEED.items()})
        chunks = int(rng.integers(5, 51))
        specs.append(
            JobSpec(
                job_id=f"h{i:04d}",
                arrival_slot=int(arrival),
                model=f"syn-h{i:04d}",
                arch=Arch.ALLREDUCE if ring else Arch.PS,
                sync=SyncMode.SYNC,
                epochs=int(rng.integers(50, 101)),
                chunks=chunks,
                batches_per_chunk=int(rng.integers(10, 51)),
                max_workers=chunks,
                worker=ideal.demand,
                ps=ideal_ps,
                worker_types=worker_types,
                ps_types={} if ring else ps_types,
                compute_s=base / speed(ideal),
                compute_s_by_type=by_type,
                update_s=round(float(rng.uniform(0.01, 0.1)), 4),
                gradient_mb=round(float(rng.uniform(30.0, 575.0)), 3),
                weight=round(float(rng.uniform(200.0, 5000.0)), 3),
            )
        )
    notes = {
        "spec": "002 §5",
        "arrivals": arrivals,
        "horizon": horizon,
        "servers": servers,
        "sizes": sizes,
        "ring_jobs": sum(j.arch is Arch.ALLREDUCE for j in specs),
    }
    return Workload(
        name="hetero-paper",
        cluster=_cluster(servers, sizes),
        jobs=tuple(specs),
        horizon_slots=run_slots or 16 * horizon,
        slot_seconds=float(slot_seconds),
        runtime={"ps_sync": "hetero", "allreduce": "hetero"},
        description=f"spec 002 §5: {jobs} jobs arriving over slots 0..{span - 1} on "
        f"{servers} servers (seed {seed})",
        notes=notes,
    )
