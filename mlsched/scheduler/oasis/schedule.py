"""Alg. 2: the best schedule of one job over completion slots (spec 001 §3.3).

With the completion slot fixed, the slots are coupled only by the workload, so a dynamic
program over the slots from the arrival slot on finds the cheapest way to do all the work
by slot t for every t at once; the payoff of completing in t is ``f(t - a) - C(t, all)``
and the best schedule is the one with the largest payoff, if it is > 0 (ties: earliest t).

Two exact dynamic programs over the same per-slot costs (``costs[Y]`` = COST_t of ``Y``
workers, :func:`mlsched.scheduler.oasis.placement.slot_costs`):

* :class:`ReferenceDP` (DP-A, the paper's): the state is the number of data chunks done;
  a slot doing ``d`` chunks runs ``max(y_min, ceil(d rho))`` workers. ``O(T (E N)^2)``.
  ``group`` G > 1 coarsens the chunk unit to G chunks (spec A10's knob; no longer exact).
* :class:`FastDP` (DP-B, the spec's recommendation): the state is the number of
  worker-slots done, capped at the job's ``Work``; a slot's transition is its worker
  count. ``O(T Work N)``. Every DP-A schedule is a DP-B schedule, so DP-B never costs more,
  and it costs the same when a worker-slot is a whole number of chunks (``1 / rho``
  integral), where both are the same problem (A9).

Both are filled forward one slot at a time (:meth:`step`), which lets
:func:`best_schedule` stop as soon as no later completion can beat the best payoff found
(utility is non-increasing and costs are >= 0): exact, and it makes time-critical jobs cheap.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from mlsched.scheduler.oasis.needs import JobNeeds

__all__ = ["DP_VARIANTS", "FastDP", "ReferenceDP", "Schedule", "Search", "best_schedule"]

#: Option values: ``fast`` = DP-B, ``reference`` = DP-A.
DP_VARIANTS = ("fast", "reference")

_GATHER_CELLS = 1 << 20  # (moves x states) cells evaluated at once


class SlotDP(Protocol):
    def step(self, costs: np.ndarray) -> float:
        """Add the next slot; return the least cost of all the work by that slot."""

    def split(self, last: int) -> list[int]:
        """Workers per slot (from the first) of the least-cost schedule ending at ``last``."""


def _gather_min(
    prev: np.ndarray, moves: np.ndarray, move_cost: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """For states s < n: min over moves m of prev[s - m] + move_cost[m] (s - m >= 0)
    and the index of the arg-min move (first on ties)."""
    ext = np.concatenate(([np.inf], prev))
    states = np.arange(n)
    best = np.full(n, np.inf)
    arg = np.zeros(n, dtype=np.int64)
    block = max(1, _GATHER_CELLS // max(1, n))  # moves per block: bounded memory
    for lo in range(0, len(moves), block):
        src = states[None, :] - moves[lo : lo + block, None]
        src = np.where(src >= 0, src + 1, 0)
        cand = ext[src] + move_cost[lo : lo + block, None]
        at = np.argmin(cand, axis=0)
        val = cand[at, states]
        better = val < best  # strict: earlier blocks (smaller moves) win ties
        best[better] = val[better]
        arg[better] = at[better] + lo
    return best, arg


class FastDP:
    """DP-B: cumulative worker-slots, capped at ``needs.work`` (see the module docstring)."""

    def __init__(self, needs: JobNeeds) -> None:
        self.work = needs.work
        self._allowed = needs.workers_allowed()
        self._prev = np.full(self.work + 1, np.inf)
        self._prev[0] = 0.0
        self._choice: list[np.ndarray] = []  # per slot: workers chosen per state
        self._dtype = np.min_scalar_type(needs.y_max)
        self._cap_from: list[int] = []

    def step(self, costs: np.ndarray) -> float:
        w = self.work
        prev = self._prev
        new = prev.copy()  # Y = 0 costs nothing
        choice = np.zeros(w + 1, dtype=self._dtype)
        cap_from = w
        ys = self._allowed[np.isfinite(costs[self._allowed])]
        if ys.size:
            c = costs[ys]
            val, arg = _gather_min(prev[:w], ys, c, w)
            better = val < new[:w]
            new[:w][better] = val[better]
            choice[:w][better] = ys[arg[better]]
            suffix = np.minimum.accumulate(prev[::-1])[::-1]
            starts = np.maximum(w - ys, 0)
            into_cap = suffix[starts] + c
            j = int(np.argmin(into_cap))
            if into_cap[j] < new[w]:
                new[w] = into_cap[j]
                choice[w] = ys[j]
                cap_from = int(starts[j] + np.argmin(prev[starts[j] :]))
        self._choice.append(choice)
        self._cap_from.append(cap_from)
        self._prev = new
        return float(new[w])

    def split(self, last: int) -> list[int]:
        state = self.work
        out = [0] * (last + 1)
        for i in range(last, -1, -1):
            y = int(self._choice[i][state])
            out[i] = y
            if state == self.work:
                state = self._cap_from[i] if y else state
            else:
                state -= y
        if state != 0:
            raise RuntimeError(f"DP-B backtrack ended in state {state}, not 0")
        return out


class ReferenceDP:
    """DP-A (the paper's Alg. 2): chunks done, in units of ``group`` chunks."""

    def __init__(self, needs: JobNeeds, group: int = 1) -> None:
        if group < 1:
            raise ValueError(f"group must be >= 1, got {group}")
        self.units = -(-needs.chunks // group)
        workers = [needs.workers_for_chunks(d * group) for d in range(self.units + 1)]
        ok = [
            d
            for d in range(1, self.units + 1)
            if workers[d] <= needs.y_max and needs.ps_for[workers[d]] >= 0
        ]
        self._moves = np.array(ok, dtype=np.int64)
        self._workers = np.array(workers, dtype=np.int64)
        self._prev = np.full(self.units + 1, np.inf)
        self._prev[0] = 0.0
        self._choice: list[np.ndarray] = []  # per slot: chunk units done per state
        self._dtype = np.min_scalar_type(self.units)

    def step(self, costs: np.ndarray) -> float:
        n = self.units + 1
        prev = self._prev
        new = prev.copy()  # d = 0 costs nothing
        choice = np.zeros(n, dtype=self._dtype)
        if self._moves.size:
            c = costs[self._workers[self._moves]]
            finite = np.isfinite(c)
            moves, c = self._moves[finite], c[finite]
            if moves.size:
                val, arg = _gather_min(prev, moves, c, n)
                better = val < new
                new[better] = val[better]
                choice[better] = moves[arg[better]]
        self._choice.append(choice)
        self._prev = new
        return float(new[self.units])

    def split(self, last: int) -> list[int]:
        state = self.units
        out = [0] * (last + 1)
        for i in range(last, -1, -1):
            d = int(self._choice[i][state])
            out[i] = int(self._workers[d])
            state -= d
        if state != 0:
            raise RuntimeError(f"DP-A backtrack ended in state {state}, not 0")
        return out


@dataclass(frozen=True)
class Schedule:
    """Workers per slot from the first planned slot; ``completion`` indexes the last slot
    with workers (the real completion, spec §3.3)."""

    workers: tuple[int, ...]
    completion: int
    cost: float
    utility: float

    @property
    def payoff(self) -> float:
        return self.utility - self.cost


@dataclass(frozen=True)
class Search:
    """What :func:`best_schedule` found: the schedule (None: reject), the best payoff seen
    over the completion slots examined (-inf if none was feasible), how many it examined,
    and whether that was all of them (if not, no later completion could pay)."""

    best: Schedule | None
    best_payoff: float
    examined: int
    exhausted: bool

    @property
    def feasible(self) -> bool:
        return self.best_payoff > -np.inf


def best_schedule(
    dp: SlotDP,
    costs: Callable[[int], np.ndarray],
    utility: Callable[[int], float],
    slots: int,
) -> Search:
    """Alg. 2 over completion slot indices i = 0..slots-1: payoff ``utility(i) - C(i)``; the
    best schedule if its payoff is > 0 (strictly; ties go to the earliest), else None.

    ``costs(i)`` gives slot i's COST_t row and ``utility(i)`` the job's utility when it
    completes in slot i, which must not increase with i (spec 001 §2.1); both are called
    only for the slots examined: the search stops once the utility is no more than the best
    payoff found (0 before any), since costs are >= 0 and no later slot can do better."""
    best_payoff = 0.0
    best_at = -1
    best_cost = 0.0
    best_utility = 0.0
    seen = -np.inf
    examined = 0
    for i in range(slots):
        value = float(utility(i))
        if value <= best_payoff:
            break
        cost = dp.step(costs(i))
        examined += 1
        payoff = value - cost
        seen = max(seen, payoff)
        if payoff > best_payoff:
            best_payoff, best_at, best_cost, best_utility = payoff, i, cost, value
    exhausted = examined == slots
    if best_at < 0:
        return Search(None, seen, examined, exhausted)
    workers = dp.split(best_at)
    last = max(i for i, y in enumerate(workers) if y > 0)
    schedule = Schedule(tuple(workers[: last + 1]), last, best_cost, best_utility)
    return Search(schedule, seen, examined, exhausted)
