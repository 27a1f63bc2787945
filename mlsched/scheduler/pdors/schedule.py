"""Alg. 2 and 3: the best schedule of one job over completion slots (spec 000 §3.3-§3.4).

The work V is cut into ``levels`` equal parts (A11: the paper's unit samples are up to 1e8
states; ``levels = V`` recovers it). A forward DP over the slots from the arrival keeps, for
every number of levels done, the least priced cost of doing them by that slot:

    Theta[i][k] = min_j theta_i(j q) + Theta[i-1][k-j],   Theta[-1][0] = 0, else inf

and ``Theta_end[i]`` = the least cost of finishing all the work with a non-empty slot i
(A13: the completion slot is the last slot with work). The payoff of completing in slot i is
``u(i) - Theta_end[i]``; the best schedule has the largest payoff (ties: the earliest). One
forward pass serves every completion slot (the paper restarts Alg. 3 per slot; with theta
memoised this is the same, A12), and the search stops once ``u(i)`` cannot beat the best
payoff found, since utility is non-increasing and costs are >= 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mlsched.scheduler.pdors.needs import PdorsNeeds
from mlsched.scheduler.pdors.slot import SlotChoice, SlotPricer

__all__ = ["DEFAULT_LEVELS", "Schedule", "Search", "best_schedule"]

#: Workload levels of the DP (spec A11's default).
DEFAULT_LEVELS = 100
#: Relative cost difference below which two DP choices tie.
_TIE = 1e-9


@dataclass(frozen=True)
class Schedule:
    """A job's schedule from its first planned slot: one choice per slot (None: idle)."""

    completion: int  # index of the last slot with work, from the first slot
    utility: float
    cost: float
    slots: tuple[SlotChoice | None, ...]

    @property
    def payoff(self) -> float:
        return self.utility - self.cost


@dataclass(frozen=True)
class Search:
    """The outcome of :func:`best_schedule`: the best schedule with a payoff > 0, if any,
    the best payoff seen (-inf: no feasible completion), slots examined, and whether the
    whole window was examined (else the search stopped where utility could not pay)."""

    best: Schedule | None
    best_payoff: float
    examined: int
    exhausted: bool


def best_schedule(
    needs: PdorsNeeds,
    pricer_at: Callable[[int], SlotPricer],
    utility: Callable[[int], float],
    span: int,
    levels: int = DEFAULT_LEVELS,
) -> Search:
    """The best schedule over slots ``0..span-1`` from the first planned slot."""
    if levels < 1:
        raise ValueError(f"levels must be >= 1, got {levels!r}")
    work = needs.work
    if work <= 0 or span <= 0:
        return Search(None, -math.inf, 0, True)
    q_levels = levels
    step = work / q_levels
    fastest = max(needs.rate_int, needs.rate_ext) * needs.cap
    k_max = min(q_levels, math.floor(fastest / step + 1e-9))
    if k_max < 1 or needs.min_duration > span:
        return Search(None, -math.inf, 0, True)

    prev = np.full(q_levels + 1, math.inf)
    prev[0] = 0.0
    args: list[np.ndarray] = []
    best_payoff = -math.inf
    best_end: tuple[int, int] | None = None  # (slot, levels in that slot)
    examined = 0
    exhausted = True
    for i in range(span):
        u = utility(i)
        if u <= max(best_payoff, 0.0):
            exhausted = False
            break
        examined += 1
        theta = pricer_at(i).thetas(step, k_max)
        cur = np.full(q_levels + 1, math.inf)
        arg = np.zeros(q_levels + 1, dtype=np.int64)
        for j in range(k_max + 1):
            if not math.isfinite(theta[j]):
                continue
            cand = theta[j] + prev[: q_levels + 1 - j]
            # Ties go to the larger j: the same workers doing more work (theta depends on
            # v only through D), and equal counts in adjacent slots, fewer restarts. Sums
            # of the same thetas in another order differ in the last bits: a tie is within
            # _TIE of the best.
            better = cand <= cur[j:] * (1.0 + _TIE)
            cur[j:][better] = cand[better]
            arg[j:][better] = j
        # Finishing in slot i with j >= 1 levels in it (A13).
        ends = theta[1:] + prev[q_levels - np.arange(1, k_max + 1)]
        if ends.size and np.isfinite(ends).any():
            # The fewest levels in the last slot among ties: a remainder at the end, where
            # committed plans keep the previous placement (no restart).
            j_end = int(np.flatnonzero(ends <= float(ends.min()) * (1.0 + _TIE))[0]) + 1
            payoff = u - float(ends[j_end - 1])
            if payoff > best_payoff:
                best_payoff, best_end = payoff, (i, j_end)
        args.append(arg)
        prev = cur
    if best_end is None or best_payoff <= 0:
        return Search(None, best_payoff, examined, exhausted)
    return Search(
        _backtrack(best_end, args, pricer_at, step, q_levels, utility),
        best_payoff,
        examined,
        exhausted,
    )


def _backtrack(
    end: tuple[int, int],
    args: list[np.ndarray],
    pricer_at: Callable[[int], SlotPricer],
    step: float,
    q_levels: int,
    utility: Callable[[int], float],
) -> Schedule:
    last, j_end = end
    per_slot = [0] * (last + 1)
    per_slot[last] = j_end
    k = q_levels - j_end
    for i in range(last - 1, -1, -1):
        j = int(args[i][k])
        per_slot[i] = j
        k -= j
    if k != 0:  # the DP only links finite states
        raise RuntimeError(f"backtracking left {k} levels undone")
    slots: list[SlotChoice | None] = []
    cost = 0.0
    for i, j in enumerate(per_slot):
        if j == 0:
            slots.append(None)
            continue
        choice = pricer_at(i).theta(j * step)  # memoised: the choice the DP priced
        if choice is None:
            raise RuntimeError(f"slot {i}: {j} levels were priced but have no choice")
        slots.append(choice)
        cost += choice.cost
    return Schedule(last, utility(last), cost, tuple(slots))
