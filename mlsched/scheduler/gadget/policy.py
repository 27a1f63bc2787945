"""GADGET's Algorithm 1 (spec 003 §3.2): every slot, the temporally greedy choice.

Each slot, for every active job i: its progress P_i (work units = worker-iterations, as the
engine measures them), its rate R_i(k) per slot with k workers from the runtime model (the
conservative zeta_i(k) of (E2): a ring split across two servers, hops at the job's
reservation b_i), q_i = the fewest workers that finish its budget in this slot, capped by its
``max_workers`` and by what the cluster holds, and the gains
pi[i, k] = mu_i(min(P_i + R_i(k), F_i)) - mu_i(P_i) (utility clipped at the budget F_i, A7),
as logarithms so that none underflows to 0. LP-RS-MDE (:mod:`.lp_rs_mde`, strict mode: the
engine refuses any over-allocation) embeds the rings on the whole cluster, in tiers of gain
magnitude (:mod:`.tiers`) so that every positive gain counts. A job given as many workers
as last slot keeps last slot's servers when they still fit (no restart for nothing, A21);
with ``idle_fill`` (default) jobs left out take what is left idle (only a job that gains
nothing at all is left out with room to spare); the others pause. Nothing persists between slots: the
next slot is planned anew from the measured progress ("measured" mode of §3.2).

Jobs whose utility is over completion time (every other spec's) are valued by progress
made: mu(x) = (the utility's largest value) * x / F, linear and so concave; a job whose
utility is constant 0 is worth its work alone (mu(x) = x / F).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from mlsched.core.allocation import Admission, Allocation, Placement, RejectKind
from mlsched.core.cluster import Cluster
from mlsched.core.job import Arch, JobSpec
from mlsched.scheduler.gadget.embeddings import Embedding, cheapest, embedding_of
from mlsched.scheduler.gadget.lp_rs_mde import everyone_at_best, lp_rs_mde
from mlsched.scheduler.gadget.problem import RingJob, SlotProblem
from mlsched.scheduler.gadget.rounding import Ledger
from mlsched.scheduler.gadget.tiers import solve_in_tiers
from mlsched.scheduler.policy import Policy
from mlsched.scheduler.rate_memo import RateMemo
from mlsched.scheduler.view import ClusterView, JobView, RunContext

__all__ = ["GadgetPolicy", "SlotRecord"]


@dataclass(frozen=True)
class SlotRecord:
    """One slot's decision: its size, what LP-RS-MDE found, and how long it took."""

    slot: int
    jobs: int
    placed: int
    value: float
    lp_value: float
    trials: int
    columns: int
    seconds: float


