"""Alg. 4: theta(t, v), the cheapest way to do ``v`` work units in one slot (spec 000 §3.5).

Two cases by Fact 1, the cheaper wins:

* **internal**: D = ceil(v / rate_int) workers and ceil(D / gamma) PSs (at least one, A8)
  all on one server that hosts both; the cheapest such server (closed form);
* **external**: the integer program EXT(t, v) over worker and PS counts per server at the
  external rate: per-server capacity (packing), ``sum w <= F`` (packing), ``sum w >= D``
  (cover) and ``sum s >= ceil(D / gamma)`` (the cover row the paper lacks, A6). Its LP
  relaxation (HiGHS) is scaled by the gain factor G_delta and randomly rounded, up to
  ``max_attempts`` draws, keeping the cheapest of the first ``rounds`` feasible ones (A9);
  none feasible makes this (t, v) infinite only (A14). ``exact`` solves EXT as a MILP
  instead (the reference of the rounding-ratio comparison, A30).

Prices arrive as logarithms (they span hundreds of orders of magnitude, A3); costs are
computed relative to the slot's largest price and scaled back, so the LP sees numbers near 1.
Results are memoised by the worker counts they imply (theta depends on v only through D),
which also makes a randomised theta consistent across the DP's sub-problems (A12).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from mlsched.scheduler.pdors.needs import PdorsNeeds
from mlsched.scheduler.solvers.highs import solve_lp, solve_milp

__all__ = ["Rounding", "SlotChoice", "SlotPricer", "gain_cover", "gain_packing"]

_EPS = 1e-9
_BATCH = 256  # rounding draws evaluated at once


def gain_packing(delta: float, w2: float, m_pack: int) -> float:
    """(E25): G_delta in (0, 1] that favours the packing rows; ``w2`` = W_2, ``m_pack``
    packing rows (R H + 1)."""
    _check_gain_args(delta, w2, m_pack)
    ell = 3.0 * math.log(3.0 * m_pack / delta) / w2
    return 1.0 + ell / 2.0 - math.sqrt((ell / 2.0) ** 2 + ell)


def gain_cover(delta: float, w1: float, m_cov: int) -> float:
    """(E26): G_delta > 1 that favours the cover rows; ``w1`` = W_1, ``m_cov`` cover rows
    (2 with the PS cover of A6)."""
    _check_gain_args(delta, w1, m_cov)
    ell = math.log(3.0 * m_cov / delta) / w1
    return 1.0 + ell + math.sqrt(ell**2 + 2.0 * ell)


def _check_gain_args(delta: float, w: float, m: int) -> None:
    if not 0 < delta <= 1:
        raise ValueError(f"delta must be in (0, 1], got {delta!r}")
    if not (w > 0 and math.isfinite(w)):
        raise ValueError(f"W must be a finite number > 0, got {w!r}")
    if m < 1:
        raise ValueError(f"the row count must be >= 1, got {m!r}")


@dataclass(frozen=True)
class Rounding:
    """How the external case is solved: LP + randomised rounding (the paper) or exactly."""

    gain: float = 1.0  # G_delta
    rounds: int = 10  # S_rr: feasible draws to collect
    max_attempts: int = 5000
    exact: bool = False  # solve EXT as a MILP (reference for the rounding ratio)
    time_limit_s: float = 5.0  # per MILP, exact only

    def __post_init__(self) -> None:
        if not (self.gain > 0 and math.isfinite(self.gain)):
            raise ValueError(f"g_delta must be a finite number > 0, got {self.gain!r}")
        for name in ("rounds", "max_attempts"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if not (self.time_limit_s > 0 and math.isfinite(self.time_limit_s)):
            raise ValueError(f"time_limit_s must be a finite number > 0, got {self.time_limit_s!r}")


@dataclass(frozen=True)
class SlotChoice:
    """One slot's allocation of a job: cost, workers and PSs per server index, its mode."""

    cost: float
    workers: dict[int, int]
    ps: dict[int, int]
    internal: bool

    @property
    def n_workers(self) -> int:
        return sum(self.workers.values())


_NONE = SlotChoice(0.0, {}, {}, True)


