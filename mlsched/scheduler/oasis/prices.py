"""Exponential resource prices (spec 001 §3.1, paper (22)-(26)), computed in log space.

For server ``s``, resource ``r`` and slot ``t`` with ``g`` already committed out of ``c``:

    p = L * (U^r / L)^(g / c),  i.e.  ln p = ln L + (g / c) (ln U^r - ln L)

L for zero load, U^r at full capacity. With sigmoid utilities ``f(T - a)`` can be below
1e-300 (spec A7), so L, U and every price are kept as logarithms and exponentiated only
when a cost is formed: a price that underflows is 0, never NaN or infinite.

Constants, per pool (workers: ``U_1``, ``L_1``; PSs: ``U_2``, ``L_2``), over the jobs j
that the estimate covers (:class:`ConstantsEstimator`):

    U^r = max_{j: d_j^r > 0} f_j(delta_j) / d_j^r
    eta = max_j T sum_{h in pool} sum_r c_h^r / (Work_j sum_r d_j^r)
    L   = 1 / (4 eta) * min_j f_j(T - a_j) / (Work_j sum_r d_j^r)

where ``d_j`` is a worker's (PS's) demand and ``delta_j`` the shortest completion duration
(option ``u_duration``, spec A2). A server that hosts both workers and PSs takes the lower
L and the higher U of the two pools (its price must cover either use). Resources no job of
a pool uses keep price L; U is clamped to at least L. ``ul_ratio_scale`` multiplies U and
keeps L (spec A24). With ``normalize`` every amount is divided by the mean server capacity
of its resource before prices and sums are formed (spec A21's optional switch).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mlsched.core.cluster import Cluster
from mlsched.core.job import JobSpec
from mlsched.scheduler.oasis.needs import JobNeeds

__all__ = [
    "U_DURATIONS",
    "ConstantsEstimator",
    "PoolConstants",
    "PriceConstants",
    "direct_price",
    "log_price",
]

#: Readings of the shortest duration ``delta_j`` in U (spec A2): the recommended
#: ``max(0, d_min - 1)``, the alternative ``d_min``, and the paper's literal
#: ``d_min - a_j`` (a duration minus an arrival slot; it is a typo, kept for comparison).
U_DURATIONS = ("dmin-1", "dmin", "paper")

#: ln of the smallest normal double: L where no job gives one (all utilities 0 at T).
_LN_TINY = math.log(np.finfo(float).tiny)


def log_price(ln_low: float, ln_high: float, load: float) -> float:
    """ln of the price at ``load`` = g / c in [0, 1]."""
    return ln_low + load * (ln_high - ln_low)


def direct_price(low: float, high: float, load: float) -> float:
    """The price computed as the paper writes it (underflows where L does)."""
    return low * (high / low) ** load


@dataclass(frozen=True)
class PoolConstants:
    """One pool's constants as logarithms; ``ln_high[r]`` is -inf where no job uses r."""

    ln_low: float
    ln_high: np.ndarray

    @property
    def low(self) -> float:
        return math.exp(self.ln_low)

    def high(self) -> np.ndarray:
        return np.exp(self.ln_high)


@dataclass(frozen=True)
class PriceConstants:
    """Per-server ln L and per-(server, resource) ln U, ready for :meth:`log_prices`."""

    worker: PoolConstants
    ps: PoolConstants
    ln_low: np.ndarray  # (servers,)
    ln_high: np.ndarray  # (servers, resources), >= ln_low

    def log_prices(self, used: np.ndarray, capacity: np.ndarray) -> np.ndarray:
        """ln p for committed ``used`` of shape (..., servers, resources)."""
        load = np.divide(used, capacity, out=np.zeros_like(used), where=capacity > 0)
        np.clip(load, 0.0, 1.0, out=load)
        low = self.ln_low[:, None]
        return low + load * (self.ln_high - low)

    def prices(self, used: np.ndarray, capacity: np.ndarray) -> np.ndarray:
        """Prices for committed ``used``: finite, 0 where they underflow."""
        return np.exp(self.log_prices(used, capacity))

    @property
    def alpha(self) -> float:
        """max_r(1, ln(U_1^r / L_1), ln(U_2^r / L_2)): the 2-alpha competitive ratio's alpha."""
        out = 1.0
        for pool in (self.worker, self.ps):
            spread = pool.ln_high[np.isfinite(pool.ln_high)] - pool.ln_low
            if spread.size:
                out = max(out, float(spread.max()))
        return out


class _PoolStats:
    """Running extremes over the jobs seen, for one pool."""

    def __init__(self, n_resources: int) -> None:
        self.ln_high = np.full(n_resources, -math.inf)
        self.min_ln_size = math.inf  # min_j ln(Work_j sum_r d_j^r)
        self.min_ln_density = math.inf  # min_j ln f_j(T - a_j) - ln(Work_j sum_r d_j^r)
        self.seen = False

    def add(self, demand: np.ndarray, work: int, ln_f_best: float, ln_f_end: float) -> bool:
        total = float(demand.sum())
        if total <= 0:
            return False
        self.seen = True
        changed = False
        used = demand > 0
        cand = ln_f_best - np.log(demand[used])
        cur = self.ln_high[used]
        if np.any(cand > cur):
            self.ln_high[used] = np.maximum(cur, cand)
            changed = True
        ln_size = math.log(work) + math.log(total)
        if ln_size < self.min_ln_size:
            self.min_ln_size, changed = ln_size, True
        if ln_f_end > -math.inf and ln_f_end - ln_size < self.min_ln_density:
            self.min_ln_density, changed = ln_f_end - ln_size, True
        return changed

    def constants(self, ln_slots: float, ln_pool_capacity: float) -> PoolConstants | None:
        if not self.seen:
            return None
        ln_eta = ln_slots + ln_pool_capacity - self.min_ln_size
        density = self.min_ln_density if self.min_ln_density < math.inf else _LN_TINY
        ln_low = -math.log(4.0) - ln_eta + density
        return PoolConstants(ln_low, self.ln_high.copy())


