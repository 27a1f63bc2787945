"""The LP of LP-RS-MDE over candidate embeddings, solved by column generation.

Variables phi_e >= 0, one per candidate embedding e of job i(e) with k(e) workers:

    max  sum_e pi_{i(e), k(e)} phi_e
    s.t. sum_{e of i} phi_e <= 1                                   (each job; dual lambda_i)
         sum_e phi_e * workers_e(s) * l_{i(e)}^r <= free(s, r)     (servers; dual p_{s,r})
         sum_e phi_e * b_{i(e)} * crosses_e(link) <= free(link)    (links; dual q_link)

This is spec 003's LP relaxation written over whole embeddings instead of node and arc
flows (the configuration LP): each job's part is the convex hull of its valid rings, so it
is at least as tight as the flow relaxation (12)-(19), and a solution *is* its
decomposition into candidate embeddings with probabilities phi (what the cactus LP of
§3.4.1 exists to make possible). Columns enter when their reduced cost
pi - lambda_i - sum p.load - sum q.load is positive; :func:`~.embeddings.cheapest` finds
the most negative cost exactly, so the loop ends at the LP's optimum.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from mlsched.scheduler.gadget.embeddings import Embedding, cheapest, fits_alone
from mlsched.scheduler.gadget.problem import SlotProblem
from mlsched.scheduler.solvers import solve_lp

__all__ = ["ConfigSolution", "solve_config_lp"]

#: A column prices out when its reduced cost exceeds this share of the problem's largest
#: gain: the solver's precision, not a floor on gains. :mod:`.tiers` gives each LP gains
#: within :data:`~.tiers.TIER_SPAN` of its largest, so every positive gain can enter.
_REDUCED_COST_TOL = 1e-9


@dataclass(frozen=True)
class ConfigSolution:
    """The LP's value, the columns with their phi, and how it was reached."""

    value: float
    columns: tuple[Embedding, ...]
    phi: np.ndarray
    rounds: int
    converged: bool

    def masses(self) -> dict[tuple[int, int], float]:
        """sum of phi over each (job, size)'s columns."""
        out: dict[tuple[int, int], float] = {}
        for e, f in zip(self.columns, self.phi, strict=True):
            key = (e.job, e.size)
            out[key] = out.get(key, 0.0) + float(f)
        return out


def solve_config_lp(
    problem: SlotProblem,
    sizes: Mapping[int, Sequence[int]],
    *,
    columns: Sequence[Embedding] = (),
    max_rounds: int = 200,
    gap: float = 1e-4,
) -> ConfigSolution:
    """The LP over the embeddings of each job ``i`` in ``sizes`` with a ring size in
    ``sizes[i]``. ``columns`` seed it (others of those jobs and sizes are dropped).

    It stops when no column prices out, or when the Lagrangian bound (the LP's value plus
    each job's best reduced cost, as each job's phi sums to at most 1) is within ``gap``
    (relative) of the value: the value is then optimal to that tolerance."""
    jobs = sorted(j for j, ks in sizes.items() if ks)
    allowed = {j: frozenset(sizes[j]) for j in jobs}
    pool: list[Embedding] = []
    seen: set[tuple[int, tuple[tuple[int, int], ...]]] = set()

    def add(e: Embedding) -> bool:
        key = (e.job, e.workers)
        if e.job not in allowed or e.size not in allowed[e.job] or key in seen:
            return False
        if not problem.jobs[e.job].worth(e.size):
            return False
        seen.add(key)
        pool.append(e)
        return True

    for e in columns:
        add(e)
    fits = {j: fits_alone(problem, problem.jobs[j], max(allowed[j])) for j in jobs}
    if not jobs:
        return ConfigSolution(0.0, (), np.zeros(0), 0, True)
    n_servers, n_res = problem.capacity.shape
    row_of_job = {j: i for i, j in enumerate(jobs)}
    n_links = len(problem.links)
    # Seed: each job's cheapest embedding of each size when a unit costs its share of the
    # capacity (rings spread over roomy servers and links, not all on server 0).
    cap, link_cap = problem.capacity, problem.link_capacity
    spread = np.divide(1.0, cap, out=np.zeros_like(cap, dtype=float), where=cap > 0)
    spread_links = np.divide(1.0, link_cap, out=np.zeros(n_links), where=link_cap > 0)
    _price_all(
        problem, jobs, allowed, fits, spread, spread_links, np.zeros(len(jobs)), add, seed=True
    )
    entries: list[tuple[float, list[int], list[float]]] = []
    value, phi, rounds, converged = 0.0, np.zeros(0), 0, False
    for rounds in range(1, max_rounds + 1):  # noqa: B007 (the count is reported)
        if not pool:
            converged = True
            break
        entries += [_column(problem, e, row_of_job) for e in pool[len(entries) :]]
        c, a_ub, b_ub = _matrix(problem, entries, len(row_of_job))
        res = solve_lp(c, A_ub=a_ub, b_ub=b_ub, maximize=True)
        if not res.ok or res.x is None or res.duals_ub is None:
            break
        value, phi = float(res.objective or 0.0), res.x
        duals = np.maximum(res.duals_ub, 0.0)
        lam = duals[: len(jobs)]
        node_price = duals[len(jobs) : len(jobs) + n_servers * n_res].reshape(n_servers, n_res)
        link_price = duals[len(jobs) + n_servers * n_res :]
        best_reduced = _price_all(problem, jobs, allowed, fits, node_price, link_price, lam, add)
        if best_reduced is None or best_reduced <= gap * max(value, 1e-9):
            converged = True
            break
    return ConfigSolution(value, tuple(pool[: len(phi)]), phi, rounds, converged)


