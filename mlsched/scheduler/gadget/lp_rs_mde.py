"""LP-RS-MDE (spec 003 Alg. 2): one slot's G-VNE by LP ring-size selection, the LP over
candidate embeddings of the chosen sizes, its decomposition and randomized rounding.

1. The LP over every ring size 1..q_i (:mod:`.config_lp`) gives chi_bar[i, k], the mass of
   size k; a job without mass is dropped, else kappa_i = argmax_k pi[i, k] chi_bar[i, k]
   (ties: the smaller k), Lemma 7's selection.
2. The LP again with each kept job's size fixed to kappa_i (the reduced problem): LP* and
   phi, the decomposition M_i (embeddings with phi > 0).
3. Up to ``u_b`` rounding trials (:mod:`.rounding`), strict or paper mode.

Before any LP: when every job's most valuable ring fits at once (found greedily), that is
the slot's optimum and the LPs are skipped.

Rings come out grouped by rack, each server once (§3.4.4): valid by construction.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mlsched.core.allocation import Placement
from mlsched.scheduler.gadget.config_lp import solve_config_lp
from mlsched.scheduler.gadget.embeddings import cheapest
from mlsched.scheduler.gadget.problem import SlotProblem
from mlsched.scheduler.gadget.rounding import Candidates, round_embeddings

__all__ = ["SlotSolution", "everyone_at_best", "lp_rs_mde"]


def everyone_at_best(problem: SlotProblem) -> SlotSolution | None:
    """When every job's most valuable ring fits at once, that is the optimum (no LP can do
    better than each job at its best gain): found greedily, most valuable first, each at
    the smallest size of its best gain; None as soon as one does not fit. Lightly loaded
    slots, most of a run's, need no LP."""
    jobs = problem.jobs
    wanted = []
    for i, job in enumerate(jobs):
        sizes = [k for k in range(1, job.max_ring + 1) if job.worth(k)]
        if sizes:
            best = max(job.log_gain(k) for k in sizes)
            wanted.append((best, i, next(k for k in sizes if job.log_gain(k) == best)))
    used, link_used = np.zeros_like(problem.capacity, dtype=float), np.zeros(len(problem.links))
    residual = problem
    placements: dict[str, Placement] = {}
    value = 0.0
    for _, i, k in sorted(wanted, key=lambda t: (-t[0], t[1])):
        cap = residual.capacity
        spread = np.divide(1.0, cap, out=np.zeros_like(cap, dtype=float), where=cap > 0)
        found = cheapest(residual, i, spread, np.zeros(len(problem.links)), k)[k - 1]
        if found is None:
            return None
        e = found[1]
        job = jobs[i]
        for s, count in e.workers:
            used[s] += count * job.demand
        for link in e.links:
            link_used[link] += job.hop_gbps
        residual = problem.minus(used, link_used)
        placements[job.job_id] = e.placement()
        value += job.gain(k)
    chosen = {jobs[i].job_id: k for _, i, k in wanted}
    return SlotSolution(placements, value, value, value, chosen, 0, True, 0, 0)


_MASS_TOL = 1e-7
_PHI_TOL = 1e-9


@dataclass(frozen=True)
class SlotSolution:
    """The slot's rings, their value, and the LP figures behind them."""

    placements: dict[str, Placement]
    value: float
    lp_value: float  # step 1: the LP over all ring sizes (an upper bound on the optimum)
    reduced_lp_value: float  # step 2: LP* with the sizes fixed
    sizes: dict[str, int]  # kappa_i of each kept job
    trials: int
    accepted: bool
    columns: int
    lp_rounds: int
    #: The violation factors the rounding allowed (paper mode; 1 in strict mode).
    beta: np.ndarray | float = 1.0
    gamma: float = 1.0


def lp_rs_mde(
    problem: SlotProblem,
    rng: np.random.Generator,
    *,
    trials: int = 50,
    strict: bool = True,
    alpha_v: float = 1.0 / 3.0,
    fill: bool = True,
) -> SlotSolution:
    everyone = everyone_at_best(problem)
    if everyone is not None:
        return everyone
    jobs = problem.jobs
    sizes_all = {
        i: [k for k in range(1, job.max_ring + 1) if job.worth(k)] for i, job in enumerate(jobs)
    }
    full = solve_config_lp(problem, sizes_all)
    kappa: dict[int, int] = {}
    mass = full.masses()
    for i, job in enumerate(jobs):
        masses = [(k, mass.get((i, k), 0.0)) for k in sizes_all[i]]
        if sum(m for _, m in masses) <= _MASS_TOL:
            continue
        kappa[i] = max(
            ((k, m) for k, m in masses if m > _MASS_TOL),
            key=lambda km: (job.gain(km[0]) * km[1], -km[0]),
        )[0]
    reduced = solve_config_lp(problem, {i: [k] for i, k in kappa.items()}, columns=full.columns)
    candidates = []
    for i, k in kappa.items():
        picked = [
            (e, float(f))
            for e, f in zip(reduced.columns, reduced.phi, strict=True)
            if e.job == i and f > _PHI_TOL
        ]
        if picked:
            candidates.append(
                Candidates(
                    i,
                    jobs[i].gain(k),
                    tuple(e for e, _ in picked),
                    tuple(f for _, f in picked),
                )
            )
    rounded = round_embeddings(
        problem,
        candidates,
        reduced.value,
        rng,
        trials=trials,
        strict=strict,
        alpha_v=alpha_v,
        fill=fill,
    )
    placements = {jobs[i].job_id: e.placement() for i, e in sorted(rounded.chosen.items())}
    return SlotSolution(
        placements,
        rounded.value,
        full.value,
        reduced.value,
        {jobs[i].job_id: k for i, k in kappa.items()},
        rounded.trials,
        rounded.accepted,
        len(full.columns),
        full.rounds + reduced.rounds,
        rounded.beta,
        rounded.gamma,
    )
