"""A tiny built-in workload, ``demo``: a dozen ResNet/VGG-flavoured jobs on four servers.

Small enough to simulate in well under a second, contended enough (eight GPUs, 128 cores,
jobs that want 2-8 workers each) that policies make visibly different choices. It mixes the
three job kinds the runtime model knows: asynchronous and synchronous parameter-server
jobs and ring-all-reduce jobs. The per-mini-batch times and gradient sizes are those of
CIFAR-10-sized ResNet-20/56 and VGG-11/16 models, so the same mix can later run as real
training on the testbed (``make demo``).
"""

from __future__ import annotations

import numpy as np

from mlsched.core.cluster import Cluster, Pool, Server, Topology
from mlsched.core.errors import SpecError
from mlsched.core.job import Arch, JobSpec, SyncMode
from mlsched.core.resources import ResourceVector
from mlsched.core.utility import Utility
from mlsched.workloads.base import Workload, register_workload

__all__ = ["demo", "demo_cluster"]

# model -> (compute seconds per mini-batch of 32 on one worker, gradient MB)
_MODELS: dict[str, tuple[float, float]] = {
    "resnet20": (0.06, 1.1),
    "resnet56": (0.16, 3.4),
    "vgg11": (0.12, 37.0),
    "vgg16": (0.20, 59.0),
}
# (model, arch, sync, gpu?, max workers, work in single-worker slots, priority, decay,
#  target slots)
_TEMPLATE: tuple[tuple[str, Arch, SyncMode, bool, int, float, float, float, float], ...] = (
    ("resnet20", Arch.PS, SyncMode.ASYNC, True, 4, 12, 40.0, 0.5, 6.0),
    ("vgg11", Arch.PS, SyncMode.ASYNC, False, 6, 20, 60.0, 1.0, 8.0),
    ("resnet56", Arch.PS, SyncMode.SYNC, True, 4, 16, 30.0, 0.3, 10.0),
    ("resnet20", Arch.ALLREDUCE, SyncMode.SYNC, True, 4, 10, 50.0, 1.5, 5.0),
    ("vgg16", Arch.PS, SyncMode.SYNC, False, 8, 32, 80.0, 0.8, 12.0),
    ("vgg11", Arch.ALLREDUCE, SyncMode.SYNC, True, 4, 12, 20.0, 0.0, 15.0),
    ("resnet56", Arch.PS, SyncMode.ASYNC, False, 6, 24, 25.0, 0.4, 9.0),
    ("resnet20", Arch.PS, SyncMode.SYNC, False, 4, 10, 15.0, 0.0, 10.0),
    ("vgg11", Arch.PS, SyncMode.ASYNC, True, 2, 8, 70.0, 1.0, 7.0),
    ("resnet56", Arch.ALLREDUCE, SyncMode.SYNC, False, 8, 28, 35.0, 0.6, 8.0),
    ("vgg16", Arch.ALLREDUCE, SyncMode.SYNC, True, 4, 14, 45.0, 0.7, 10.0),
    ("resnet20", Arch.PS, SyncMode.ASYNC, False, 8, 20, 10.0, 0.2, 12.0),
)
_BATCHES_PER_CHUNK = 50  # mini-batches of 32 per chunk: 1,600 CIFAR images


def demo_cluster() -> Cluster:
    """Two 4-GPU servers in one rack, two CPU servers in another; every server hosts both
    workers and PSs."""

    def server(name: str, rack: str, gpus: int) -> Server:
        cap = {"cpu": 32, "mem_gb": 128, "bw_gbps": 10, "gpu": gpus}
        return Server(
            name,
            ResourceVector(cap),
            pool=Pool.BOTH,
            gpu_type="T4" if gpus else None,
            rack=rack,
            uplink_gbps=10.0,
        )

    return Cluster(
        (
            server("gpu-0", "rack0", 4),
            server("gpu-1", "rack0", 4),
            server("cpu-0", "rack1", 0),
            server("cpu-1", "rack1", 0),
        ),
        Topology(intra_server_gbps=100.0, rack_core_gbps=20.0),
    )


@register_workload(
    "demo", "12 ResNet/VGG PS (async, sync) and all-reduce jobs on 4 servers, 40 one-minute slots"
)
def demo(seed: int = 0, jobs: int = 12, horizon: int = 40, slot_seconds: float = 60.0) -> Workload:
    """The demo mix; ``seed`` jitters arrivals and priorities (seed 0 is the canonical mix),
    ``jobs`` repeats the 12-job template as often as needed."""
    if not isinstance(jobs, int) or jobs < 1:
        raise SpecError("jobs", jobs, "an integer >= 1")
    if not isinstance(horizon, int) or horizon < 1:
        raise SpecError("horizon", horizon, "an integer >= 1")
    if not slot_seconds > 0:
        raise SpecError("slot_seconds", slot_seconds, "a number > 0")
    rng = np.random.default_rng(seed)
    window = max(1, horizon * 2 // 5)  # arrivals over the first 40% of the horizon
    arrivals = np.sort(rng.integers(0, window, size=jobs))
    specs: list[JobSpec] = []
    for i in range(jobs):
        model, arch, sync, gpu, cap, work, prio, decay, target = _TEMPLATE[i % len(_TEMPLATE)]
        compute_s, grad_mb = _MODELS[model]
        # CPU-only workers are ~4x slower per mini-batch and want more cores. GPU jobs name
        # their GPU type, so the runtime model keeps their profile apart from CPU runs of
        # the same model (it shares fitted parameters per model and hardware).
        compute_s = compute_s if gpu else compute_s * 4
        worker = (
            {"gpu": 1, "cpu": 4, "mem_gb": 8, "bw_gbps": 1.0}
            if gpu
            else {"cpu": 6, "mem_gb": 8, "bw_gbps": 1.0}
        )
        # Size the job in single-worker slots at the nominal iteration time (PS jobs push
        # and pull the gradient over the worker's 1 Gbps), whatever the slot length.
        iter_s = compute_s + (2 * grad_mb * 8e-3 / worker["bw_gbps"] if arch is Arch.PS else 0.0)
        epochs = max(1, round(work * slot_seconds / (iter_s * cap * _BATCHES_PER_CHUNK)))
        jitter = float(rng.uniform(0.8, 1.2)) if seed else 1.0
        specs.append(
            JobSpec(
                job_id=f"demo-{i:02d}-{model}-{arch.value}",
                utility=Utility.sigmoid(
                    priority=round(prio * jitter, 3), decay=decay, target=target
                ),
                arrival_slot=int(arrivals[i]),
                model=model,
                arch=arch,
                sync=sync,
                epochs=epochs,
                chunks=cap,
                batches_per_chunk=_BATCHES_PER_CHUNK,
                batch_size=32,
                max_workers=cap,
                worker=ResourceVector(worker),
                ps=ResourceVector({"cpu": 2, "mem_gb": 4, "bw_gbps": 2.0}),
                gpu_type="T4" if gpu else None,
                compute_s=compute_s,
                gradient_mb=grad_mb,
            )
        )
    return Workload(
        name="demo",
        cluster=demo_cluster(),
        jobs=tuple(specs),
        horizon_slots=horizon,
        slot_seconds=float(slot_seconds),
        runtime={},
        description=f"{jobs} ResNet/VGG jobs (PS async/sync, all-reduce) on 4 servers, "
        f"{horizon} slots of {slot_seconds:g} s (seed {seed})",
        notes={"template_jobs": len(_TEMPLATE)},
    )
