"""Pieces the baselines share: fixed per-job task counts and seeded per-job draws."""

from __future__ import annotations

import zlib

import numpy as np

from mlsched.core.job import JobSpec

__all__ = ["fixed_counts", "job_rng"]


def job_rng(seed: int, job_id: str, salt: str = "") -> np.random.Generator:
    """A generator that depends only on (seed, job id, salt): same seed, same draws,
    whatever order jobs arrive or policies run in."""
    return np.random.default_rng([seed, zlib.crc32(f"{salt}:{job_id}".encode())])


def fixed_counts(
    job: JobSpec, seed: int, *, max_workers: int = 30, max_ps: int = 30
) -> tuple[int, int]:
    """The (workers, PSs) a fixed-count baseline runs a job with (spec 001 §5.2).

    The user's ``requested_workers``/``requested_ps`` when given; otherwise workers
    ~ U{1..min(max_workers, cap)} and PSs ~ U{1..max_ps}, clamped to
    [ps_needed(W), W] so the runtime model's PS condition holds.
    """
    rng = job_rng(seed, job.job_id, "fixed_counts")
    cap = min(max_workers, job.worker_cap)
    w = job.requested_workers or int(rng.integers(1, cap + 1))
    w = max(job.min_workers, min(w, job.worker_cap))
    if not job.uses_ps:
        return w, 0
    p = job.requested_ps or int(rng.integers(1, max_ps + 1))
    p = min(max(p, job.ps_needed(w)), max(w, job.ps_needed(w)))
    return w, p
