"""What one job needs from OASiS's point of view (spec 001 §2.1-§2.2), in worker-slots.

The paper's model is linear in the worker count: a worker does ``1 / theta`` mini-batches
per slot, whatever the other workers and the PSs do (given enough PSs). The per-worker rate
``rate`` (work units per worker per slot) is read from the engine's runtime model, so a
model refined from measurements changes the plans of the jobs that arrive after it:

    rate = slot_seconds * min(throughput(1 worker) / 1, throughput(cap workers) / cap)

on reference placements that spread the workers over the job's eligible worker servers and
put the PSs on other servers where there are some (the slower, cross-server path when the
job reserves no bandwidth). For the spec's asynchronous PS model with a bandwidth
reservation both terms are ``1 / theta`` exactly; for models whose per-worker rate falls as
workers are added (synchronous jobs), the minimum is the conservative choice.

Derived quantities: ``work`` = worker-slots to finish (``Work_i``, rounded up), ``rho`` =
worker-slots per data chunk (``M_i theta_i``), ``chunks`` = ``E_i N_i``, and ``ps_for[Y]``
= the PSs that ``Y`` workers need (constraint (6), plus the job's ``ps_ratio``), or -1 where
that exceeds ``Y`` (constraint (7)).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mlsched.core.allocation import Placement
from mlsched.core.job import JobSpec
from mlsched.perfmodel.base import RuntimeModel

__all__ = ["JobNeeds", "per_worker_rate", "reference_placement"]

_EPS = 1e-9


def reference_placement(
    job: JobSpec, workers: int, worker_servers: Sequence[int], ps_servers: Sequence[int]
) -> Placement:
    """``workers`` workers one per server in turn, and their PSs, off the worker servers
    first: the placement the per-worker rate is read at (see the module docstring)."""
    w: dict[int, int] = {}
    hosts = list(worker_servers) or [0]
    for i in range(workers):
        s = hosts[i % len(hosts)]
        w[s] = w.get(s, 0) + 1
    p: dict[int, int] = {}
    if job.uses_ps:
        others = [s for s in ps_servers if s not in w]
        order = others + [s for s in ps_servers if s in w] or [0]
        for i in range(job.ps_needed(workers)):
            s = order[i % len(order)]
            p[s] = p.get(s, 0) + 1
    return Placement.of(w, p)


def per_worker_rate(
    job: JobSpec,
    runtime: RuntimeModel,
    slot_seconds: float,
    worker_servers: Sequence[int],
    ps_servers: Sequence[int],
) -> float:
    """Work units one worker completes per slot (the paper's ``1 / theta_i``, in units)."""
    rates = []
    for n in sorted({1, max(1, job.worker_cap)}):
        placement = reference_placement(job, n, worker_servers, ps_servers)
        rates.append(runtime.throughput(job, placement) * slot_seconds / n)
    return max(0.0, min(rates))


@dataclass(frozen=True)
class JobNeeds:
    """One job's demand in OASiS's terms (see the module docstring)."""

    job_id: str
    rate: float
    work: int
    chunks: int
    rho: float
    y_min: int
    y_max: int
    ps_for: np.ndarray
    uses_ps: bool

    @classmethod
    def of(cls, job: JobSpec, rate: float, done: float = 0.0) -> JobNeeds:
        """The needs of ``job`` at ``rate`` work units per worker per slot (> 0), less the
        ``done`` work units of a job admitted again after it has run."""
        if not rate > 0 or not math.isfinite(rate):
            raise ValueError(f"job {job.job_id}: per-worker rate must be > 0, got {rate!r}")
        total = max(0.0, job.total_work - max(0.0, done))
        exact = total / rate
        work = max(1, math.ceil(exact - _EPS)) if math.isfinite(exact) else 1 << 62
        if work * rate < total - 1e-9:
            work += 1  # rounding must never leave the last mini-batches undone
        y_max = job.worker_cap
        ps_for = np.zeros(y_max + 1, dtype=np.int64)
        if job.uses_ps:
            for y in range(1, y_max + 1):
                z = job.ps_needed(y)
                ps_for[y] = z if z <= y else -1
        return cls(
            job_id=job.job_id,
            rate=rate,
            work=work,
            # Whole chunks left (a partly done chunk counts as one).
            chunks=max(1, math.ceil(total / job.batches_per_chunk - _EPS)),
            rho=job.batches_per_chunk / rate,
            y_min=max(1, job.min_workers),
            y_max=y_max,
            ps_for=ps_for,
            uses_ps=job.uses_ps,
        )

    @property
    def min_duration(self) -> int:
        """``d_min``: slots to finish with ``y_max`` workers in every slot."""
        return max(1, math.ceil(self.work / self.y_max))

    @property
    def z_max(self) -> int:
        return int(self.ps_for.max(initial=0))

    def workers_allowed(self) -> np.ndarray:
        """Worker counts a slot may run: y_min..y_max with a valid PS count."""
        ys = np.arange(self.y_min, self.y_max + 1)
        return ys[self.ps_for[ys] >= 0]

    def workers_for_chunks(self, chunks: int) -> int:
        """Workers that do ``chunks`` chunks in one slot: ``max(y_min, ceil(d rho))``
        (Alg. 2 line 25), 0 for none."""
        if chunks <= 0:
            return 0
        return max(self.y_min, math.ceil(chunks * self.rho - _EPS))
