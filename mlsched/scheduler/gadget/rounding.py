"""Randomized rounding of the decomposed LP (spec 003 Alg. 2 steps 7-14).

Each kept job draws one of its candidate embeddings with probability phi (or none with
the rest). *Paper* mode accepts a draw worth at least ``alpha_v`` of the LP within the
violation factors beta^r (servers) and gamma_E (links) of (T8a, T8b); *strict* mode (the
only one the engine accepts) first repairs a draw by dropping, while anything is over,
the least valuable job loading an over-used resource, then fills what is left greedily
with the dropped and undrawn jobs' other candidates.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mlsched.scheduler.gadget.embeddings import Embedding
from mlsched.scheduler.gadget.problem import SlotProblem

__all__ = ["Candidates", "Ledger", "Rounded", "round_embeddings", "violation_factors"]

_TOL = 1e-6


@dataclass(frozen=True)
class Candidates:
    """One kept job's decomposition M_i: embeddings of its chosen size with their phi."""

    job: int
    gain: float
    embeddings: tuple[Embedding, ...]
    phi: tuple[float, ...]


@dataclass(frozen=True)
class Rounded:
    chosen: dict[int, Embedding]
    value: float
    trials: int
    accepted: bool  # a trial met the alpha_v test within the factors
    beta: np.ndarray | float = 1.0  # the server factor per resource (1: strict)
    gamma: float = 1.0  # the link factor (1: strict)


class Ledger:
    """Server and link loads of a set of embeddings, against the problem's free capacity."""

    def __init__(self, problem: SlotProblem) -> None:
        self.problem = problem
        self.used = np.zeros_like(problem.capacity, dtype=float)
        self.link_used = np.zeros(len(problem.links))

    def _apply(self, e: Embedding, sign: float) -> None:
        job = self.problem.jobs[e.job]
        for s, count in e.workers:
            self.used[s] += sign * count * job.demand
        for link in e.links:
            self.link_used[link] += sign * job.hop_gbps

    def add(self, e: Embedding) -> None:
        self._apply(e, 1.0)

    def remove(self, e: Embedding) -> None:
        self._apply(e, -1.0)

    def fits(self, e: Embedding) -> bool:
        job = self.problem.jobs[e.job]
        cap, free = self.problem.capacity, self.problem.link_capacity
        for s, count in e.workers:
            if np.any(self.used[s] + count * job.demand > cap[s] + _TOL):
                return False
        return all(self.link_used[link] + job.hop_gbps <= free[link] + _TOL for link in e.links)

    def over(self, beta: np.ndarray | float = 1.0, gamma: float = 1.0) -> tuple[set[int], set[int]]:
        """(servers, links) loaded beyond their factor times capacity."""
        cap = self.problem.capacity * beta
        servers = {int(s) for s in np.flatnonzero(np.any(self.used > cap + _TOL, axis=1))}
        links = set(
            np.flatnonzero(self.link_used > self.problem.link_capacity * gamma + _TOL).tolist()
        )
        return servers, links


def violation_factors(
    problem: SlotProblem, candidates: Sequence[Candidates]
) -> tuple[np.ndarray, float]:
    """beta^r per resource and gamma_E (T8a, T8b), with spec 003's epsilon (A10): the
    largest single demand over capacity. C_max / d_max per job and node is the most workers
    any of its candidates puts there; per link, the most hops (one, for rings grouped by
    rack)."""
    cap, link_cap = problem.capacity, problem.link_capacity
    n_res = cap.shape[1]
    eps = 0.0
    delta_v = np.zeros(cap.shape)
    delta_e = np.zeros(len(link_cap))
    for cand in candidates:
        job = problem.jobs[cand.job]
        most = np.zeros(cap.shape[0])
        hops = np.zeros(len(link_cap))
        for e in cand.embeddings:
            for s, count in e.workers:
                most[s] = max(most[s], count)
            for link in e.links:
                hops[link] = 1.0
        for r in range(n_res):
            if job.demand[r] > 0:
                delta_v[:, r] += most**2
                used = (most > 0) & (cap[:, r] > 0)
                if used.any():
                    eps = max(eps, float(job.demand[r] / cap[used, r].min()))
        if job.hop_gbps > 0 and hops.any():
            delta_e += hops
            eps = max(eps, float(job.hop_gbps / link_cap[hops > 0].min()))
    n_nodes, n_links = problem.links.node_count, len(link_cap)
    beta = 1.0 + eps * np.sqrt(2.0 * delta_v.max(axis=0) * math.log(n_nodes))
    gamma = 1.0 + eps * math.sqrt(2.0 * float(delta_e.max(initial=0.0)) * math.log(n_links))
    return beta, gamma


