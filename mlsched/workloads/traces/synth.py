"""Philly-shaped synthetic traces, written in Philly's own ``cluster_job_log`` format.

Public traces stop at about 117,000 jobs (Philly) and most runs need a trace of a chosen size
on a chosen cluster. :func:`generate_philly` draws jobs from the shape Jeon et al. describe
for Microsoft's Philly cluster (ATC '19): most jobs use one GPU and a few use more than eight,
run times span minutes to weeks, larger jobs run longer, about a third of jobs end killed or
failed and failed jobs are retried, and submissions follow the working day. The shares and
medians below (:class:`PhillyShape`) are this generator's defaults, chosen to that shape, not
figures read from the trace; every one is an argument. The output is a JSON list that
``mlsched trace import --format philly`` reads like the real file, so the generated trace and
the published one go through the same importer.

The arrival rate is set by the load asked for: the jobs' GPU-seconds spread over the span
make ``load`` x the cluster's GPUs busy on average (the day's peak is ``1 + diurnal`` times
that), so a trace of any size keeps the same pressure on a cluster of any size.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np

from mlsched.core.errors import SpecError
from mlsched.core.limits import MAX_WORKERS

__all__ = ["PhillyShape", "generate_philly", "philly_cluster", "shape_summary"]

#: The first day of the published Philly trace (its times are local wall-clock times).
_EPOCH = datetime(2017, 10, 3, tzinfo=timezone.utc)
_DAY_S = 86_400.0
_STAMP = "%Y-%m-%d %H:%M:%S"
#: Largest number of jobs one call makes (a few hundred bytes each in the file).
MAX_JOBS = 2_000_000


@dataclass(frozen=True)
class PhillyShape:
    """The distributions the generator draws from (every field is a documented default)."""

    #: GPU count -> share of jobs (normalised). One-GPU jobs dominate, a few use > 8.
    gpus: dict[int, float] = field(
        default_factory=lambda: {1: 0.74, 2: 0.08, 4: 0.09, 8: 0.07, 16: 0.015, 32: 0.005}
    )
    #: Median run time (minutes) for jobs of 1, 2-4, 5-8 and > 8 GPUs: larger jobs run longer.
    median_min: tuple[float, float, float, float] = (15.0, 30.0, 60.0, 120.0)
    #: Log-normal spread of run times (sigma of the log): minutes to weeks.
    sigma: float = 1.9
    #: Longest run time (days): the trace's longest jobs ran for weeks.
    max_days: float = 30.0
    #: Final status -> share: Pass, Killed, Failed.
    status: dict[str, float] = field(
        default_factory=lambda: {"Pass": 0.66, "Killed": 0.13, "Failed": 0.21}
    )
    #: A failed job's retries: each further attempt happens with this probability.
    retry_p: float = 0.5
    #: Day/night swing of the submission rate: rate x (1 + diurnal x sin(...)), in [0, 1).
    diurnal: float = 0.5
    #: GPUs per machine (jobs larger than a machine span several).
    gpus_per_machine: int = 8
    #: Users submitting (Zipf-like: a few submit most jobs).
    users: int = 300
    #: Virtual clusters (teams).
    vcs: int = 14

    def check(self) -> None:
        for size, share in self.gpus.items():
            if not isinstance(size, int) or not 1 <= size <= MAX_WORKERS:
                raise SpecError("gpus", size, f"a GPU count in [1, {MAX_WORKERS}]")
            if not share >= 0:
                raise SpecError(f"gpus[{size}]", share, "a share >= 0")
        if not sum(self.gpus.values()) > 0:
            raise SpecError("gpus", self.gpus, "shares that sum to more than 0")
        if any(not m > 0 for m in self.median_min):
            raise SpecError("median_min", self.median_min, "medians > 0 minutes")
        if not 0 <= self.sigma <= 5:
            raise SpecError("sigma", self.sigma, "a number in [0, 5]")
        if not 0 < self.max_days <= 365:
            raise SpecError("max_days", self.max_days, "a number of days in (0, 365]")
        if not 0 <= self.retry_p < 1:
            raise SpecError("retry_p", self.retry_p, "a probability in [0, 1)")
        if not 0 <= self.diurnal < 1:
            raise SpecError("diurnal", self.diurnal, "a number in [0, 1)")
        if not 1 <= self.gpus_per_machine <= 64:
            raise SpecError("gpus_per_machine", self.gpus_per_machine, "a number in [1, 64]")
        if not (self.users >= 1 and self.vcs >= 1):
            raise SpecError("users", (self.users, self.vcs), "at least one user and one vc")


def _bucket(gpus: np.ndarray) -> np.ndarray:
    """Run-time bucket of each job: 1, 2-4, 5-8, > 8 GPUs (as Philly's figures group them)."""
    return np.select([gpus == 1, gpus <= 4, gpus <= 8], [0, 1, 2], default=3)


def _arrivals(rng: np.random.Generator, n: int, span_s: float, diurnal: float) -> np.ndarray:
    """``n`` sorted submission times over ``[0, span_s)``, denser in the working day: an
    inhomogeneous Poisson process given its count, drawn by inverting the rate's integral."""
    grid = np.linspace(0.0, span_s, max(2, int(span_s // 60) + 1))
    # Peak mid-afternoon, trough before dawn.
    rate = 1.0 + diurnal * np.sin(2 * math.pi * (grid / _DAY_S - 0.375))
    cum = np.concatenate(([0.0], np.cumsum((rate[1:] + rate[:-1]) / 2 * np.diff(grid))))
    u = np.sort(rng.uniform(0.0, cum[-1], n))
    return np.interp(u, cum, grid)


def generate_philly(
    n_jobs: int,
    *,
    cluster_gpus: int,
    load: float = 0.8,
    seed: int = 0,
    shape: PhillyShape | None = None,
) -> list[dict[str, Any]]:
    """``n_jobs`` Philly-shaped jobs as ``cluster_job_log`` entries (see the module doc)."""
    shape = shape or PhillyShape()
    shape.check()
    if not 1 <= n_jobs <= MAX_JOBS:
        raise SpecError("jobs", n_jobs, f"a number of jobs in [1, {MAX_JOBS:,}]")
    if not 1 <= cluster_gpus <= 10_000_000:
        raise SpecError("cluster_gpus", cluster_gpus, "a number of GPUs >= 1")
    if not (math.isfinite(load) and 0 < load <= 10):
        raise SpecError("load", load, "a load in (0, 10] (busy GPUs / cluster GPUs)")
    if max(shape.gpus) > cluster_gpus:
        raise SpecError("gpus", max(shape.gpus), f"jobs of at most {cluster_gpus} GPUs")
    rng = np.random.default_rng(seed)
    sizes = np.array(sorted(shape.gpus), dtype=np.int64)
    p = np.array([shape.gpus[s] for s in sizes], dtype=float)
    gpus = rng.choice(sizes, size=n_jobs, p=p / p.sum())
    medians = np.array(shape.median_min, dtype=float)[_bucket(gpus)] * 60.0
    run_s = medians * np.exp(shape.sigma * rng.standard_normal(n_jobs))
    run_s = np.clip(np.round(run_s), 60.0, shape.max_days * _DAY_S)
    span_s = float((gpus * run_s).sum()) / (load * cluster_gpus)
    submit = _arrivals(rng, n_jobs, span_s, shape.diurnal)
    names = list(shape.status)
    sp = np.array([shape.status[k] for k in names], dtype=float)
    status = rng.choice(len(names), size=n_jobs, p=sp / sp.sum())
    retries = rng.geometric(1.0 - shape.retry_p, size=n_jobs) - 1  # failed jobs only
    # A few users submit most jobs (Zipf-like ranks), each in one virtual cluster.
    user = np.minimum(rng.zipf(1.6, size=n_jobs), shape.users) - 1
    delay = rng.exponential(60.0, size=n_jobs)  # queueing before the first attempt
    out: list[dict[str, Any]] = []
    for i in range(n_jobs):
        state = names[status[i]]
        attempts = 1 + (int(retries[i]) if state == "Failed" else 0)
        out.append(
            {
                "status": state,
                "vc": f"vc{int(user[i]) % shape.vcs:02d}",
                "jobid": f"application_{i:07d}",
                "attempts": _attempts(
                    float(submit[i] + delay[i]),
                    float(run_s[i]),
                    attempts,
                    int(gpus[i]),
                    shape.gpus_per_machine,
                    int(rng.integers(0, 1 << 20)),
                ),
                "submitted_time": _stamp(float(submit[i])),
                "user": f"user{int(user[i]):03d}",
            }
        )
    return out


def _attempts(
    start_s: float, run_s: float, n: int, gpus: int, per_machine: int, machine: int
) -> list[dict[str, Any]]:
    """``n`` attempts whose run times add up to ``run_s`` (whole seconds, each >= 1)."""
    total = max(int(run_s), n)
    cuts = [total * (k + 1) // n for k in range(n)]
    attempts, t, before = [], start_s, 0
    for cut in cuts:
        length = cut - before
        before = cut
        detail, left, m = [], gpus, machine
        while left > 0:
            here = min(left, per_machine)
            detail.append({"ip": f"m{m:07d}", "gpus": [f"gpu{g}" for g in range(here)]})
            left -= here
            m += 1
        attempts.append({"start_time": _stamp(t), "end_time": _stamp(t + length), "detail": detail})
        t += length + 30.0  # a retry restarts after a short pause
    return attempts


def _stamp(seconds: float) -> str:
    return (_EPOCH + timedelta(seconds=round(seconds))).strftime(_STAMP)


def philly_cluster(gpus: int, *, per_machine: int = 8, per_rack: int = 16) -> dict[str, Any]:
    """A cluster mapping (the cluster-file form): ``ceil(gpus / per_machine)`` machines of
    ``per_machine`` GPUs, ``per_rack`` to a rack, one entry (with ``count``) per rack."""
    if not 1 <= gpus <= 1_000_000:
        raise SpecError("gpus", gpus, "a number of GPUs in [1, 1000000]")
    machines = -(-gpus // per_machine)
    capacity = {"gpu": per_machine, "cpu": 8 * per_machine, "mem_gb": 64 * per_machine}
    return {
        "servers": [
            {
                "name": f"r{r:03d}",
                "count": min(per_rack, machines - r * per_rack),
                "capacity": capacity,
                "rack": f"rack{r:03d}",
                "uplink_gbps": 100.0,
            }
            for r in range(-(-machines // per_rack))
        ]
    }


def shape_summary(shape: PhillyShape) -> dict[str, Any]:
    """The shape as plain data (for a workload's notes and the command's summary)."""
    out = asdict(shape)
    out["gpus"] = {str(k): v for k, v in shape.gpus.items()}
    return out
