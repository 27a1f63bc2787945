"""Alg. 4: theta(t, v), the cheapest way to do ``v`` work units in one slot (spec 000 §3.5).

Two cases by Fact 1, the cheaper wins:

* **internal**: D = ceil(v / rate_int) workers and ceil(D / gamma) PSs (at least one, A8)
  all on one server that hosts both; the cheapest such server (closed form);
* **external**: the integer program EXT(t, v) over worker and PS counts per server at the
  external rate: per-server capacity (packing), ``sum w <= F`` (packing), ``sum w >= D``
  (cover) and ``sum s >= ceil(D / gamma)`` (the cover row the paper lacks, A6). Its LP
  relaxation is solved over classes of interchangeable servers (same residual capacity,
  prices and task caps), which is exact for the LP; when every worker fits the cheapest
  worker class and every PS the cheapest PS class that placement is optimal and no solver
  runs, else HiGHS solves the class LP. Each class's amounts are split back onto its
  servers fill-first, then scaled by the gain factor G_delta and randomly rounded per
  server, up to ``max_attempts`` draws, keeping the cheapest of the first ``rounds``
  feasible ones (A9); none feasible makes this (t, v) infinite only (A14). ``exact``
  solves EXT server by server as a MILP instead (the reference of the rounding-ratio
  comparison, A30).

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


#: What a rounded draw that breaks a cover row becomes (:class:`Rounding`).
COVER_RULES = ("redraw", "accept")


@dataclass(frozen=True)
class Rounding:
    """How the external case is solved: LP + randomised rounding (the paper) or exactly."""

    gain: float = 1.0  # G_delta
    rounds: int = 10  # S_rr: feasible draws to collect
    max_attempts: int = 5000
    exact: bool = False  # solve EXT as a MILP (reference for the rounding ratio)
    time_limit_s: float = 5.0  # per MILP, exact only
    #: A draw that breaks a cover row (fewer workers than D, or PSs than ceil(D / gamma)):
    #: ``redraw`` it (A14), or ``accept`` it when no draw covers, as the paper does in
    #: practice ("the violation of the cover constraint in one iteration may be
    #: acceptable", §6): the one doing the most work, at least one worker and one PS.
    cover: str = "redraw"

    def __post_init__(self) -> None:
        if not (self.gain > 0 and math.isfinite(self.gain)):
            raise ValueError(f"g_delta must be a finite number > 0, got {self.gain!r}")
        for name in ("rounds", "max_attempts"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if not (self.time_limit_s > 0 and math.isfinite(self.time_limit_s)):
            raise ValueError(f"time_limit_s must be a finite number > 0, got {self.time_limit_s!r}")
        if self.cover not in COVER_RULES:
            raise ValueError(f"cover must be one of {', '.join(COVER_RULES)}, got {self.cover!r}")


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
    _class_memo: dict[bool, _Classes] = field(default_factory=dict, repr=False)

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

    def _classes(self, aggregate: bool) -> _Classes:
        hit = self._class_memo.get(aggregate)
        if hit is None:
            hit = self._class_memo[aggregate] = _Classes.of(self, aggregate)
        return hit

    def _external(self, d: int) -> SlotChoice | None:
        n = self.needs
        if d > n.cap:
            return None
        need_s = n.ps_for(d)
        exact = self.rounding.exact
        classes = self._classes(aggregate=not exact)
        if not classes.can_host(d, need_s):
            return None
        if exact:
            return self._solve_exact(classes, d, need_s)
        amounts = self._lp_amounts(classes, d, need_s, shortcut=True)
        if amounts is None:
            return None
        servers, w, s = classes.split(*amounts, need_s)
        return self._round(servers, w, s, d, need_s)

    def external_lp(
        self, d: int, *, aggregate: bool = True
    ) -> tuple[float, np.ndarray, np.ndarray, np.ndarray] | None:
        """EXT's LP relaxation for ``d`` workers: its relative cost and the fractional
        workers and PSs per server (server indices, workers, PSs), None when infeasible.

        ``aggregate`` solves it over classes of interchangeable servers and splits each
        class's amounts back onto its servers fill-first (what the policy rounds); else the
        per-server LP is solved as written (the reference)."""
        n = self.needs
        if d < 1 or d > n.cap:
            return None
        need_s = n.ps_for(d)
        classes = self._classes(aggregate)
        if not classes.can_host(d, need_s):
            return None
        amounts = self._lp_amounts(classes, d, need_s, shortcut=aggregate)
        if amounts is None:
            return None
        servers, w, s = classes.split(*amounts, need_s)
        cost = float(self._w_cost[servers] @ w + self._s_cost[servers] @ s)
        return cost, servers, w, s

    def _lp_amounts(
        self, classes: _Classes, d: int, need_s: int, *, shortcut: bool
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """Workers and PSs per class at an optimum of the LP relaxation. ``shortcut``: when
        every worker fits the cheapest worker class and every PS the cheapest PS class,
        that placement meets the LP's lower bound, so it is optimal without a solve."""
        if shortcut:
            placed = classes.floor_placement(d, need_s)
            if placed is not None:
                return placed
        cost, a_ub, b_ub, ub = classes.program(self.needs.cap, d, need_s)
        bounds = list(zip(np.zeros_like(ub), ub, strict=True))
        lp = solve_lp(cost, a_ub, b_ub, bounds=bounds)
        if not lp.status.has_solution or lp.x is None:
            return None
        x = np.clip(np.asarray(lp.x), 0.0, None)
        c = len(classes.members)
        return x[:c], x[c:]

    def _round(
        self, servers: np.ndarray, w: np.ndarray, s: np.ndarray, d: int, need_s: int
    ) -> SlotChoice | None:
        """Randomised rounding per server of the LP's split amounts (Alg. 4): up to
        ``max_attempts`` draws, the cheapest of the first ``rounds`` feasible ones."""
        rounding = self.rounding
        k = len(servers)
        target = np.concatenate([w, s]) * rounding.gain
        base = np.floor(target + _EPS)
        frac = np.clip(target - base, 0.0, 1.0)
        frac[frac < _EPS] = 0.0
        check = _Feasibility(self, servers, d, need_s, cover=rounding.cover == "redraw")
        if not frac.any():  # an integral point: every draw is this one
            return self._choice(servers, base) if check(base[None])[0] else None
        cost = np.concatenate([self._w_cost[servers], self._s_cost[servers]])
        found: list[np.ndarray] = []
        drawn = 0
        while drawn < rounding.max_attempts and len(found) < rounding.rounds:
            size = min(_BATCH, rounding.max_attempts - drawn)
            draws = base + (self.rng.random((size, 2 * k)) < frac)
            drawn += size
            ok = draws[check(draws)]
            found.extend(ok[: rounding.rounds - len(found)])
        if not found:
            return None
        pool = np.asarray(found)
        covers = check.covers(pool)
        if covers.any():
            pool = pool[covers]
        else:  # only cover violations (``cover="accept"``): the most work, then the cheapest
            work = pool[:, :k].sum(axis=1)
            pool = pool[work == work.max()]
        best = pool[int(np.argmin(pool @ cost))]  # the first cheapest
        return self._choice(servers, best)

    def _choice(self, servers: np.ndarray, x: np.ndarray) -> SlotChoice:
        k = len(servers)
        xi = np.rint(x).astype(np.int64)
        workers = {int(servers[j]): int(xi[j]) for j in range(k) if xi[j] > 0}
        ps = {int(servers[j]): int(xi[k + j]) for j in range(k) if xi[k + j] > 0}
        hosts = set(workers) | set(ps)
        return SlotChoice(self.cost_of(workers, ps), workers, ps, len(hosts) == 1)

    def _solve_exact(self, classes: _Classes, d: int, need_s: int) -> SlotChoice | None:
        cost, a_ub, b_ub, ub = classes.program(self.needs.cap, d, need_s)
        bounds = list(zip(np.zeros_like(ub), ub, strict=True))
        res = solve_milp(
            cost,
            a_ub,
            b_ub,
            integrality=np.ones(len(cost)),
            bounds=bounds,
            time_limit_s=self.rounding.time_limit_s,
        )
        if not res.status.has_solution or res.x is None:
            return None
        return self._choice(classes.firsts, np.asarray(res.x))


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