def round_embeddings(
    problem: SlotProblem,
    candidates: Sequence[Candidates],
    lp_value: float,
    rng: np.random.Generator,
    *,
    trials: int,
    strict: bool,
    alpha_v: float = 1.0 / 3.0,
    fill: bool = True,
) -> Rounded:
    """Up to ``trials`` draws; the first that passes the test, else the best that keeps
    within the factors (strict: within capacity after repair), then the greedy fill."""
    if strict:
        beta: np.ndarray | float = 1.0
        gamma = 1.0
    else:
        beta, gamma = violation_factors(problem, candidates)
    best: dict[int, Embedding] = {}
    best_value = -1.0
    accepted = False
    used_trials = 0
    for used_trials in range(1, trials + 1):  # noqa: B007 (reported)
        chosen = _draw(candidates, rng)
        ledger = Ledger(problem)
        for e in chosen.values():
            ledger.add(e)
        if strict:
            _repair(problem, chosen, ledger, candidates)
        value = sum(problem.jobs[j].gain(e.size) for j, e in chosen.items())
        servers, links = ledger.over(beta, gamma)
        within = not servers and not links
        if within and value >= alpha_v * lp_value - _TOL:
            best, best_value, accepted = chosen, value, True
            break
        if within and value > best_value:
            best, best_value = chosen, value
    if strict and fill:
        best = _fill(problem, best, candidates)
    value = sum(problem.jobs[j].gain(e.size) for j, e in best.items())
    return Rounded(best, value, used_trials, accepted, beta, gamma)


def _draw(candidates: Sequence[Candidates], rng: np.random.Generator) -> dict[int, Embedding]:
    chosen: dict[int, Embedding] = {}
    for cand in candidates:
        u = rng.random()
        acc = 0.0
        for e, f in zip(cand.embeddings, cand.phi, strict=True):
            acc += f
            if u < acc:
                chosen[cand.job] = e
                break
    return chosen


def _repair(
    problem: SlotProblem,
    chosen: dict[int, Embedding],
    ledger: Ledger,
    candidates: Sequence[Candidates],
) -> None:
    """Drop, while any server or link is over, the least valuable job that loads one."""
    gain = {c.job: c.gain for c in candidates}
    while True:
        servers, links = ledger.over()
        if not servers and not links:
            return
        loading = [j for j, e in chosen.items() if servers & set(e.servers) or links & set(e.links)]
        victim = min(loading, key=lambda j: (gain[j], -j))
        ledger.remove(chosen.pop(victim))


def _fill(
    problem: SlotProblem, chosen: dict[int, Embedding], candidates: Sequence[Candidates]
) -> dict[int, Embedding]:
    """Greedy fill (step 14): jobs left out, most valuable first, each with the first of
    its candidates (by decreasing phi) that fits what is left."""
    out = dict(chosen)
    ledger = Ledger(problem)
    for e in out.values():
        ledger.add(e)
    for cand in sorted(candidates, key=lambda c: (-c.gain, c.job)):
        if cand.job in out:
            continue
        for _, e in sorted(zip(cand.phi, cand.embeddings, strict=True), key=lambda t: -t[0]):
            if ledger.fits(e):
                ledger.add(e)
                out[cand.job] = e
                break
    return out
