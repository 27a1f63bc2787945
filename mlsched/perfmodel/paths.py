"""Nominal bandwidths a placement gives a job, from its reservation and the topology."""

from __future__ import annotations

from operator import itemgetter

from mlsched.core.allocation import Placement
from mlsched.core.cluster import Cluster
from mlsched.core.job import JobSpec

__all__ = ["nominal_worker_bw", "ring_bottleneck_gbps", "ring_order"]

_server = itemgetter(0)


def nominal_worker_bw(job: JobSpec, placement: Placement, cluster: Cluster) -> float:
    """A worker's push/pull bandwidth in Gbit/s: its reservation ``b``, else the slowest
    path between a worker server and a PS server (intra-server when they share one); with
    no PS (a ring), the slowest hop of the ring between the worker servers."""
    b = job.worker_demand(placement.worker_type)["bw_gbps"]
    if b > 0:
        return b
    if not placement.ps:
        return ring_bottleneck_gbps(job, placement, cluster)
    return min(cluster.path_gbps(w, p) for w, _ in placement.workers for p, _ in placement.ps)


def ring_order(placement: Placement) -> tuple[int, ...]:
    """Servers in ring order: the placement's explicit ring, else by server index."""
    if placement.ring:
        return placement.ring
    return tuple(map(_server, placement.workers))


def ring_bottleneck_gbps(job: JobSpec, placement: Placement, cluster: Cluster) -> float:
    """Slowest hop of the ring (spec 003 (E1)): intra-server hops (between workers that
    share a server) run at the intra-server rate; an inter-server hop at its path
    bottleneck, capped by the job's reservation (``hop_gbps``, else its worker bundle's
    ``bw_gbps``)."""
    intra = cluster.topology.intra_server_gbps
    order = ring_order(placement)
    if len(order) <= 1:
        return intra
    reserved = job.hop_gbps or job.worker_demand(placement.worker_type)["bw_gbps"]
    # A server with several workers carries intra-server hops of the ring.
    slowest = intra if any(c > 1 for _, c in placement.workers) else float("inf")
    for i, a in enumerate(order):
        b = order[(i + 1) % len(order)]
        if a == b:
            slowest = min(slowest, intra)
            continue
        gbps = cluster.path_gbps(a, b)
        if reserved > 0:
            gbps = min(gbps, reserved)
        slowest = min(slowest, gbps)
    return slowest
