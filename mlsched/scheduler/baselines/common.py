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


#: How a fixed-count baseline picks its PS count: drawn (spec 001 §5.2) or the fewest the
#: job needs, ceil(W / gamma) under a worker:PS ratio (spec 000 §5.2 item 1, A24).
PS_RULES = ("drawn", "needed")
#: How a fixed-count baseline picks a job's workers: drawn U{1..cap} (spec 001 §5.2's FIFO
#: rule) or the job's ideal count, the cap itself (spec 002 AMB-13: min(D_j, 30)).
WORKER_RULES = ("drawn", "ideal")


def check_one_ps_host(value: object) -> bool:
    """A policy's ``one_ps_host`` option: every PS of a job on one server, so that the PSs
    there cover every worker placed elsewhere (spec 002's (2i) with a single PS host,
    AMB-6: the PS count ``ps_needed(W)`` covers all ``W`` workers' bandwidth)."""
    if not isinstance(value, bool):
        raise TypeError(f"one_ps_host must be true or false, got {value!r}")
    return value


def check_count_rules(ps_rule: str, worker_rule: str) -> None:
    """Refuse a PS or worker rule that is not one of :data:`PS_RULES`/:data:`WORKER_RULES`."""
    if ps_rule not in PS_RULES:
        raise ValueError(f"ps_rule must be one of {', '.join(PS_RULES)}, got {ps_rule!r}")
    if worker_rule not in WORKER_RULES:
        raise ValueError(
            f"worker_rule must be one of {', '.join(WORKER_RULES)}, got {worker_rule!r}"
        )


def fixed_counts(
    job: JobSpec,
    seed: int,
    *,
    max_workers: int = 30,
    max_ps: int = 30,
    ps_rule: str = "drawn",
    worker_rule: str = "drawn",
) -> tuple[int, int]:
    """The (workers, PSs) a fixed-count baseline runs a job with (spec 001 §5.2).

    The user's ``requested_workers``/``requested_ps`` when given; otherwise workers
    ~ U{1..min(max_workers, cap)} and PSs ~ U{1..max_ps} (``ps_rule="drawn"``) or the
    job's ``ps_needed(W)`` (``"needed"``), clamped to [ps_needed(W), W] so the runtime
    model's PS condition holds. ``worker_rule="ideal"``: workers = min(max_workers, cap),
    the job's ideal count (spec 002 AMB-13), none drawn.
    """
    check_count_rules(ps_rule, worker_rule)
    rngs: list[np.random.Generator] = []

    def draw(high: int) -> int:  # the job's stream, made on first need (it costs ~50 us)
        if not rngs:
            rngs.append(job_rng(seed, job.job_id, "fixed_counts"))
        return int(rngs[0].integers(1, high + 1))

    cap = min(max_workers, job.worker_cap)
    w = job.requested_workers or (cap if worker_rule == "ideal" else draw(cap))
    w = max(job.min_workers, min(w, job.worker_cap))
    if not job.uses_ps:
        return w, 0
    drawn = draw(max_ps)  # drawn either way: same stream, same W
    p = job.requested_ps or (drawn if ps_rule == "drawn" else job.ps_needed(w))
    p = min(max(p, job.ps_needed(w)), max(w, job.ps_needed(w)))
    return w, p
