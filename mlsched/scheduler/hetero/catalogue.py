"""The shipped type table and which servers host a job's workers (spec 002's M and P).

The types themselves (:class:`~mlsched.core.device_types.WorkerType`, ``PsType``,
``TypeCatalogue``) belong to the cluster description (``Cluster.types``); the policy reads
them from there. A job offers the types it may run on in ``JobSpec.worker_types``/
``ps_types`` (their bundles) and its per-type compute time in ``compute_s_by_type``.

:data:`DEFAULT_CATALOGUE` is the table the ``hetero-paper`` workload's cluster declares.
Source: the paper's ranges (8 worker types with 1-4 GPUs, 1-16 vCPUs and 0.1-5 Gbit/s; 10
PS types with 1-16 vCPUs and 5-20 Gbit/s) laid over the AWS P3 (V100), P2 (K80) and G3
(M60) families the paper names; the relative GPU speeds (V100 1, M60 0.45, K80 0.3) are
rounded public training-throughput ratios, an assumption of this project, not the paper's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

from mlsched.core.cluster import Cluster
from mlsched.core.device_types import PsType, TypeCatalogue, WorkerType
from mlsched.core.job import JobSpec
from mlsched.core.resources import ResourceVector
from mlsched.core.type_hosts import worker_hosts

__all__ = [
    "DEFAULT_CATALOGUE",
    "GPU_SPEED",
    "PsType",
    "TypeCatalogue",
    "WorkerType",
    "speed",
    "worker_servers",
]

#: Relative training speed of one GPU of each model (per-GPU throughput, V100 = 1).
GPU_SPEED: Mapping[str, float] = MappingProxyType({"V100": 1.0, "M60": 0.45, "K80": 0.3})


def speed(worker_type: WorkerType) -> float:
    """Mini-batches per second relative to one V100 (GPUs x per-GPU speed)."""
    gpus = worker_type.demand["gpu"]
    if worker_type.gpu_model is None or gpus <= 0:
        return 0.1  # a CPU-only worker
    return gpus * GPU_SPEED.get(worker_type.gpu_model, 1.0)


def worker_servers(
    job: JobSpec, worker_type: str | None, cluster: Cluster, catalogue: TypeCatalogue
) -> list[int]:
    """Servers that may host ``job``'s workers of ``worker_type``: the type's hosts (worker
    pool, its GPU model when the catalogue knows the type), and the job's pinned GPU type."""
    hosts = worker_hosts(cluster, worker_type, catalogue)
    if job.gpu_type is None:
        return list(hosts)
    return [i for i in hosts if cluster.servers[i].gpu_type == job.gpu_type]


def _w(name: str, model: str, gpu: int, cpu: int, bw: float) -> WorkerType:
    return WorkerType(name, model, ResourceVector({"gpu": gpu, "cpu": cpu, "bw_gbps": bw}))


def _p(name: str, cpu: int, bw: float) -> PsType:
    return PsType(name, ResourceVector({"cpu": cpu, "bw_gbps": bw}))


_WORKERS: Sequence[WorkerType] = (
    _w("v100x1", "V100", 1, 4, 1.25),
    _w("v100x2", "V100", 2, 8, 2.5),
    _w("v100x4", "V100", 4, 16, 5.0),
    _w("k80x1", "K80", 1, 2, 0.5),
    _w("k80x2", "K80", 2, 4, 1.0),
    _w("k80x4", "K80", 4, 8, 2.0),
    _w("m60x1", "M60", 1, 1, 0.1),
    _w("m60x2", "M60", 2, 8, 1.0),
)
_PS: Sequence[PsType] = tuple(
    _p(f"ps{i}", cpu, bw)
    for i, (cpu, bw) in enumerate(
        ((1, 5), (2, 5), (2, 8), (4, 8), (4, 10), (8, 10), (8, 12), (12, 15), (16, 15), (16, 20)),
        start=1,
    )
)

#: The shipped table (8 worker types, 10 PS types; see the module docstring).
DEFAULT_CATALOGUE = TypeCatalogue(tuple(_WORKERS), tuple(_PS))
