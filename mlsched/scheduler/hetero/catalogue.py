"""Worker and PS types (spec 002's M and P) and which servers host them.

A *worker type* is a resource bundle on one GPU model (``v100x2``: two V100s, 8 vCPUs,
2.5 Gbit/s); a *PS type* is a CPU/bandwidth bundle without GPUs. A job offers the types it
may run on in ``JobSpec.worker_types``/``ps_types`` (their bundles) and its per-type compute
time in ``compute_s_by_type``; the catalogue adds what the job cannot say: the GPU model a
worker type needs, so a type runs only on servers whose ``gpu_type`` is that model.

:data:`DEFAULT_CATALOGUE` is the table the ``hetero-paper`` workload draws from. Source:
the paper's ranges (8 worker types with 1-4 GPUs, 1-16 vCPUs and 0.1-5 Gbit/s; 10 PS types
with 1-16 vCPUs and 5-20 Gbit/s) laid over the AWS P3 (V100), P2 (K80) and G3 (M60)
families the paper names; the relative GPU speeds (V100 1, M60 0.45, K80 0.3) are
rounded public training-throughput ratios, an assumption of this project, not the paper's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from mlsched.core.cluster import Cluster
from mlsched.core.errors import SpecError
from mlsched.core.job import JobSpec
from mlsched.core.resources import ResourceVector

__all__ = [
    "DEFAULT_CATALOGUE",
    "GPU_SPEED",
    "PsType",
    "TypeCatalogue",
    "WorkerType",
    "worker_servers",
]

#: Relative training speed of one GPU of each model (per-GPU throughput, V100 = 1).
GPU_SPEED: Mapping[str, float] = MappingProxyType({"V100": 1.0, "M60": 0.45, "K80": 0.3})


@dataclass(frozen=True)
class WorkerType:
    """One worker bundle: its GPU model (None: any server) and resources."""

    name: str
    gpu_model: str | None
    demand: ResourceVector

    @property
    def speed(self) -> float:
        """Mini-batches per second relative to one V100 (GPUs x per-GPU speed)."""
        gpus = self.demand["gpu"]
        if self.gpu_model is None or gpus <= 0:
            return 0.1  # a CPU-only worker
        return gpus * GPU_SPEED.get(self.gpu_model, 1.0)


@dataclass(frozen=True)
class PsType:
    name: str
    demand: ResourceVector


@dataclass(frozen=True)
class TypeCatalogue:
    """Worker and PS types by name."""

    workers: Mapping[str, WorkerType] = field(default_factory=dict)
    ps: Mapping[str, PsType] = field(default_factory=dict)

    def gpu_model(self, worker_type: str | None) -> str | None:
        hit = self.workers.get(worker_type) if worker_type is not None else None
        return hit.gpu_model if hit is not None else None

    def check(self, cluster: Cluster) -> None:
        """Every worker type's GPU model is hosted by some worker server (else no job could
        ever run it): raises SpecError naming the type."""
        models = {cluster.servers[i].gpu_type for i in cluster.worker_servers}
        for name, wt in self.workers.items():
            if wt.gpu_model is not None and wt.gpu_model not in models:
                raise SpecError(
                    f"worker_types.{name}.gpu_model",
                    wt.gpu_model,
                    f"a GPU model some worker server has ({sorted(m or '-' for m in models)})",
                )


def worker_servers(
    job: JobSpec, worker_type: str | None, cluster: Cluster, catalogue: TypeCatalogue
) -> list[int]:
    """Servers that may host ``job``'s workers of ``worker_type``: worker pool, the job's
    pinned GPU type if any, and the type's GPU model if the catalogue knows the type."""
    model = catalogue.gpu_model(worker_type)
    out = []
    for i in cluster.worker_servers:
        gpu = cluster.servers[i].gpu_type
        if job.gpu_type is not None and gpu != job.gpu_type:
            continue
        if model is not None and gpu != model:
            continue
        out.append(i)
    return out


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
DEFAULT_CATALOGUE = TypeCatalogue(
    workers=MappingProxyType({w.name: w for w in _WORKERS}),
    ps=MappingProxyType({p.name: p for p in _PS}),
)
