"""Which servers of a cluster host which worker and PS types, and what a cluster cannot
honour of a type catalogue (:mod:`mlsched.core.device_types`).

A worker type runs on the worker-pool servers of its GPU model (on any worker server when
the catalogue does not know the type or it names no model); a PS type on the PS-pool
servers.
"""

from __future__ import annotations

from mlsched.core.cluster import Cluster
from mlsched.core.device_types import TypeCatalogue
from mlsched.core.errors import SpecError
from mlsched.core.resources import ResourceVector

__all__ = ["type_problems", "worker_hosts"]


def worker_hosts(
    cluster: Cluster, worker_type: str | None, catalogue: TypeCatalogue | None = None
) -> tuple[int, ...]:
    """Indices of the servers that host ``worker_type`` (worker pool, its GPU model in
    ``catalogue``, the cluster's own by default)."""
    model = (cluster.types if catalogue is None else catalogue).gpu_model(worker_type)
    return tuple(
        i for i in cluster.worker_servers if model is None or cluster.servers[i].gpu_type == model
    )


def type_problems(cluster: Cluster, catalogue: TypeCatalogue | None = None) -> list[SpecError]:
    """What ``cluster`` cannot honour of ``catalogue`` (its own by default): a worker type
    whose GPU model no worker server has, a bundle that fits none of its hosts; a PS type
    that fits no PS server."""
    types = cluster.types if catalogue is None else catalogue
    out: list[SpecError] = []
    for wt in types.worker_types:
        hosts = worker_hosts(cluster, wt.name, types)
        field = f"types.workers.{wt.name}"
        if not hosts:
            models = sorted({cluster.servers[i].gpu_type or "-" for i in cluster.worker_servers})
            out.append(
                SpecError(
                    f"{field}.gpu_model", wt.gpu_model, f"a GPU model of a worker server {models}"
                )
            )
        elif not any(_fits(cluster, i, wt.demand) for i in hosts):
            out.append(SpecError(field, wt.demand.as_dict(), "a bundle one of its hosts can hold"))
    for pt in types.ps_types:
        if not any(_fits(cluster, i, pt.demand) for i in cluster.ps_servers):
            out.append(
                SpecError(
                    f"types.ps.{pt.name}", pt.demand.as_dict(), "a bundle a PS server can hold"
                )
            )
    return out


def _fits(cluster: Cluster, server: int, demand: ResourceVector) -> bool:
    need = cluster.demand_array(demand)
    if demand["gpu"] > 0 and "gpu" not in cluster.resource_names:
        return False
    return bool((cluster.capacity[server] >= need - 1e-9).all())