def _price_all(
    problem: SlotProblem,
    jobs: Sequence[int],
    allowed: Mapping[int, frozenset[int]],
    fits: Mapping[int, np.ndarray],
    node_price: np.ndarray,
    link_price: np.ndarray,
    lam: np.ndarray,
    add: Callable[[Embedding], bool],
    *,
    seed: bool = False,
) -> float | None:
    """Add each job's best column of each allowed size if its reduced cost is positive
    (every best column when seeding). Returns the sum over jobs of each job's best
    positive reduced cost (the Lagrangian gap), or None when no column was added."""
    added = False
    total = 0.0
    scale = max((max(problem.jobs[j].gains, default=0.0) for j in jobs), default=0.0)
    for row, j in enumerate(jobs):
        job_best = 0.0
        job = problem.jobs[j]
        k_max = max(allowed[j])
        best = cheapest(problem, j, node_price, link_price, k_max, fits[j])
        for k, entry in enumerate(best, 1):
            if entry is None or k not in allowed[j]:
                continue
            cost, e = entry
            reduced = job.gain(k) - lam[row] - cost
            positive = reduced > _REDUCED_COST_TOL * scale
            if positive:
                job_best = max(job_best, reduced)
            if (seed or positive) and add(e):
                added = True
        total += job_best
    return total if added else None


def _column(
    problem: SlotProblem, e: Embedding, row_of_job: Mapping[int, int]
) -> tuple[float, list[int], list[float]]:
    """A column's objective coefficient, rows and values (rows: jobs, then servers x
    resources, then links)."""
    n_servers, n_res = problem.capacity.shape
    node_base = len(row_of_job)
    link_base = node_base + n_servers * n_res
    job = problem.jobs[e.job]
    rows = [row_of_job[e.job]]
    vals = [1.0]
    needed = np.flatnonzero(job.demand)
    for s, count in e.workers:
        rows += (node_base + s * n_res + needed).tolist()
        vals += (count * job.demand[needed]).tolist()
    rows += [link_base + link for link in e.links]
    vals += [job.hop_gbps] * len(e.links)
    return job.gain(e.size), rows, vals


def _matrix(
    problem: SlotProblem, entries: Sequence[tuple[float, list[int], list[float]]], n_jobs: int
) -> tuple[np.ndarray, object, np.ndarray]:
    from scipy.sparse import csc_matrix

    c = np.fromiter((gain for gain, _, _ in entries), float, len(entries))
    lengths = [len(rows) for _, rows, _ in entries]
    indptr = np.zeros(len(entries) + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    indices = np.fromiter((r for _, rows, _ in entries for r in rows), np.int64, int(indptr[-1]))
    data = np.fromiter((v for _, _, vals in entries for v in vals), float, int(indptr[-1]))
    n_rows = n_jobs + problem.capacity.size + len(problem.links)
    a_ub = csc_matrix((data, indices, indptr), shape=(n_rows, len(entries)))
    b_ub = np.concatenate(
        [np.ones(n_jobs), problem.capacity.reshape(-1), problem.link_capacity]
    ).astype(float)
    return c, a_ub, b_ub