@dataclass(frozen=True)
class _Classes:
    """The servers that can take one task of the job, in classes of interchangeable ones
    (same residual capacity in the job's resources, same prices of a worker and a PS, same
    task caps), ordered by their first server; one server per class without aggregation.

    EXT's LP relaxation over the classes, with a class's capacity and caps its size times
    one server's, is exact: a feasible per-server point sums to a feasible class point of
    the same cost, and a class point divided equally over the class's servers is feasible
    for each (a server's constraints are a convex set holding 0)."""

    members: tuple[np.ndarray, ...]  # server indices per class, ascending
    size: np.ndarray  # (classes,) servers per class
    free: np.ndarray  # (classes, used resources) one server's residual capacity
    w_cost: np.ndarray  # (classes,) relative price of a worker on one server
    s_cost: np.ndarray
    w_fit: np.ndarray  # (classes,) workers one server fits alone, at most F
    s_fit: np.ndarray  # PSs one server fits alone, at most ceil(F / gamma)
    alpha: np.ndarray  # per-task demand in the used resources
    beta: np.ndarray

    @classmethod
    def of(cls, pricer: SlotPricer, aggregate: bool) -> _Classes:
        n = pricer.needs
        used = np.flatnonzero((n.alpha + n.beta) > 0)
        w_fit = _task_caps(pricer.free, n.alpha, pricer.worker_servers, n.cap)
        s_fit = _task_caps(pricer.free, n.beta, pricer.ps_servers, n.ps_for(n.cap))
        servers = np.flatnonzero((w_fit > 0) | (s_fit > 0))
        free = pricer.free[np.ix_(servers, used)]
        w_cost, s_cost = pricer._w_cost[servers], pricer._s_cost[servers]
        w_fit, s_fit = w_fit[servers], s_fit[servers]
        if aggregate and len(servers) > 1:
            keys = np.column_stack([free, w_cost, s_cost, w_fit, s_fit])
            _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
            order = np.argsort(first)  # classes by their first server
            rank = np.empty_like(order)
            rank[order] = np.arange(len(order))
            label = rank[np.asarray(inverse).reshape(-1)]
            members = tuple(servers[label == c] for c in range(len(order)))
            pick = first[order]
        else:
            members = tuple(servers[j : j + 1] for j in range(len(servers)))
            pick = np.arange(len(servers))
        return cls(
            members,
            np.array([len(m) for m in members], dtype=float),
            free[pick],
            w_cost[pick],
            s_cost[pick],
            w_fit[pick].astype(float),
            s_fit[pick].astype(float),
            n.alpha[used],
            n.beta[used],
        )

    @property
    def firsts(self) -> np.ndarray:
        return np.array([m[0] for m in self.members], dtype=np.int64)

    def s_caps(self, need_s: int) -> np.ndarray:
        return np.minimum(self.s_fit, float(need_s))

    def can_host(self, d: int, need_s: int) -> bool:
        """Enough task room for ``d`` workers and ``need_s`` PSs, one task type at a time."""
        return bool(self.size @ self.w_fit >= d and self.size @ self.s_caps(need_s) >= need_s)

    def program(
        self, cap: int, d: int, need_s: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """EXT over x = (W_c..., S_c...): cost, A_ub, b_ub and the upper bounds. Rows: per
        class and used resource alpha W_c + beta S_c <= size * free, then sum W <= F,
        sum W >= D and sum S >= ceil(D / gamma) (A6)."""
        c, r = self.free.shape
        a_ub = np.zeros((c * r + 3, 2 * c))
        rows = np.arange(c * r).reshape(c, r)
        cols = np.arange(c)[:, None]
        a_ub[rows, cols] = self.alpha
        a_ub[rows, c + cols] = self.beta
        a_ub[c * r, :c] = 1.0
        a_ub[c * r + 1, :c] = -1.0
        a_ub[c * r + 2, c:] = -1.0
        b_ub = np.concatenate(
            [(self.size[:, None] * self.free).ravel(), [float(cap), -float(d), -float(need_s)]]
        )
        ub = np.concatenate([self.size * self.w_fit, self.size * self.s_caps(need_s)])
        return np.concatenate([self.w_cost, self.s_cost]), a_ub, b_ub, ub

    def floor_placement(self, d: int, need_s: int) -> tuple[np.ndarray, np.ndarray] | None:
        """Every worker in the first cheapest class that takes one, every PS likewise,
        when that fits (then it is an optimum of the LP relaxation); else None."""
        s_caps = self.s_caps(need_s)
        w_room, s_room = self.w_fit > 0, s_caps > 0
        if not w_room.any() or not s_room.any():
            return None
        cw = int(np.flatnonzero(w_room)[np.argmin(self.w_cost[w_room])])
        cs = int(np.flatnonzero(s_room)[np.argmin(self.s_cost[s_room])])
        w = np.zeros(len(self.members))
        s = np.zeros(len(self.members))
        w[cw], s[cs] = d, need_s
        for c in {cw, cs}:
            if w[c] > self.size[c] * self.w_fit[c] or s[c] > self.size[c] * s_caps[c]:
                return None
            load = self.alpha * w[c] + self.beta * s[c]
            if np.any(load > self.size[c] * self.free[c] + _EPS):
                return None
        return w, s

    def split(
        self, w: np.ndarray, s: np.ndarray, need_s: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each class's (W, S) onto its servers fill-first: k of its servers in index
        order, each taking an equal share (W/k, S/k). k is the fewest servers on which the
        share rounded up in both task types still fits one server (so no rounding of a
        share overflows its server), and never fewer than the fewest that hold the share
        itself; at most the class's size, so a share never exceeds a server's capacity or
        task caps. Returns server indices, workers and PSs per server."""
        s_caps = self.s_caps(need_s)
        servers: list[np.ndarray] = []
        shares_w: list[np.ndarray] = []
        shares_s: list[np.ndarray] = []
        for c, members in enumerate(self.members):
            wc = float(w[c]) if w[c] >= _EPS else 0.0
            sc = float(s[c]) if s[c] >= _EPS else 0.0
            if wc == 0.0 and sc == 0.0:
                continue
            least = max(1, math.ceil(self._servers_needed(c, wc, sc, s_caps[c])))
            k = self._rounding_safe(c, wc, sc, s_caps[c], min(least, len(members)))
            servers.append(members[:k])
            shares_w.append(np.full(k, wc / k))
            shares_s.append(np.full(k, sc / k))
        if not servers:
            empty = np.zeros(0)
            return np.zeros(0, dtype=np.int64), empty, empty
        return np.concatenate(servers), np.concatenate(shares_w), np.concatenate(shares_s)

    def _rounding_safe(self, c: int, wc: float, sc: float, s_cap: float, least: int) -> int:
        """The fewest servers k >= ``least`` of class ``c`` whose shares rounded up,
        (ceil(wc / k), ceil(sc / k)), fit one server; the class's size if none do."""
        ks = np.arange(least, len(self.members[c]) + 1, dtype=float)
        up_w = np.ceil(wc / ks - _EPS)
        up_s = np.ceil(sc / ks - _EPS)
        load = up_w[:, None] * self.alpha + up_s[:, None] * self.beta
        fits = (up_w <= self.w_fit[c]) & (up_s <= s_cap)
        fits &= np.all(load <= self.free[c] + _EPS, axis=1)
        hit = np.flatnonzero(fits)
        return int(ks[hit[0]]) if hit.size else len(self.members[c])

    def _servers_needed(self, c: int, wc: float, sc: float, s_cap: float) -> float:
        """How many servers' worth of class ``c`` the bundle (wc, sc) fills (fractional)."""
        parts = [0.0]
        for amount, room in ((wc, self.w_fit[c]), (sc, s_cap)):
            if amount > 0:
                parts.append(amount / room if room > 0 else math.inf)
        load = self.alpha * wc + self.beta * sc
        free = self.free[c]
        pos = free > 0
        if np.any(load[~pos] > _EPS):
            parts.append(math.inf)
        if pos.any():
            parts.append(float(np.max(load[pos] / free[pos])))
        need = max(parts)
        return need - 1e-9 if math.isfinite(need) else float(len(self.members[c]))


class _Feasibility:
    """Checks rounded draws per server: alpha w + beta s <= free for every used resource,
    then sum w <= F, and the cover rows sum w >= D and sum s >= ceil(D / gamma); with
    ``cover`` off, only at least one worker (and one PS where the job needs PSs)."""

    def __init__(
        self, pricer: SlotPricer, servers: np.ndarray, d: int, need_s: int, *, cover: bool = True
    ) -> None:
        n = pricer.needs
        used = np.flatnonzero((n.alpha + n.beta) > 0)
        self.k = len(servers)
        self.free = pricer.free[np.ix_(servers, used)] + 1e-6
        self.alpha = n.alpha[used]
        self.beta = n.beta[used]
        self.cap, self.d, self.need_s = n.cap, d, need_s
        self.cover = cover

    def covers(self, x: np.ndarray) -> np.ndarray:
        """Rows of ``x`` that meet both cover rows."""
        w, s = x[:, : self.k], x[:, self.k :]
        return (w.sum(axis=1) >= self.d - 1e-6) & (s.sum(axis=1) >= self.need_s - 1e-6)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """Rows of ``x`` (draws x (workers..., PSs...)) that satisfy every constraint."""
        w, s = x[:, : self.k], x[:, self.k :]
        total = w.sum(axis=1)
        ok = total <= self.cap + 1e-6
        if self.cover:
            ok &= self.covers(x)
        else:
            ok &= (total >= 1 - 1e-6) & (s.sum(axis=1) >= min(1, self.need_s) - 1e-6)
        rows = np.flatnonzero(ok)  # the packing rows only for draws that pass the rest
        if rows.size:
            load = w[rows, :, None] * self.alpha + s[rows, :, None] * self.beta
            ok[rows] = np.all(load <= self.free, axis=(1, 2))
        return ok
