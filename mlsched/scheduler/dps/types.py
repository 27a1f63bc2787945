"""Spec 004's typed workers and PSs on mlsched's clusters: a job's shape and the type book.

A **type** (k for workers, m for PSs, spec §2.1) is a task's demand over the resources the
cluster tracks, with the job's GPU type for workers: jobs whose workers ask for the same
amounts share a worker type, and so one price and one bandit. Its name is that demand
(``cpu=2,mem_gb=8``), or the resource's own name when the demand is one unit of one
resource: the ``dps-paper`` workload gives each type a resource of its own (``w3``: a slot
of worker type 3), so there the types are the paper's K + M slot pools. A type's
capacity C (C^W_k, C^P_m) is how many of its tasks the empty cluster holds; X[s, k] is how
many more fit server s now. Worker and PS types are kept apart (A2) even when their
demands are equal.

A job's **shape** is its types and counts d^W, d^P: the user's ``requested_workers`` and
``requested_ps``; without them, the counts every fixed-count baseline draws
(:func:`~mlsched.scheduler.baselines.common.fixed_counts`) and the PSs the job needs. A
ring-all-reduce job has no PS type (d^P = 0; spec §7's extension).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from mlsched.core.cluster import Cluster
from mlsched.core.job import JobSpec
from mlsched.scheduler.baselines.common import fixed_counts

__all__ = ["ROLES", "Role", "Shape", "TypeBook", "TypeState", "job_counts", "shape_of"]

Role = Literal["worker", "ps"]
ROLES: tuple[Role, ...] = ("worker", "ps")
_UNBOUNDED = 1 << 30  # tasks of a demand on no tracked resource fit anywhere


def type_name(demand: np.ndarray, names: tuple[str, ...], gpu_type: str | None) -> str:
    nonzero = [(names[i], float(demand[i])) for i in np.flatnonzero(demand > 0)]
    if len(nonzero) == 1 and nonzero[0][1] == 1.0:
        name = nonzero[0][0]
    else:
        name = ",".join(f"{n}={v:g}" for n, v in nonzero) or "none"
    return f"{gpu_type}/{name}" if gpu_type else name


def job_counts(job: JobSpec, seed: int) -> tuple[int, int]:
    """(d^W, d^P): the requested counts, else the fixed-count baselines' draw."""
    if job.requested_workers is not None:
        workers = max(job.min_workers, min(job.requested_workers, job.worker_cap))
    else:
        workers, _ = fixed_counts(job, seed, ps_rule="needed")
    if not job.uses_ps:
        return workers, 0
    # The paper's d^P as requested, even below what the bandwidth rule would ask (A15).
    return workers, job.requested_ps if job.requested_ps is not None else job.ps_needed(workers)


@dataclass(frozen=True, eq=False)
class Shape:
    """A job as the DPS policies see it."""

    job_id: str
    worker_type: str
    ps_type: str | None
    n_workers: int
    n_ps: int
    worker: np.ndarray  # one worker's demand over the cluster's resources
    ps: np.ndarray
    worker_servers: np.ndarray  # servers that may host its workers
    ps_servers: np.ndarray

    def type_of(self, role: Role) -> str | None:
        return self.worker_type if role == "worker" else self.ps_type

    def count(self, role: Role) -> int:
        return self.n_workers if role == "worker" else self.n_ps

    def demand(self, role: Role) -> np.ndarray:
        return self.worker if role == "worker" else self.ps

    def servers(self, role: Role) -> np.ndarray:
        return self.worker_servers if role == "worker" else self.ps_servers


def shape_of(job: JobSpec, cluster: Cluster, seed: int) -> Shape | str:
    """The job's shape, or why it can never run on ``cluster``."""
    if not cluster.offers(job.worker) or (job.uses_ps and not cluster.offers(job.ps)):
        return "needs GPUs the cluster lacks"
    names = cluster.resource_names
    workers = np.array(
        [
            i
            for i in cluster.worker_servers
            if job.gpu_type is None or cluster.servers[i].gpu_type == job.gpu_type
        ],
        dtype=np.intp,
    )
    ps = np.array(cluster.ps_servers if job.uses_ps else (), dtype=np.intp)
    if not len(workers) or (job.uses_ps and not len(ps)):
        return f"no eligible {'worker' if not len(workers) else 'PS'} servers"
    n_w, n_p = job_counts(job, seed)
    w = cluster.demand_array(job.worker)
    p = cluster.demand_array(job.ps) if job.uses_ps else np.zeros(len(names))
    return Shape(
        job.job_id,
        type_name(w, names, job.gpu_type),
        type_name(p, names, None) if job.uses_ps else None,
        n_w,
        n_p,
        w,
        p,
        workers,
        ps,
    )


def fit_counts(free: np.ndarray, servers: np.ndarray, demand: np.ndarray) -> np.ndarray:
    """Tasks of ``demand`` each of ``servers`` holds given ``free`` (servers x resources)."""
    need = np.flatnonzero(demand > 1e-12)
    if not len(need):
        return np.full(len(servers), _UNBOUNDED, dtype=np.int64)
    room = free[np.ix_(servers, need)] / demand[need]
    return np.floor(room.min(axis=1).clip(min=0.0) + 1e-9).astype(np.int64)


@dataclass
class TypeState:
    """One type: capacity C, jobs expected n, largest demand D, arrivals a, occupancy y."""

    role: Role
    name: str
    capacity: int
    expected: int
    max_demand: int
    arrivals: int = 0
    occupied: int = 0
    priced: int = 0  # offers at a price of this type's arms
    explored: int = 0  # zero-price offers (exploration)

    def fits(self, count: int) -> bool:
        """Spec line 8 / [A8]: ``d + y <= C``."""
        return self.occupied + count <= self.capacity


class TypeBook:
    """Every type seen in a run: from the catalogue (n and D, A12) and from arrivals."""

    def __init__(self, cluster: Cluster, expected_default: int) -> None:
        self.cluster = cluster
        self.expected_default = expected_default
        self.types: dict[tuple[Role, str], TypeState] = {}
        self._counts: dict[tuple[Role, str], tuple[int, int]] = {}

    def count_catalogue(self, shapes: list[Shape]) -> None:
        """n (jobs asking for the type) and D (largest count asked) per type."""
        for shape in shapes:
            for role in ROLES:
                name = shape.type_of(role)
                if name is None:
                    continue
                n, d = self._counts.get((role, name), (0, 0))
                self._counts[(role, name)] = (n + 1, max(d, shape.count(role)))

    def get(self, role: Role, shape: Shape) -> TypeState:
        name = shape.type_of(role)
        assert name is not None
        state = self.types.get((role, name))
        if state is None:
            n, d = self._counts.get((role, name), (0, 0))
            full = fit_counts(self.cluster.capacity, shape.servers(role), shape.demand(role))
            state = TypeState(
                role,
                name,
                capacity=int(full.sum()),
                expected=n if n > 0 else self.expected_default,
                max_demand=max(1, d),
            )
            self.types[(role, name)] = state
        # A job larger than the catalogue said widens D (the normalised scale of A10).
        state.max_demand = max(state.max_demand, shape.count(role))
        return state

    def of(self, shape: Shape) -> tuple[TypeState, TypeState | None]:
        return self.get("worker", shape), self.get("ps", shape) if shape.ps_type else None
