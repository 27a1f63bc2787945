"""Q3 (Fig. 7): LP-RS-MDE against the exact optimum of one slot on small instances.

An instance is one slot's G-VNE (:class:`SlotProblem`) for ``jobs`` gadget-paper jobs on a
gadget-paper cluster of ``servers`` servers, every job active at a random progress state.
Its gains are GADGET's in paper mode: pi_{i,k} = mu_i(min(P_i + k zeta_i, F_i)) - mu_i(P_i)
for k = 1..min(N_i, the workers the cluster holds), stopping at the first k that finishes
the budget (Alg. 1 lines 4-6).

The progress P_i is uniform on [m_i - N_i zeta_i, m_i) (clipped at 0), m_i = min(lambda_3,
F_i): each job is within one slot's reach of its sigmoid's rise. Uniform on [0, F_i) leaves
most jobs flat (saturated, or too far below the rise to gain this slot: the sigmoid is
nearly a step, A14): measured on such draws, 0-4 of 10 jobs had any gain and the optimum
was trivial.

LP-RS-MDE runs in paper mode (rounding accepted within the (T8) violation factors) and in
strict mode (what the policy runs: no violation); the optimum is
:func:`~mlsched.scheduler.offline.gadget_optimum.slot_optimum`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from mlsched.core.job import JobSpec
from mlsched.experiments.gadget.common import GadgetScale, workload
from mlsched.experiments.pool import Runner
from mlsched.scheduler.gadget.lp_rs_mde import lp_rs_mde
from mlsched.scheduler.gadget.problem import RingJob, SlotProblem
from mlsched.scheduler.offline.gadget_optimum import slot_optimum

__all__ = ["RatioItem", "ratio_items", "run_ratio", "slot_problem"]

#: An optimum at or below this is "0" (the instance is skipped): l1 is at least 1.
ZERO = 1e-6
#: Rounding trials u_b (the policy's default).
TRIALS = 50


@dataclass(frozen=True)
class RatioItem:
    seed: int
    servers: int
    jobs: int
    draws: int
    time_limit_s: float


def ratio_items(s: GadgetScale, seeds: int) -> list[RatioItem]:
    return [
        RatioItem(seed, h, s.ratio_jobs, s.ratio_draws, s.ratio_time_limit_s)
        for h in s.ratio_servers
        for seed in range(seeds)
    ]


def _ring_job(
    job: JobSpec, progress: float, zeta: float, fits: np.ndarray, demand: np.ndarray
) -> RingJob:
    room = int(np.minimum(fits, job.worker_cap).sum())
    total = job.total_work
    mu = job.utility
    base = mu(progress)
    gains: list[float] = []
    for k in range(1, min(job.worker_cap, room) + 1):
        gains.append(max(0.0, mu(min(progress + k * zeta, total)) - base))
        if progress + k * zeta >= total:
            break
    hosts = tuple(int(s) for s in np.flatnonzero(fits >= 1))
    return RingJob(job.job_id, tuple(gains), demand, job.hop_gbps or 0.0, hosts)


def slot_problem(seed: int, servers: int, jobs: int, draw: int) -> SlotProblem:
    """Instance ``draw`` of a seed: its jobs on its cluster at random progress states."""
    w = workload(seed, jobs, servers, 1)
    cluster = w.cluster
    # A worker is one GPU (A24): a server holds as many workers as it has whole GPUs.
    fits = np.floor(cluster.capacity[:, cluster.resource_names.index("gpu")] + 1e-9)
    rng = np.random.default_rng([seed, servers, draw])
    ring_jobs = []
    for job in w.jobs:
        zeta = w.slot_seconds / job.compute_s
        rise = min(float(job.utility.params.get("expected", job.total_work)), job.total_work)
        progress = float(rng.uniform(max(0.0, rise - job.worker_cap * zeta), rise))
        demand = cluster.demand_array(job.worker_demand(None))
        ring_jobs.append(_ring_job(job, progress, zeta, fits, demand))
    return SlotProblem.full(cluster, ring_jobs)


def _one(item: RatioItem) -> list[dict[str, Any]]:
    rows = []
    for draw in range(item.draws):
        problem = slot_problem(item.seed, item.servers, item.jobs, draw)
        opt = slot_optimum(problem, time_limit_s=item.time_limit_s)
        row: dict[str, Any] = {
            "seed": item.seed,
            "servers": item.servers,
            "draw": draw,
            "jobs": len(problem.jobs),
            "live_jobs": sum(max(j.gains, default=0.0) > ZERO for j in problem.jobs),
            "gamma": max((j.max_ring for j in problem.jobs), default=0),
            "opt": opt.value,
            "opt_bound": opt.bound,
            "opt_proven": opt.proven,
            "opt_seconds": opt.seconds,
        }
        for mode, strict in (("paper", False), ("strict", True)):
            rng = np.random.default_rng([item.seed, item.servers, draw, 1])
            sol = lp_rs_mde(problem, rng, trials=TRIALS, strict=strict)
            row[mode] = sol.value
            row[f"{mode}_violations"] = len(problem.check(sol.placements))
            row[f"{mode}_ratio"] = sol.value / opt.value if opt.value > ZERO else None
            if mode == "paper":
                row["lp_value"] = sol.lp_value
                row["beta"] = float(np.max(sol.beta))
                row["gamma_e"] = float(sol.gamma)
        rows.append(row)
    return rows


def run_ratio(
    items: list[RatioItem], runner: Runner, advance: Callable[[int], None]
) -> dict[str, Any]:
    rows = [row for part in runner.map(_one, items, advance) for row in part]
    first = items[0] if items else None
    return {
        "jobs": first.jobs if first else None,
        "time_limit_s": first.time_limit_s if first else None,
        "trials": TRIALS,
        "rows": rows,
    }


def bound(gamma: int) -> float:
    """Theorem 8 with Lemma 7: LP-RS-MDE keeps at least 1/(3 Gamma) of the optimum."""
    return 1.0 / (3.0 * gamma) if gamma > 0 else math.inf