@dataclass
class SlotPricer:
    """theta(t, .) of one job in one slot state (prices, residual capacity).

    ``worker_servers``/``ps_servers`` are the servers that may host the job's workers/PSs;
    the internal case uses servers in both. ``internal=False`` leaves only the external case
    (the "separated" ablation, where the two sets are disjoint anyway)."""

    needs: PdorsNeeds
    ln_prices: np.ndarray  # (servers, resources), ln p
    free: np.ndarray  # (servers, resources), residual capacity
    worker_servers: np.ndarray
    ps_servers: np.ndarray
    rng: np.random.Generator
    rounding: Rounding = field(default_factory=Rounding)
    internal: bool = True
    _memo_int: dict[int, SlotChoice | None] = field(default_factory=dict, repr=False)
    _memo_ext: dict[int, SlotChoice | None] = field(default_factory=dict, repr=False)
    _int_rel: dict[int, float] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        finite = self.ln_prices[np.isfinite(self.ln_prices)]
        self._ln_scale = float(finite.max()) if finite.size else 0.0
        rel = np.exp(self.ln_prices - self._ln_scale)  # in (0, 1], exact ratios
        self._w_cost = rel @ self.needs.alpha  # relative price of one worker per server
        self._s_cost = rel @ self.needs.beta
        both = np.intersect1d(self.worker_servers, self.ps_servers)
        self._both = both if self.internal else both[:0]
        n = self.needs
        w_room = self.worker_servers[
            np.all(self.free[self.worker_servers] >= n.alpha - _EPS, axis=1)
        ]
        s_room = self.ps_servers[np.all(self.free[self.ps_servers] >= n.beta - _EPS, axis=1)]
        self._w_floor = float(self._w_cost[w_room].min()) if len(w_room) else math.inf
        self._s_floor = float(self._s_cost[s_room].min()) if len(s_room) else math.inf
        self._vectors: dict[tuple[float, int], np.ndarray] = {}

    def thetas(self, step: float, count: int) -> np.ndarray:
        """Costs of theta(j * step) for j = 0..count (inf: impossible); shared by every
        slot that has this pricer (the DP's slots with the same committed usage)."""
        key = (step, count)
        hit = self._vectors.get(key)
        if hit is None:
            hit = np.full(count + 1, math.inf)
            for j in range(count + 1):
                choice = self.theta(j * step)
                if choice is not None:
                    hit[j] = choice.cost
            self._vectors[key] = hit
        return hit

    def cost_of(self, workers: dict[int, int], ps: dict[int, int]) -> float:
        """The priced cost of an allocation, summed in log space: exact even where the
        prices relative to the slot's largest underflow (A3)."""
        terms: list[np.ndarray] = []
        for tasks, demand in ((workers, self.needs.alpha), (ps, self.needs.beta)):
            used = demand > 0
            for h, k in tasks.items():
                if k > 0:
                    terms.append(self.ln_prices[h, used] + np.log(demand[used] * k))
        if not terms:
            return 0.0
        ln = np.concatenate(terms)
        top = float(ln.max())
        if top == -math.inf:
            return 0.0
        try:
            return math.exp(top + math.log(float(np.exp(ln - top).sum())))
        except OverflowError:  # beyond any utility: as good as infinite
            return math.inf

    def theta(self, units: float) -> SlotChoice | None:
        """Cheapest choice doing ``units`` in this slot (None: impossible)."""
        if units <= 0:
            return _NONE
        n = self.needs
        d_int, d_ext = n.workers_for(units, True), n.workers_for(units, False)
        best: SlotChoice | None = None
        if len(self._both):
            best = self._memo(self._memo_int, d_int, self._internal)
        if best is not None and self._ext_floor(d_ext) >= self._int_rel[d_int]:
            return best  # no spread placement can be cheaper: skip the LP
        ext = self._memo(self._memo_ext, d_ext, self._external)
        if ext is not None and (best is None or ext.cost < best.cost):
            best = ext
        return best

    @staticmethod
    def _memo(
        memo: dict[int, SlotChoice | None], d: int, solve: Callable[[int], SlotChoice | None]
    ) -> SlotChoice | None:
        if d not in memo:
            memo[d] = solve(d)
        return memo[d]

    # Case 1 -----------------------------------------------------------------------------
    def _internal(self, d: int) -> SlotChoice | None:
        n = self.needs
        if d > n.cap:
            return None
        s = n.ps_for(d)
        demand = n.alpha * d + n.beta * s
        hosts = self._both
        fits = np.all(self.free[hosts] >= demand - _EPS, axis=1)
        if not fits.any():
            return None
        ok = hosts[fits]
        costs = self._w_cost[ok] * d + self._s_cost[ok] * s
        k = int(np.argmin(costs))  # first cheapest (lowest index on ties)
        h = int(ok[k])
        self._int_rel[d] = float(costs[k])
        return SlotChoice(self.cost_of({h: d}, {h: s}), {h: d}, {h: s}, True)

    # Case 2 -----------------------------------------------------------------------------
    def _ext_floor(self, d: int) -> float:
        """A lower bound on the external case's relative cost: every worker and PS at the
        cheapest price among the servers that can take one."""
        return d * self._w_floor + self.needs.ps_for(d) * self._s_floor

    def _external(self, d: int) -> SlotChoice | None:
        n = self.needs
        if d > n.cap:
            return None
        need_s = n.ps_for(d)
        w_ub = _task_caps(self.free, n.alpha, self.worker_servers, n.cap)
        s_ub = _task_caps(self.free, n.beta, self.ps_servers, need_s)
        if w_ub.sum() < d or s_ub.sum() < need_s:
            return None
        program = _Ext.build(self, d, need_s, w_ub, s_ub)
        if self.rounding.exact:
            return program.solve_exact(self)
        return program.solve_rounded(self)


