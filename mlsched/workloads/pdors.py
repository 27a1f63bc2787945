"""The PD-ORS simulation setting (spec 000 §5.1) with the spec's recommended fixes.

Synchronous PS jobs with a fixed global batch F and a worker:PS ratio gamma, on identical
machines that host workers and PSs alike; a job runs at its internal rate b(i) only when all
of its tasks share one machine (Fact 1), else at its external rate b(e).

Fixes applied (spec 000 §6; see docs/workloads.md):

* **A20** b(e) ~ U[0.1, 5] Gbit/s per job and b(i) = 10 b(e) (``internal_gbps``); slots
  are one hour.
* **A22** identical machines, 18 x the largest per-task demand: 72 GPUs, 180 vCPUs,
  576 GB memory, 180 GB storage.
* **A23** each job's arrival slot is drawn i.i.d. over the horizon with weight 1 in the
  paper's odd slots and 2 in its even ones (its Google-cluster-like 1/3, 2/3 pattern).
* **A7** gamma is an integer in [1, 10]; a PS reserves gamma x b(e), so a job needs
  ``ceil(n_w / gamma)`` PSs.

Job ``i`` maps onto :class:`JobSpec` as ``epochs=E``, ``chunks=1``, ``batches_per_chunk=K``
(so a work unit is a sample and V = E K), ``batch_size=1``, ``global_batch=F``,
``max_workers=F``, ``ps_ratio=gamma``, ``compute_s = tau * Delta``, ``gradient_mb=g``, a
synchronous PS job with its own model name and a sigmoid utility.

With the paper's ranges many jobs cannot finish within the horizon even alone (the spec
measured 41-66 %): :func:`infeasible_alone` gives the fractions, recorded in
``Workload.notes["infeasible_alone"]``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from mlsched.core.cluster import Cluster, Pool, Server, Topology
from mlsched.core.job import Arch, JobSpec, SyncMode
from mlsched.core.resources import ResourceVector
from mlsched.workloads.base import Workload, register_workload
from mlsched.workloads.oasis import (
    JOB_CLASSES,
    _check,
    _is_count,
    _is_number,
    class_shares,
    draw_utility,
)

__all__ = [
    "MACHINE",
    "alone_slots",
    "infeasible_alone",
    "pdors_paper",
    "slots_per_sample",
]

#: One machine (A22): 18 x the largest per-worker / per-PS demand of §5.1.
MACHINE: dict[str, float] = {"gpu": 72, "cpu": 180, "mem_gb": 576, "storage_gb": 180}
_INTERNAL_FACTOR = 10.0


def slots_per_sample(job: JobSpec, gbps: float, slot_seconds: float) -> float:
    """c = tau + 2 g gamma / (F b): one worker's time per sample at link rate ``gbps``, in
    slots ((E4)); compute only when ``gbps`` is infinite."""
    tau = job.compute_s / slot_seconds
    if math.isinf(gbps):
        return tau
    ratio = job.ps_ratio or 1.0
    batch = job.global_batch or 1
    mb_per_slot = gbps * 125.0 * slot_seconds  # 1 Gbit/s = 450,000 MB per hour (A20)
    return tau + 2.0 * job.gradient_mb * ratio / (batch * mb_per_slot)


def alone_slots(job: JobSpec, mode: str, slot_seconds: float) -> int:
    """d_min = ceil(V c / F): slots the job needs with F workers and the cluster to itself
    (capacity ignored, as the spec's Monte-Carlo check), at ``mode``'s rate:
    ``compute_only``, ``internal`` (b(i)) or ``external`` (b(e))."""
    gbps = {
        "compute_only": math.inf,
        "internal": job.internal_gbps or math.inf,
        "external": job.worker_bw_gbps or math.inf,
    }[mode]
    c = slots_per_sample(job, gbps, slot_seconds)
    return math.ceil(job.total_work * c / job.worker_cap - 1e-9)


def infeasible_alone(
    jobs: Sequence[JobSpec], horizon: int, slot_seconds: float
) -> dict[str, float]:
    """Fractions of ``jobs`` whose :func:`alone_slots` exceed ``horizon``, per mode."""
    modes = ("compute_only", "internal", "external")
    if not jobs:
        return dict.fromkeys(modes, 0.0)
    return {
        m: sum(alone_slots(j, m, slot_seconds) > horizon for j in jobs) / len(jobs) for m in modes
    }


def _cluster(servers: int, pools: str) -> Cluster:
    """``servers`` identical machines; ``split`` puts the first half in a worker pool and
    the rest in a PS pool (OASiS's setting in spec 000 §5.2 item 4)."""
    capacity = ResourceVector(MACHINE)
    out = []
    for h in range(servers):
        pool = Pool.BOTH
        if pools == "split":
            pool = Pool.WORKER if h < (servers + 1) // 2 else Pool.PS
        name = {Pool.BOTH: "m", Pool.WORKER: "w", Pool.PS: "ps"}[pool]
        out.append(Server(f"{name}{h:03d}", capacity, pool=pool, gpu_type="gpu"))
    return Cluster(tuple(out), Topology())


def _arrivals(rng: np.random.Generator, jobs: int, horizon: int) -> np.ndarray:
    # Slot s is the paper's slot s + 1: weight 1 in its odd slots, 2 in its even ones.
    weights = np.where(np.arange(horizon) % 2 == 0, 1.0, 2.0)
    return np.sort(rng.choice(horizon, size=jobs, p=weights / weights.sum()))


def _scaled(times: Sequence[float], jobs: int, horizon: int) -> np.ndarray:
    """``times`` checked (one finite number >= 0 per job) and mapped onto slots."""
    ok = (
        isinstance(times, (list, tuple))
        and len(times) == jobs
        and all(_is_number(t) and 0 <= t < math.inf for t in times)
    )
    _check("arrival_times", times, ok, f"a list of {jobs} finite numbers >= 0, one per job")
    t = np.sort(np.asarray(times, dtype=float))
    span = t[-1] - t[0]
    if span <= 0:
        return np.zeros(jobs, dtype=int)
    return np.minimum(((t - t[0]) / span * horizon).astype(int), horizon - 1)


@register_workload(
    "pdors-paper",
    "spec 000 §5.1: synchronous PS jobs with a worker:PS ratio on identical machines, "
    "internal/external rates, sigmoid utilities, T=20 one-hour slots",
)
def pdors_paper(
    seed: int = 0,
    jobs: int = 50,
    horizon: int = 20,
    servers: int = 100,
    pools: str = "shared",
    class_mix: Sequence[float] = (0.10, 0.55, 0.35),
    slot_seconds: float = 3600.0,
    arrival_times: Sequence[float] | None = None,
) -> Workload:
    """Spec 000's simulated job mix; same seed, same jobs whatever ``servers`` and ``pools``.

    ``pools`` is ``shared`` (every machine hosts workers and PSs: PD-ORS's setting) or
    ``split`` (half worker machines, half PS machines: OASiS's). ``class_mix`` gives the
    shares of time-insensitive, -sensitive and -critical jobs (the paper's trace-like mix
    is 0.30, 0.69, 0.01). ``arrival_times`` (one per job, any unit, e.g. a trace's
    seconds) replace the synthetic arrivals: scaled from their first to their last onto
    slots 0..T-1, so a trace's bursts keep their shape; the jobs are those of the seed.
    """
    _check("jobs", jobs, _is_count(jobs), "an integer >= 1")
    _check("horizon", horizon, _is_count(horizon), "an integer >= 1")
    _check("servers", servers, _is_count(servers), "an integer >= 1")
    _check("pools", pools, pools in ("shared", "split"), "shared or split")
    _check(
        "servers",
        servers,
        pools == "shared" or servers >= 2,
        "at least 2 with split pools (one worker and one PS machine)",
    )
    _check(
        "slot_seconds",
        slot_seconds,
        _is_number(slot_seconds) and 0 < slot_seconds < math.inf,
        "a number > 0",
    )
    probs = class_shares(class_mix)
    # The jobs come from their own stream, so a cluster of another size or layout sees the
    # same jobs (the experiments vary H and the pools at a fixed job set).
    rng = np.random.default_rng([seed, 0])
    arrivals = _arrivals(rng, jobs, horizon)  # drawn either way: the same jobs after it
    if arrival_times is not None:
        arrivals = _scaled(arrival_times, jobs, horizon)
    counts = dict.fromkeys(JOB_CLASSES, 0)
    specs: list[JobSpec] = []
    for i, arrival in enumerate(arrivals):
        job_id = f"j{i:04d}"
        epochs = int(rng.integers(50, 201))
        samples = int(rng.integers(20_000, 500_001))
        gradient_mb = round(float(rng.uniform(30.0, 575.0)), 3)
        tau = float(rng.uniform(1e-5, 1e-4))
        ratio = int(rng.integers(1, 11))
        batch = int(rng.integers(1, 201))
        external = round(float(rng.uniform(0.1, 5.0)), 3)
        worker = {
            "gpu": int(rng.integers(0, 5)),
            "cpu": int(rng.integers(1, 11)),
            "mem_gb": int(rng.integers(2, 33)),
            "storage_gb": int(rng.integers(5, 11)),
            "bw_gbps": external,
        }
        ps = {
            "cpu": int(rng.integers(1, 11)),
            "mem_gb": int(rng.integers(2, 33)),
            "storage_gb": int(rng.integers(5, 11)),
            "bw_gbps": round(external * ratio, 3),  # one PS serves gamma workers at b(e) each (A7)
        }
        cls, utility = draw_utility(rng, probs)
        counts[cls] += 1
        specs.append(
            JobSpec(
                job_id=job_id,
                utility=utility,
                arrival_slot=int(arrival),
                model=f"syn-{job_id}",
                arch=Arch.PS,
                sync=SyncMode.SYNC,
                epochs=epochs,
                chunks=1,
                batches_per_chunk=samples,
                batch_size=1,
                global_batch=batch,
                max_workers=batch,
                ps_ratio=float(ratio),
                worker=ResourceVector(worker),
                ps=ResourceVector(ps),
                compute_s=tau * slot_seconds,
                gradient_mb=gradient_mb,
                internal_gbps=round(external * _INTERNAL_FACTOR, 3),
            )
        )
    late = infeasible_alone(specs, horizon, slot_seconds)
    notes = {
        "spec": "000 §5.1",
        "fixes": ["A7 integer gamma", "A20 b(i) = 10 b(e)", "A22 identical machines", "A23"],
        "class_counts": counts,
        "servers": servers,
        "pools": pools,
        "infeasible_alone": late,
    }
    return Workload(
        name="pdors-paper",
        cluster=_cluster(servers, pools),
        jobs=tuple(specs),
        horizon_slots=horizon,
        slot_seconds=float(slot_seconds),
        runtime={"ps_sync": "ps_sync"},
        description=f"spec 000 §5.1: {jobs} jobs over {horizon} slots on {servers} machines "
        f"({pools} pools, seed {seed}); {late['internal']:.0%} cannot finish even alone",
        notes=notes,
    )
