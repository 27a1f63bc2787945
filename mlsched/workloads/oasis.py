"""The OASiS simulation setting (spec 001 §5.1) with the spec's recommended fixes.

Fixes applied (spec 001 §6; see docs/workloads.md):

* **A12** worker servers are GPU instances (p2.8xlarge, p2.16xlarge, g3.16xlarge) and PS
  servers are c4.8xlarge (the paper's text has the pools the other way round, which leaves
  GPU-needing workers nowhere to run); ``swap_pools=False`` gives the literal reading.
* **A17** tau is drawn log-uniformly and (E, M, tau) are redrawn until the job's minimum
  duration ``d_min = ceil(E M theta)`` is at most ``max_min_duration`` slots; the fraction
  of draws rejected is recorded in ``Workload.notes``.
* **A4** everything is converted to slots with the slot length Delta (default 3600 s):
  ``theta = tau + 2 e / (b Delta)`` with e in bits and b in bit/s.
* **A18** arrivals are a Poisson process of rate I/T per slot over [0, T), conditioned on
  exactly I arrivals (I sorted uniform times, floored to whole slots).

Job ``j`` maps onto :class:`JobSpec` as chunks=N, batches_per_chunk=M, epochs=E, batch_size=1,
compute_s = tau * Delta, gradient_mb = e, max_workers = N, an asynchronous PS job with its
own model name (the runtime model shares fitted parameters per model name) and a sigmoid
utility (priority gamma1, decay gamma2, target gamma3).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from mlsched.core.cluster import Cluster, Pool, Server, Topology
from mlsched.core.errors import SpecError
from mlsched.core.job import Arch, JobSpec, SyncMode
from mlsched.core.resources import ResourceVector
from mlsched.core.utility import Utility
from mlsched.workloads.base import Workload, register_workload

__all__ = [
    "GPU_INSTANCES",
    "JOB_CLASSES",
    "PS_INSTANCE",
    "class_shares",
    "draw_utility",
    "min_duration_slots",
    "oasis_paper",
    "push_pull_seconds",
]

#: EC2 GPU instances for the worker pool: name -> (GPUs, vCPUs, memory GB, GPU type).
GPU_INSTANCES: dict[str, tuple[int, int, int, str]] = {
    "p2.8xlarge": (8, 32, 488, "K80"),
    "p2.16xlarge": (16, 64, 732, "K80"),
    "g3.16xlarge": (4, 64, 488, "M60"),
}
#: The PS-pool instance: c4.8xlarge, no GPU.
PS_INSTANCE: tuple[str, int, int, int] = ("c4.8xlarge", 0, 36, 60)
#: Utility classes: name -> decay range gamma2 (time-insensitive has gamma2 = 0).
JOB_CLASSES: dict[str, tuple[float, float]] = {
    "insensitive": (0.0, 0.0),
    "sensitive": (0.01, 1.0),
    "critical": (4.0, 6.0),
}
_STORAGE_GB = 1000.0
_BATCH = 64  # (E, M, tau) candidates drawn at once
_BATCHES = 400  # candidates per (e, b): 25,600, then e and b are redrawn
_COMM_TRIES = 50  # (e, b) redraws before giving up


def push_pull_seconds(gradient_mb: float, worker_gbps: float) -> float:
    """``2e/b``: seconds one worker takes to push its gradient and pull the parameters at
    its reserved bandwidth (e in MB, b in Gbit/s; spec 001 A4: mind the 8)."""
    return 2.0 * gradient_mb * 8e6 / (worker_gbps * 1e9)


def min_duration_slots(
    epochs: int,
    batches_per_chunk: int,
    tau_slots: float,
    gradient_mb: float,
    worker_gbps: float,
    slot_seconds: float,
) -> int:
    """``d_min = ceil(E M theta)``, theta = tau + 2e/(b Delta) in slots (spec 001 §2.1)."""
    theta = tau_slots + push_pull_seconds(gradient_mb, worker_gbps) / slot_seconds
    return math.ceil(epochs * batches_per_chunk * theta - 1e-9)


def _draw_epochs_batches_tau(
    rng: np.random.Generator,
    gradient_mb: float,
    worker_gbps: float,
    slot_seconds: float,
    bound: float,
) -> tuple[int, tuple[int, int, float] | None]:
    """Draw (E, M, tau) until d_min <= bound (spec 001 A17): (draws used, the accepted
    draw or None when none of the candidates met the bound)."""
    comm_slots = push_pull_seconds(gradient_mb, worker_gbps) / slot_seconds
    if math.ceil(50 * 10 * (0.001 + comm_slots) - 1e-9) > bound:
        return 0, None  # not even the smallest E, M and tau meet it
    used = 0
    for _ in range(_BATCHES):
        epochs = rng.integers(50, 201, size=_BATCH)
        batches = rng.integers(10, 101, size=_BATCH)
        tau = np.exp(rng.uniform(math.log(0.001), math.log(0.1), size=_BATCH))
        d_min = np.ceil(epochs * batches * (tau + comm_slots) - 1e-9)
        ok = np.flatnonzero(d_min <= bound)
        if ok.size:
            k = int(ok[0])
            return used + k + 1, (int(epochs[k]), int(batches[k]), float(tau[k]))
        used += _BATCH
    return used, None


def _cluster(rng: np.random.Generator, n_workers: int, n_ps: int, swap_pools: bool) -> Cluster:
    gpu_names = list(GPU_INSTANCES)

    def server(name: str, pool: Pool, gpu_host: bool) -> Server:
        if gpu_host:
            itype = gpu_names[int(rng.integers(len(gpu_names)))]
            gpus, cpus, mem, gpu_type = GPU_INSTANCES[itype]
        else:
            (itype, gpus, cpus, mem), gpu_type = PS_INSTANCE, None
        link = round(float(rng.uniform(20.0, 50.0)), 3)
        capacity = {"gpu": gpus, "cpu": cpus, "mem_gb": mem, "storage_gb": _STORAGE_GB}
        return Server(
            f"{name}-{itype}",
            ResourceVector({**capacity, "bw_gbps": link}),
            pool=pool,
            gpu_type=gpu_type,
            uplink_gbps=link,
        )

    servers = [server(f"w{h:03d}", Pool.WORKER, swap_pools) for h in range(n_workers)]
    servers.extend(server(f"ps{k:03d}", Pool.PS, not swap_pools) for k in range(n_ps))
    return Cluster(tuple(servers), Topology())


def class_shares(class_mix: Sequence[float]) -> np.ndarray:
    """The probabilities of the utility classes from ``class_mix`` (checked)."""
    mix = np.asarray(class_mix, dtype=float)
    _check(
        "class_mix",
        list(class_mix),
        mix.shape == (3,) and bool(np.all(mix >= 0)) and mix.sum() > 0,
        "three shares >= 0 (insensitive, sensitive, critical)",
    )
    return mix / mix.sum()


def draw_utility(rng: np.random.Generator, probs: np.ndarray) -> tuple[str, Utility]:
    """A class, then its sigmoid: gamma1 U[1, 100], gamma2 from the class, gamma3 U[1, 15]."""
    classes = list(JOB_CLASSES)
    cls = classes[int(rng.choice(len(classes), p=probs))]
    lo, hi = JOB_CLASSES[cls]
    decay = float(rng.uniform(lo, hi)) if hi > 0 else 0.0
    utility = Utility.sigmoid(
        priority=float(rng.uniform(1.0, 100.0)),
        decay=decay,
        target=float(rng.uniform(1.0, 15.0)),
    )
    return cls, utility


def _check(name: str, value: object, ok: bool, expected: str) -> None:
    if not ok:
        raise SpecError(name, value, expected)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


@register_workload(
    "oasis-paper",
    "spec 001 §5.1: 50 GPU worker + 50 c4 PS servers, sigmoid utilities, "
    "Poisson arrivals over T=300 one-hour slots",
)
def oasis_paper(
    seed: int = 0,
    jobs: int = 200,
    horizon: int = 300,
    servers: int = 50,
    ps_servers: int | None = None,
    slot_seconds: float = 3600.0,
    max_min_duration: int = 15,
    class_mix: Sequence[float] = (0.10, 0.55, 0.35),
    swap_pools: bool = True,
) -> Workload:
    """Spec 001's simulated job mix; same seed, same workload.

    ``servers`` is the size of each pool (``ps_servers`` overrides the PS pool), ``horizon``
    the T over which jobs arrive and by which they must finish, ``class_mix`` the shares of
    time-insensitive, -sensitive and -critical jobs.
    """
    _check("jobs", jobs, _is_count(jobs), "an integer >= 1")
    _check("horizon", horizon, _is_count(horizon), "an integer >= 1")
    _check("servers", servers, _is_count(servers), "an integer >= 1")
    n_ps = servers if ps_servers is None else ps_servers
    _check("ps_servers", n_ps, _is_count(n_ps), "an integer >= 1")
    _check(
        "slot_seconds", slot_seconds, _is_number(slot_seconds) and slot_seconds > 0, "a number > 0"
    )
    _check(
        "max_min_duration",
        max_min_duration,
        _is_number(max_min_duration) and max_min_duration >= 1,
        "a number >= 1 slot",
    )
    probs = class_shares(class_mix)

    rng = np.random.default_rng(seed)
    cluster = _cluster(rng, servers, n_ps, swap_pools)
    arrivals = np.sort(np.floor(rng.uniform(0.0, horizon, size=jobs)).astype(int))
    arrivals = np.minimum(arrivals, horizon - 1)
    classes = list(JOB_CLASSES)
    specs: list[JobSpec] = []
    draws = 0
    comm_redraws = 0
    counts = dict.fromkeys(classes, 0)
    for i, arrival in enumerate(arrivals):
        job_id = f"j{i:04d}"
        worker = {
            "gpu": int(rng.integers(0, 5)),
            "cpu": int(rng.integers(1, 11)),
            "mem_gb": int(rng.integers(2, 33)),
            "storage_gb": int(rng.integers(5, 11)),
            "bw_gbps": round(float(rng.uniform(0.1, 5.0)), 3),
        }
        ps = {
            "cpu": int(rng.integers(1, 11)),
            "mem_gb": int(rng.integers(2, 33)),
            "storage_gb": int(rng.integers(5, 11)),
            "bw_gbps": round(float(rng.uniform(5.0, 20.0)), 3),
        }
        n_chunks = int(rng.integers(5, 101))
        gradient_mb = round(float(rng.uniform(30.0, 575.0)), 3)
        for _ in range(_COMM_TRIES):
            found = _draw_epochs_batches_tau(
                rng, gradient_mb, worker["bw_gbps"], slot_seconds, max_min_duration
            )
            draws += found[0]
            if found[1] is not None:
                epochs, batches, tau = found[1]
                break
            # With short slots a slow link alone can keep d_min above the bound whatever
            # (E, M, tau) are; only then are e and b redrawn too (a deviation from A17).
            comm_redraws += 1
            gradient_mb = round(float(rng.uniform(30.0, 575.0)), 3)
            worker["bw_gbps"] = round(float(rng.uniform(0.1, 5.0)), 3)
        else:
            raise SpecError(
                "max_min_duration",
                max_min_duration,
                f"a bound job {job_id} can meet (no draw met it with "
                f"{slot_seconds:g}-second slots)",
            )
        cls, utility = draw_utility(rng, probs)
        counts[cls] += 1
        specs.append(
            JobSpec(
                job_id=job_id,
                utility=utility,
                arrival_slot=int(arrival),
                model=f"syn-{job_id}",
                arch=Arch.PS,
                sync=SyncMode.ASYNC,
                epochs=epochs,
                chunks=n_chunks,
                batches_per_chunk=batches,
                batch_size=1,
                max_workers=n_chunks,
                worker=ResourceVector(worker),
                ps=ResourceVector(ps),
                compute_s=tau * slot_seconds,
                gradient_mb=gradient_mb,
            )
        )
    notes = {
        "spec": "001 §5.1",
        "fixes": [
            "A4 slot units",
            "A12 pools swapped" if swap_pools else "A12 literal pools",
            "A17 log-uniform tau + resampling",
            "A18 Poisson arrivals",
        ],
        "max_min_duration": max_min_duration,
        "draws": draws,
        "resample_rejection_rate": 1.0 - jobs / draws,
        "comm_redraws": comm_redraws,
        "class_counts": counts,
        "servers": {"worker": servers, "ps": n_ps},
    }
    return Workload(
        name="oasis-paper",
        cluster=cluster,
        jobs=tuple(specs),
        horizon_slots=horizon,
        slot_seconds=float(slot_seconds),
        runtime={"ps_async": "ps_async"},
        description=f"spec 001 §5.1: {jobs} jobs over {horizon} slots on {servers} worker + "
        f"{n_ps} PS servers (seed {seed})",
        notes=notes,
    )
