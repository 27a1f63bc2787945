"""Thin wrappers around scipy's HiGHS LP and MILP solvers, shared by the policies.

Why a wrapper: policies (Dorm, the offline optima, GADGET's per-slot program, ...) solve
LPs and MILPs inside the slot loop, where "no solution" is an ordinary outcome, not an
error. So these functions

* never raise on an infeasible, unbounded or time-limited problem: the outcome is a
  :class:`SolveStatus` in a small frozen :class:`SolveResult` (bad *input*, such as
  mismatched shapes, still raises ``ValueError``);
* always bound a MILP by a wall-clock ``time_limit_s`` (required, > 0), so that one hard
  instance cannot stall a simulation; a MILP stopped by the limit with an incumbent is
  reported as feasible-but-not-proven-optimal (:attr:`SolveStatus.TIME_LIMIT`);
* take ``maximize=True`` and report the objective in the caller's sense;
* keep HiGHS's own prints off standard output (:mod:`~mlsched.scheduler.solvers.quiet`).

A MILP given a feasible ``start`` is solved by HiGHS's own Python interface (highspy):
scipy's ``milp`` takes no starting point, and on Dorm's packing programs HiGHS spends most
of a cold solve in its heuristics looking for a first incumbent (1-3 s), against 0.1-0.3 s
from a start. Programs without a start keep scipy's solver, so their results do not move.

scipy's status codes (``linprog`` and ``milp`` agree): 0 optimal, 1 iteration/time
limit, 2 infeasible, 3 unbounded, 4 other (numerical trouble; for ``milp`` also "infeasible
or unbounded"). scipy (1.17) reports HiGHS stopping at ``node_limit`` as 4, "not recognized",
with the incumbent attached: :func:`solve_milp` reads it as the limit it is.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np

if TYPE_CHECKING:  # scipy.optimize takes a third of a second to import: on first solve
    from scipy.optimize import Bounds
    from scipy.sparse import csc_matrix

from mlsched.scheduler.solvers.memo import active_memo, canonical
from mlsched.scheduler.solvers.quiet import silenced, stdout_to_stderr

__all__ = ["SolveResult", "SolveStatus", "solve_lp", "solve_milp"]

log = logging.getLogger(__name__)

#: A bound pair per variable (None = unbounded), one pair for all, or scipy ``Bounds``.
BoundsLike: TypeAlias = "Sequence[tuple[float | None, float | None]] | tuple[float | None, float | None] | Bounds | None"


class SolveStatus(str, Enum):
    """What became of a solve."""

    OPTIMAL = "optimal"
    TIME_LIMIT = "time_limit"  # stopped by a limit with a feasible point, not proven optimal
    INFEASIBLE = "infeasible"
    UNBOUNDED = "unbounded"
    FAILED = "failed"  # a limit with no feasible point, numerical trouble, or other

    @property
    def has_solution(self) -> bool:
        return self in (SolveStatus.OPTIMAL, SolveStatus.TIME_LIMIT)


@dataclass(frozen=True)
class SolveResult:
    """A solve's outcome. ``x`` and ``objective`` are set exactly when there is a feasible
    point; ``objective`` is in the caller's sense (maximised when ``maximize=True``).
    ``dual_bound`` and ``mip_gap`` are HiGHS' MILP bound and relative gap, when known;
    ``duals_ub`` an LP's dual values of its ``A_ub`` rows in the caller's sense (the
    objective's rate of change per unit of each ``b_ub``: >= 0 when maximising)."""

    status: SolveStatus
    x: np.ndarray | None
    objective: float | None
    message: str
    dual_bound: float | None = None
    mip_gap: float | None = None
    duals_ub: np.ndarray | None = None

    @property
    def ok(self) -> bool:
        """True when there is a feasible solution (optimal or time-limited)."""
        return self.status.has_solution and self.x is not None

    @property
    def is_optimal(self) -> bool:
        return self.status is SolveStatus.OPTIMAL


def _status(code: int, has_x: bool) -> SolveStatus:
    if code == 0:
        return SolveStatus.OPTIMAL if has_x else SolveStatus.FAILED
    if code == 1:
        return SolveStatus.TIME_LIMIT if has_x else SolveStatus.FAILED
    if code == 2:
        return SolveStatus.INFEASIBLE
    if code == 3:
        return SolveStatus.UNBOUNDED
    return SolveStatus.FAILED


def _cost(c: Any, maximize: bool) -> np.ndarray:
    vec = np.asarray(c, dtype=float)
    if vec.ndim != 1 or not len(vec):
        raise ValueError(f"c must be a non-empty 1-D vector of costs, got shape {vec.shape}")
    if not np.all(np.isfinite(vec)):
        raise ValueError("c must hold finite numbers")
    return -vec if maximize else vec


def _time_limit(value: Any, *, required: bool) -> float | None:
    if value is None and not required:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(f"time_limit_s must be a finite number of seconds > 0, got {value!r}")
    return float(value)


# HiGHS' model status kSolutionLimit, which its MILP solver reports when the node limit
# stops it: scipy does not map it (status 4, "not recognized") but hands over the incumbent.
_HIGHS_SOLUTION_LIMIT = "(HiGHS Status 16:"


def _result(res: Any, maximize: bool, what: str) -> SolveResult:
    x = None if res.x is None else np.asarray(res.x, dtype=float)
    code = int(res.status)
    if code == 4 and _HIGHS_SOLUTION_LIMIT in str(res.message):
        code = 1  # a limit, like the clock's: the incumbent (if any) is a feasible point
    status = _status(code, x is not None)
    objective = None
    if status.has_solution and res.fun is not None:
        objective = -float(res.fun) if maximize else float(res.fun)
    else:
        x = None
    mip = what == "milp"  # linprog's result carries MIP fields too, meaningless for an LP
    bound = getattr(res, "mip_dual_bound", None) if mip else None
    if bound is not None and math.isfinite(bound) and maximize:
        bound = -float(bound)
    gap = getattr(res, "mip_gap", None) if mip else None
    duals = None
    ineq = None if mip or x is None else getattr(res, "ineqlin", None)
    if ineq is not None and getattr(ineq, "marginals", None) is not None:
        marginals = np.asarray(ineq.marginals, dtype=float)
        duals = -marginals if maximize else marginals
    out = SolveResult(
        status,
        x,
        objective,
        str(res.message),
        dual_bound=None if bound is None else float(bound),
        mip_gap=None if gap is None else float(gap),
        duals_ub=duals,
    )
    log.debug("[solvers] %s: %s objective=%s (%s)", what, status.value, objective, res.message)
    return out


def solve_lp(
    c: Any,
    A_ub: Any = None,
    b_ub: Any = None,
    A_eq: Any = None,
    b_eq: Any = None,
    bounds: BoundsLike = None,
    *,
    maximize: bool = False,
    time_limit_s: float | None = None,
) -> SolveResult:
    """Minimise (or maximise) ``c @ x`` s.t. ``A_ub x <= b_ub``, ``A_eq x = b_eq`` and
    ``bounds`` (default: every ``x >= 0``) with HiGHS; an optional wall-clock limit."""
    cost = _cost(c, maximize)
    limit = _time_limit(time_limit_s, required=False)
    options = {} if limit is None else {"time_limit": limit}
    from scipy.optimize import Bounds, linprog

    if isinstance(bounds, Bounds):
        bounds = list(
            zip(
                np.broadcast_to(bounds.lb, cost.shape),
                np.broadcast_to(bounds.ub, cost.shape),
                strict=True,
            )
        )
    with stdout_to_stderr():
        res = linprog(
            cost,
            A_ub=A_ub,
            b_ub=b_ub,
            A_eq=A_eq,
            b_eq=b_eq,
            bounds=(0, None) if bounds is None else bounds,
            method="highs",
            options=options,
        )
    return _result(res, maximize, "lp")


def _to_bounds(bounds: BoundsLike, n: int) -> Bounds:
    from scipy.optimize import Bounds

    if bounds is None:
        return Bounds(np.zeros(n), np.full(n, np.inf))
    if isinstance(bounds, Bounds):
        return bounds
    items: list[Any] = list(bounds)
    pairs = (
        [tuple(items)] * n
        if len(items) == 2 and not isinstance(items[0], (tuple, list))
        else [tuple(p) for p in items]
    )
    if len(pairs) != n or any(len(p) != 2 for p in pairs):
        raise ValueError(f"bounds: expected {n} (low, high) pairs, got {bounds!r}")
    lb = np.array([-np.inf if lo is None else float(lo) for lo, _ in pairs])
    ub = np.array([np.inf if hi is None else float(hi) for _, hi in pairs])
    return Bounds(lb, ub)


def solve_milp(
    c: Any,
    A_ub: Any = None,
    b_ub: Any = None,
    A_eq: Any = None,
    b_eq: Any = None,
    integrality: Any = None,
    bounds: BoundsLike = None,
    *,
    time_limit_s: float,
    mip_rel_gap: float | None = None,
    node_limit: int | None = None,
    maximize: bool = False,
    start: Any = None,
) -> SolveResult:
    """Minimise (or maximise) ``c @ x`` over the same constraints as :func:`solve_lp`, with
    ``integrality[i]`` = 1 for an integer ``x[i]`` and 0 for a continuous one (default: all
    integer), under a required wall-clock ``time_limit_s`` and an optional ``mip_rel_gap``.
    ``node_limit`` bounds the branch-and-bound nodes: unlike the clock, it stops the solver
    at the same point on any machine, so a policy that hits it stays reproducible.
    ``start``, a feasible point (checked here: an infeasible one raises ``ValueError``),
    is handed to HiGHS as its first incumbent; see the module's note."""
    cost = _cost(c, maximize)
    limit = _time_limit(time_limit_s, required=True)
    n = len(cost)
    options: dict[str, Any] = {"time_limit": limit}
    if mip_rel_gap is not None:
        if (
            isinstance(mip_rel_gap, bool)
            or not isinstance(mip_rel_gap, (int, float))
            or not 0 <= mip_rel_gap < math.inf
        ):
            raise ValueError(f"mip_rel_gap must be a number >= 0, got {mip_rel_gap!r}")
        options["mip_rel_gap"] = float(mip_rel_gap)
    if node_limit is not None:
        if isinstance(node_limit, bool) or not isinstance(node_limit, int) or node_limit < 1:
            raise ValueError(f"node_limit must be an integer >= 1, got {node_limit!r}")
        options["node_limit"] = node_limit
    kinds = np.ones(n) if integrality is None else np.asarray(integrality, dtype=float)
    if kinds.shape != (n,):
        raise ValueError(f"integrality: expected {n} entries, got shape {kinds.shape}")
    box = _to_bounds(bounds, n)
    A, row_lo, row_hi = _rows(A_ub, b_ub, A_eq, b_eq, n)

    def run() -> SolveResult:
        if start is not None:
            return _milp_from_start(cost, A, row_lo, row_hi, kinds, box, options, start, maximize)
        return _milp(cost, A, row_lo, row_hi, kinds, box, options, maximize)

    memo = active_memo()
    if memo is None:
        return run()
    program = canonical(cost, A, row_lo, row_hi, box.lb, box.ub, kinds, options, start)
    return _from_answer(memo.solve(program, lambda: _to_answer(run(), cost)))


def _to_answer(res: SolveResult, cost: np.ndarray) -> dict[str, Any]:
    """A result as a memo row (``objective_min``: the solver's-sense cost of ``x``)."""
    return {
        "status": res.status.value,
        "x": res.x,
        "objective": res.objective,
        "objective_min": None if res.x is None else float(cost @ res.x),
        "message": res.message,
        "dual_bound": res.dual_bound,
        "mip_gap": res.mip_gap,
    }


def _from_answer(answer: dict[str, Any]) -> SolveResult:
    x = answer["x"]
    return SolveResult(
        SolveStatus(answer["status"]),
        None if x is None else np.asarray(x, dtype=float),
        answer["objective"],
        answer["message"],
        dual_bound=answer["dual_bound"],
        mip_gap=answer["mip_gap"],
    )


def _milp(
    cost: np.ndarray,
    A: csc_matrix,
    row_lo: np.ndarray,
    row_hi: np.ndarray,
    kinds: np.ndarray,
    bounds: Bounds,
    options: dict[str, Any],
    maximize: bool,
) -> SolveResult:
    """:func:`solve_milp` through scipy, without a start (rows as :func:`_rows` makes them)."""
    from scipy.optimize import LinearConstraint, milp

    with stdout_to_stderr():
        res = milp(
            cost,
            integrality=kinds,
            bounds=bounds,
            constraints=LinearConstraint(A, row_lo, row_hi) if A.shape[0] else None,
            options=options,
        )
    return _result(res, maximize, "milp")


def _rows(
    A_ub: Any, b_ub: Any, A_eq: Any, b_eq: Any, n: int
) -> tuple[csc_matrix, np.ndarray, np.ndarray]:
    """The rows of both kinds as one matrix with ``row_lo <= A x <= row_hi``."""
    from scipy.sparse import csc_matrix, vstack

    blocks, lower, upper = [], [], []
    for A, b, name, is_ub in ((A_ub, b_ub, "ub", True), (A_eq, b_eq, "eq", False)):
        if A is None and b is None:
            continue
        if A is None or b is None:
            raise ValueError(f"A_{name} and b_{name} go together")
        rhs = np.atleast_1d(np.asarray(b, dtype=float))
        blocks.append(csc_matrix(A, dtype=float))
        lower.append(np.full(rhs.shape, -np.inf) if is_ub else rhs)
        upper.append(rhs)
    A = csc_matrix(vstack(blocks), dtype=float) if blocks else csc_matrix((0, n))
    row_lo = np.concatenate(lower) if lower else np.zeros(0)
    row_hi = np.concatenate(upper) if upper else np.zeros(0)
    return A, row_lo, row_hi


# HiGHS's model statuses, read as scipy's codes (see _status).
_FROM_HIGHS = {
    "kOptimal": 0,
    "kTimeLimit": 1,
    "kIterationLimit": 1,
    "kSolutionLimit": 1,  # the node limit
    "kInfeasible": 2,
    "kUnbounded": 3,
}


def _milp_from_start(
    cost: np.ndarray,
    A: csc_matrix,
    row_lo: np.ndarray,
    row_hi: np.ndarray,
    kinds: np.ndarray,
    bounds: Bounds,
    options: dict[str, Any],
    start: Any,
    maximize: bool,
) -> SolveResult:
    """:func:`solve_milp` through highspy, from the feasible point ``start``."""
    n = len(cost)
    x0 = np.asarray(start, dtype=float)
    if x0.shape != (n,) or not np.all(np.isfinite(x0)):
        raise ValueError(f"start: expected {n} finite values, got shape {x0.shape}")
    lb = np.broadcast_to(np.asarray(bounds.lb, dtype=float), (n,))
    ub = np.broadcast_to(np.asarray(bounds.ub, dtype=float), (n,))
    activity = A @ x0
    tol = 1e-6
    whole = kinds == 0
    if (
        np.any(x0 < lb - tol)
        or np.any(x0 > ub + tol)
        or np.any(activity < row_lo - tol)
        or np.any(activity > row_hi + tol)
        or not np.all(whole | (np.abs(x0 - np.round(x0)) <= tol))
    ):
        raise ValueError("start is not a feasible point of the program")
    import highspy

    with silenced():
        h = highspy.Highs()  # its banner goes nowhere
    h.setOptionValue("output_flag", False)
    for key, value in options.items():
        h.setOptionValue("mip_max_nodes" if key == "node_limit" else key, value)
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = n, A.shape[0]
    lp.col_cost_ = cost
    lp.col_lower_, lp.col_upper_ = np.array(lb), np.array(ub)
    lp.row_lower_, lp.row_upper_ = row_lo, row_hi
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = A.indptr
    lp.a_matrix_.index_ = A.indices
    lp.a_matrix_.value_ = A.data
    integer, continuous = highspy.HighsVarType.kInteger, highspy.HighsVarType.kContinuous
    lp.integrality_ = [continuous if k == 0 else integer for k in kinds.tolist()]
    h.passModel(lp)
    first = highspy.HighsSolution()
    first.col_value = np.where(whole, x0, np.round(x0)).tolist()
    first.value_valid = True
    h.setSolution(first)
    with stdout_to_stderr():
        h.run()
    model_status = h.getModelStatus()
    name = str(model_status).rsplit(".", 1)[-1]
    info = h.getInfo()
    feasible = info.primal_solution_status == 2  # kSolutionStatusFeasible
    x = np.asarray(h.getSolution().col_value, dtype=float) if feasible else None
    status = _status(_FROM_HIGHS.get(name, 4), x is not None)
    objective = None
    if status.has_solution and x is not None:
        objective = float(info.objective_function_value)
        objective = -objective if maximize else objective
    else:
        x = None
    bound = float(info.mip_dual_bound)
    if math.isfinite(bound) and maximize:
        bound = -bound
    message = h.modelStatusToString(model_status)
    log.debug("[solvers] milp from a start: %s objective=%s (%s)", status.value, objective, message)
    return SolveResult(
        status,
        x,
        objective,
        message,
        dual_bound=bound if math.isfinite(bound) else None,
        mip_gap=float(info.mip_gap),
    )