class ConstantsEstimator:
    """U and L from the jobs added so far (spec §3.1 "online estimation", A15).

    The policy adds the catalogue (the generated job set in simulation: oracle values; a job
    catalogue or trace on the testbed) at setup and each arriving job at its arrival, so
    the bounds only widen; with ``ul_estimate="history"`` only arrivals are added (the
    paper's "estimated values based on past experience").

    ``slots`` is T (the horizon, or the planning window without one); a job's latest
    completion duration is ``T - 1 - a_j`` with a horizon and ``window - 1`` without.
    """

    def __init__(
        self,
        cluster: Cluster,
        *,
        horizon: int | None,
        window: int,
        u_duration: str = "dmin-1",
        utility_floor: float = 0.0,
        ul_ratio_scale: float = 1.0,
        normalize: bool = False,
    ) -> None:
        if u_duration not in U_DURATIONS:
            raise ValueError(f"u_duration must be one of {U_DURATIONS}, got {u_duration!r}")
        self.cluster = cluster
        self.horizon = horizon
        self.window = window
        self.u_duration = u_duration
        self.ln_floor = math.log(utility_floor) if utility_floor > 0 else -math.inf
        self.ln_scale = math.log(ul_ratio_scale)
        cap = cluster.capacity
        if normalize:
            counted = np.where(cap > 0, 1.0, 0.0).sum(axis=0)
            mean = np.divide(cap.sum(axis=0), counted, out=np.ones(cap.shape[1]), where=counted > 0)
            self.unit = np.where(mean > 0, mean, 1.0)
        else:
            self.unit = np.ones(cap.shape[1])
        n_r = cap.shape[1]
        self._worker = _PoolStats(n_r)
        self._ps = _PoolStats(n_r)
        hosts_w = np.array([s.pool.hosts_workers() for s in cluster.servers])
        hosts_p = np.array([s.pool.hosts_ps() for s in cluster.servers])
        self._hosts_w, self._hosts_p = hosts_w, hosts_p
        scaled = cap / self.unit
        self._ln_cap_w = math.log(max(float(scaled[hosts_w].sum()), 1e-300))
        self._ln_cap_p = math.log(max(float(scaled[hosts_p].sum()), 1e-300))
        self._cache: PriceConstants | None = None

    @property
    def slots(self) -> int:
        return self.horizon if self.horizon is not None else self.window

    def priced(self, demand: np.ndarray) -> np.ndarray:
        """A demand in the units prices are per (normalized when ``normalize``)."""
        return demand / self.unit

    def _ln_f(self, job: JobSpec, x: float) -> float:
        u = job.utility
        if u.over_progress:  # a progress utility: worth u(total work) whenever it ends
            worth = u(job.total_work)
            value = math.log(worth) if worth > 0 else -math.inf
        else:
            value = u.log_value(x)
        return max(value, self.ln_floor)

    def add(self, job: JobSpec, needs: JobNeeds) -> None:
        """Widen the bounds with ``job`` (at its per-worker rate in ``needs``)."""
        d_min = needs.min_duration
        best = {
            "dmin-1": max(0, d_min - 1),
            "dmin": d_min,
            "paper": d_min - job.arrival_slot,
        }[self.u_duration]
        if self.horizon is not None:
            end = max(0, self.horizon - 1 - job.arrival_slot)
        else:
            end = self.window - 1
        ln_best, ln_end = self._ln_f(job, best), self._ln_f(job, end)
        if ln_best == -math.inf:
            return  # a job worth nothing bounds nothing
        w = self.priced(self.cluster.demand_array(job.worker))
        changed = self._worker.add(w, needs.work, ln_best, ln_end)
        if job.uses_ps:
            s = self.priced(self.cluster.demand_array(job.ps))
            changed = self._ps.add(s, needs.work, ln_best, ln_end) or changed
        if changed:
            self._cache = None

    def constants(self) -> PriceConstants:
        """The current constants (cached until a job widens them)."""
        if self._cache is None:
            self._cache = self._build()
        return self._cache

    def _build(self) -> PriceConstants:
        ln_t = math.log(max(1, self.slots))
        n_r = self.cluster.capacity.shape[1]
        worker = self._worker.constants(ln_t, self._ln_cap_w)
        ps = self._ps.constants(ln_t, self._ln_cap_p)
        if worker is None and ps is None:
            worker = PoolConstants(0.0, np.full(n_r, -math.inf))
        worker = worker or ps
        ps = ps or worker
        assert worker is not None and ps is not None
        n_s = len(self.cluster)
        ln_low = np.empty(n_s)
        ln_high = np.empty((n_s, n_r))
        for i in range(n_s):
            pools = [p for p, on in ((worker, self._hosts_w[i]), (ps, self._hosts_p[i])) if on]
            ln_low[i] = min(p.ln_low for p in pools)
            ln_high[i] = np.max([p.ln_high for p in pools], axis=0)
        ln_high = np.where(np.isfinite(ln_high), ln_high + self.ln_scale, -math.inf)
        ln_high = np.maximum(ln_high, ln_low[:, None])
        return PriceConstants(worker=worker, ps=ps, ln_low=ln_low, ln_high=ln_high)