def _count(value: Any, name: str, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return value


class GadgetPolicy(Policy):
    name = "gadget"
    description = (
        "spec 003: GADGET, per-slot greedy ring embedding (LP ring-size selection, LP over "
        "candidate rings, randomized rounding) of all-reduce jobs over racks and links"
    )
    archs = frozenset({Arch.ALLREDUCE})

    def __init__(
        self,
        *,
        trials: int = 50,
        alpha_v: float = 1.0 / 3.0,
        fill: bool = True,
        idle_fill: bool = True,
        max_lp_jobs: int = 200,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self.trials = _count(trials, "trials")
        self.max_lp_jobs = _count(max_lp_jobs, "max_lp_jobs")
        if not (
            isinstance(alpha_v, (int, float)) and not isinstance(alpha_v, bool) and 0 < alpha_v <= 1
        ):
            raise ValueError(f"alpha_v must be a number in (0, 1], got {alpha_v!r}")
        for name, value in (("fill", fill), ("idle_fill", idle_fill)):
            if not isinstance(value, bool):
                raise ValueError(f"{name} must be true or false, got {value!r}")
        self.alpha_v = float(alpha_v)
        self.fill = fill
        self.idle_fill = idle_fill
        #: Every slot with active jobs, in order.
        self.decisions: list[SlotRecord] = []
        self._rates = RateMemo()  # each job's rate per ring size, while its model stands
        self._hosts: dict[str, tuple[tuple[int, ...], int]] = {}
        self._hosts_cluster: Cluster | None = None

    def setup(self, context: RunContext) -> None:
        super().setup(context)
        self.decisions.clear()
        self._rates.clear()
        self._hosts.clear()

    # Admission ------------------------------------------------------------------------
    def on_arrival(self, job: JobSpec, view: ClusterView) -> Admission:
        if not self.supports(job):
            return Admission.reject(
                RejectKind.INFEASIBLE, "gadget schedules ring-all-reduce jobs only"
            )
        _, room = self._hosts_of(job, view)
        if room < job.min_workers:
            return Admission.reject(
                RejectKind.INFEASIBLE,
                f"the cluster holds {room} of its workers, it needs {job.min_workers}",
            )
        return Admission.admit()

    def release(self, job_id: str) -> None:
        self._hosts.pop(job_id, None)
        self._rates.drop(job_id)

    def on_completion(self, job_id: str, view: ClusterView) -> None:
        self.release(job_id)

    # One slot ---------------------------------------------------------------------------
    def allocate(self, slot: int, view: ClusterView) -> Allocation:
        started = time.perf_counter()
        ring_jobs = [r for r in (self._ring_job(j, view) for j in view.values()) if r]
        if not ring_jobs:
            return Allocation(slot, {})
        problem = SlotProblem.full(view.cluster, ring_jobs)
        seed = self.context.seed if self.context is not None else 0
        rng = np.random.default_rng((seed, slot))
        solution = everyone_at_best(problem)
        if solution is None:
            # In tiers of gain magnitude, so that the smallest positive gains count too;
            # spec 003 §3.6: an LP takes at most max_lp_jobs jobs, those of the largest
            # gains: its size, not the cluster's, sets the time of a contended slot.
            solution = solve_in_tiers(
                problem,
                lambda tier: lp_rs_mde(
                    tier,
                    rng,
                    trials=self.trials,
                    strict=True,
                    alpha_v=self.alpha_v,
                    fill=self.fill,
                ),
                max_jobs=self.max_lp_jobs,
            )
        placements = keep_previous(problem, solution.placements, view)
        if self.idle_fill:
            # Least attained service first (as Tiresias): idle capacity brings the most
            # jobs toward the rise of their utility.
            attained = [view[j.job_id].worker_slots for j in ring_jobs]
            order = sorted(range(len(ring_jobs)), key=lambda i: (attained[i], i))
            placements = idle_fill(problem, placements, order)
        self.decisions.append(
            SlotRecord(
                slot,
                len(ring_jobs),
                len(solution.placements),
                solution.value,
                solution.lp_value,
                solution.trials,
                solution.columns,
                time.perf_counter() - started,
            )
        )
        return Allocation(slot, placements)

    def _ring_job(self, view_job: JobView, view: ClusterView) -> RingJob | None:
        job = view_job.spec
        left = view_job.remaining
        if left <= 0 or not self.supports(job):
            return None
        hosts, room = self._hosts_of(job, view)
        cap = min(job.worker_cap, room)
        if cap < job.min_workers:
            return None
        done, total = min(view_job.progress, job.total_work), job.total_work
        log_gain = _log_gain(job)
        logs: list[float] = []
        rates = self._rates.of(job, view)
        for k in range(1, cap + 1):
            rate = rates.get(k)
            if rate is None:
                rate = rates[k] = self._rate(k, job, hosts, view)
            reach = min(done + rate, total)
            logs.append(log_gain(done, reach) if k >= job.min_workers else -math.inf)
            if done + rate >= total:  # k workers finish it: more add nothing (A7)
                break
        demand = view.cluster.demand_array(job.worker_demand(None))
        gains = tuple(math.exp(g) for g in logs)  # e^-inf is 0.0
        return RingJob(
            job.job_id,
            gains,
            demand,
            job.hop_gbps or 0.0,
            hosts,
            job.min_workers,
            log_gains=tuple(logs),
        )

    def _rate(self, k: int, job: JobSpec, hosts: tuple[int, ...], view: ClusterView) -> float:
        """Work units per slot with k workers: a ring split over two servers (across racks
        when the job may span racks), so that its hops run at the reservation (E2)."""
        placement = _representative(k, hosts, view)
        return view.runtime.throughput(job, placement) * view.slot_seconds

    def _hosts_of(self, job: JobSpec, view: ClusterView) -> tuple[tuple[int, ...], int]:
        """The servers that hold one of the job's workers, and how many the cluster holds
        (each server on its own): the job and the cluster decide them, once per job."""
        if view.cluster is not self._hosts_cluster:
            self._hosts.clear()
            self._hosts_cluster = view.cluster
        known = self._hosts.get(job.job_id)
        if known is None:
            cluster = view.cluster
            servers = [
                s
                for s in cluster.worker_servers
                if job.gpu_type is None or cluster.servers[s].gpu_type == job.gpu_type
            ]
            fits = dict(zip(servers, _fits(job, cluster, servers), strict=True))
            hosts = tuple(s for s, n in fits.items() if n > 0)
            known = (hosts, sum(fits.values()))
            self._hosts[job.job_id] = known
        return known


def _fits(job: JobSpec, cluster: Cluster, servers: list[int]) -> list[int]:
    """How many of the job's workers each server holds on its own (capped)."""
    demand = cluster.demand_array(job.worker_demand(None))
    need = demand > 0
    if not need.any():
        return [job.worker_cap] * len(servers)
    rows = np.asarray(servers, dtype=int)
    ratio = cluster.capacity[np.ix_(rows, np.flatnonzero(need))] / demand[need]
    return np.minimum(job.worker_cap, np.floor(ratio.min(axis=1) + 1e-9)).astype(int).tolist()


def keep_previous(
    problem: SlotProblem, placements: dict[str, Placement], view: ClusterView
) -> dict[str, Placement]:
    """Each job given as many workers as last slot goes back to last slot's servers when
    they still fit beside the rest (A21: same gain, no restart), one job at a time."""
    index = {j.job_id: i for i, j in enumerate(problem.jobs)}
    ledger = Ledger(problem)
    chosen: dict[str, Embedding] = {}
    for job_id, p in placements.items():
        e = embedding_of(problem, index[job_id], dict(p.workers))
        chosen[job_id] = e
        ledger.add(e)
    for job_id, e in chosen.items():
        last = view[job_id].last_placement
        if last is None or last.n_workers != e.size or last.workers == e.workers:
            continue
        if not set(s for s, _ in last.workers) <= set(problem.jobs[index[job_id]].hosts):
            continue
        previous = embedding_of(problem, index[job_id], dict(last.workers))
        ledger.remove(e)
        if ledger.fits(previous):
            ledger.add(previous)
            chosen[job_id] = previous
        else:
            ledger.add(e)
    return {job_id: e.placement() for job_id, e in chosen.items()}


def idle_fill(
    problem: SlotProblem, placements: dict[str, Placement], order: list[int] | None = None
) -> dict[str, Placement]:
    """Jobs left out take what the slot leaves idle, in ``order`` (default: the problem's),
    each the largest ring that fits: no placed job loses anything. Every positive gain has
    a ring already (:mod:`.tiers`), so what is left out here gains nothing at all (a
    utility that never rises) or did not fit."""
    residual = problem.minus(*problem.loads(placements))
    out = dict(placements)
    cap = residual.capacity
    spread = np.divide(1.0, cap, out=np.zeros_like(cap, dtype=float), where=cap > 0)
    for i in range(len(problem.jobs)) if order is None else order:
        job = problem.jobs[i]
        if job.job_id in out:
            continue
        links = np.zeros(len(problem.links))
        sizes = cheapest(residual, i, spread, links, job.max_ring)
        best = next((entry for entry in reversed(sizes) if entry is not None), None)
        if best is None or best[1].size < job.min_ring:
            continue
        e = best[1]
        out[job.job_id] = e.placement()
        for s, count in e.workers:
            residual.capacity[s] -= count * job.demand
        for link in e.links:
            residual.link_capacity[link] -= job.hop_gbps
    return out


def _representative(k: int, hosts: tuple[int, ...], view: ClusterView) -> Placement:
    first = hosts[0]
    if k == 1 or len(hosts) == 1:
        return Placement(((first, k),))
    racks = view.cluster.links.rack_of
    other = next((s for s in hosts if racks[s] != racks[first]), hosts[1])
    return Placement(((first, k - 1), (other, 1)), ring=(first, other))


def _log_gain(job: JobSpec) -> Callable[[float, float], float]:
    """(a, b) -> ln(mu(b) - mu(a)), the job's progress utility's increment, computed so
    that no positive gain underflows to 0 (:meth:`Utility.log_increment`)."""
    u = job.utility
    if u.over_progress:
        return u.log_increment
    total = job.total_work
    scale = u.max_value if math.isfinite(u.max_value) and u.max_value > 0 else 1.0

    def linear(a: float, b: float) -> float:
        return math.log(scale * (b - a) / total) if b > a else -math.inf

    return linear