def _task_caps(free: np.ndarray, demand: np.ndarray, hosts: np.ndarray, limit: int) -> np.ndarray:
    """Most tasks of ``demand`` each host fits alone, capped at ``limit`` (0 off ``hosts``)."""
    caps = np.zeros(free.shape[0], dtype=np.int64)
    if not len(hosts):
        return caps
    need = demand > 0
    if not need.any():
        caps[hosts] = limit
        return caps
    fit = np.floor(np.min(free[np.ix_(hosts, np.flatnonzero(need))] / demand[need], axis=1) + _EPS)
    caps[hosts] = np.clip(fit, 0, limit).astype(np.int64)
    return caps


@dataclass
class _Ext:
    """EXT(t, v) over the servers that can take one task: x = (w_h..., s_h...)."""

    servers: np.ndarray
    cost: np.ndarray
    a_ub: np.ndarray
    b_ub: np.ndarray
    ub: np.ndarray
    d: int
    need_s: int

    @classmethod
    def build(
        cls, pricer: SlotPricer, d: int, need_s: int, w_ub: np.ndarray, s_ub: np.ndarray
    ) -> _Ext:
        n = pricer.needs
        servers = np.flatnonzero((w_ub > 0) | (s_ub > 0))
        k = len(servers)
        used = np.flatnonzero((n.alpha + n.beta) > 0)
        rows: list[np.ndarray] = []
        rhs: list[float] = []
        for j, h in enumerate(servers):  # per-server, per-resource packing rows
            for r in used:
                row = np.zeros(2 * k)
                row[j], row[k + j] = n.alpha[r], n.beta[r]
                rows.append(row)
                rhs.append(float(pricer.free[h, r]))
        batch = np.zeros(2 * k)
        batch[:k] = 1.0
        rows += [batch, -batch]  # sum w <= F, sum w >= D
        rhs += [float(n.cap), -float(d)]
        cover_s = np.zeros(2 * k)
        cover_s[k:] = -1.0
        rows.append(cover_s)  # sum s >= ceil(D / gamma) (A6)
        rhs.append(-float(need_s))
        cost = np.concatenate([pricer._w_cost[servers], pricer._s_cost[servers]])
        ub = np.concatenate([w_ub[servers], s_ub[servers]]).astype(float)
        return cls(servers, cost, np.array(rows), np.array(rhs), ub, d, need_s)

    def feasible(self, x: np.ndarray) -> np.ndarray:
        """Rows of ``x`` (draws x variables) that satisfy every constraint."""
        return np.all(x @ self.a_ub.T <= self.b_ub + 1e-6, axis=1)

    def choice(self, pricer: SlotPricer, x: np.ndarray) -> SlotChoice:
        k = len(self.servers)
        xi = np.rint(x).astype(np.int64)
        workers = {int(self.servers[j]): int(xi[j]) for j in range(k) if xi[j] > 0}
        ps = {int(self.servers[j]): int(xi[k + j]) for j in range(k) if xi[k + j] > 0}
        hosts = set(workers) | set(ps)
        return SlotChoice(pricer.cost_of(workers, ps), workers, ps, len(hosts) == 1)

    def solve_rounded(self, pricer: SlotPricer) -> SlotChoice | None:
        bounds = list(zip(np.zeros_like(self.ub), self.ub, strict=True))
        lp = solve_lp(self.cost, self.a_ub, self.b_ub, bounds=bounds)
        if not lp.status.has_solution or lp.x is None:
            return None
        target = np.clip(np.asarray(lp.x), 0.0, None) * pricer.rounding.gain
        base = np.floor(target + _EPS)
        frac = np.clip(target - base, 0.0, 1.0)
        frac[frac < _EPS] = 0.0
        rounding = pricer.rounding
        found: list[np.ndarray] = []
        drawn = 0
        while drawn < rounding.max_attempts and len(found) < rounding.rounds:
            size = min(_BATCH, rounding.max_attempts - drawn)
            draws = base + (pricer.rng.random((size, len(target))) < frac)
            drawn += size
            ok = draws[self.feasible(draws)]
            found.extend(ok[: rounding.rounds - len(found)])
        if not found:
            return None
        best = min(found, key=lambda x: float(self.cost @ x))
        return self.choice(pricer, best)

    def solve_exact(self, pricer: SlotPricer) -> SlotChoice | None:
        bounds = list(zip(np.zeros_like(self.ub), self.ub, strict=True))
        res = solve_milp(
            self.cost,
            self.a_ub,
            self.b_ub,
            integrality=np.ones(len(self.cost)),
            bounds=bounds,
            time_limit_s=pricer.rounding.time_limit_s,
        )
        if not res.status.has_solution or res.x is None:
            return None
        return self.choice(pricer, np.asarray(res.x))
