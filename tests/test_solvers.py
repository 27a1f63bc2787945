"""The HiGHS helpers on problems with known answers, and their refusal of bad input."""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np
import pytest
from scipy.optimize import Bounds

from mlsched.scheduler.solvers import SolveResult, SolveStatus, solve_lp, solve_milp

# max x + 2y  s.t.  x + y <= 4,  x + 3y <= 6,  x, y >= 0:  optimum 5 at (3, 1).
LP_C = [1.0, 2.0]
LP_A = [[1.0, 1.0], [1.0, 3.0]]
LP_B = [4.0, 6.0]

# 0/1 knapsack: values 5, 4, 3; weights 2, 3, 1; capacity 5. Best: items 0 and 1 (value 9);
# the LP relaxation is worth 32/3 (items 0 and 2 whole, two thirds of item 1).
KS_VALUES = [5.0, 4.0, 3.0]
KS_WEIGHTS = [[2.0, 3.0, 1.0]]
KS_CAP = [5.0]


def test_lp_known_optimum_maximised_and_minimised() -> None:
    best = solve_lp(LP_C, LP_A, LP_B, maximize=True)
    assert best.status is SolveStatus.OPTIMAL and best.ok and best.is_optimal
    assert best.objective == pytest.approx(5.0)
    np.testing.assert_allclose(best.x, [3.0, 1.0], atol=1e-9)
    # The same problem as a minimisation of the negated costs reports -5.
    low = solve_lp([-c for c in LP_C], LP_A, LP_B)
    assert low.objective == pytest.approx(-5.0)
    assert low.mip_gap is None and low.dual_bound is None  # LP: no MIP fields


def test_lp_with_equalities_and_free_variables() -> None:
    # min x - y  s.t.  x + y = 2,  -5 <= x, y <= 5:  x = -3, y = 5, objective -8.
    res = solve_lp([1.0, -1.0], A_eq=[[1.0, 1.0]], b_eq=[2.0], bounds=[(-5, 5), (-5, 5)])
    assert res.status is SolveStatus.OPTIMAL
    assert res.objective == pytest.approx(-8.0)
    np.testing.assert_allclose(res.x, [-3.0, 5.0], atol=1e-9)


def test_milp_known_optimum_differs_from_its_relaxation() -> None:
    relaxed = solve_lp(KS_VALUES, KS_WEIGHTS, KS_CAP, bounds=(0, 1), maximize=True)
    assert relaxed.objective == pytest.approx(32 / 3)
    res = solve_milp(KS_VALUES, KS_WEIGHTS, KS_CAP, bounds=(0, 1), maximize=True, time_limit_s=10.0)
    assert res.status is SolveStatus.OPTIMAL
    assert res.objective == pytest.approx(9.0)
    np.testing.assert_allclose(res.x, [1.0, 1.0, 0.0], atol=1e-9)
    assert res.mip_gap == pytest.approx(0.0, abs=1e-9)
    assert res.dual_bound == pytest.approx(9.0)


def test_milp_mixed_integrality() -> None:
    # max x + y  s.t.  2x + 2y <= 5, x integer, y continuous:  x + y = 2.5.
    res = solve_milp(
        [1.0, 1.0],
        [[2.0, 2.0]],
        [5.0],
        integrality=[1, 0],
        maximize=True,
        time_limit_s=10.0,
        mip_rel_gap=0.0,
    )
    assert res.status is SolveStatus.OPTIMAL
    assert res.objective == pytest.approx(2.5)
    assert res.x is not None and float(res.x[0]).is_integer()
    # All-integer (the default) loses the half.
    whole = solve_milp([1.0, 1.0], [[2.0, 2.0]], [5.0], maximize=True, time_limit_s=10.0)
    assert whole.objective == pytest.approx(2.0)


def test_milp_accepts_scipy_bounds_and_equalities() -> None:
    res = solve_milp(
        [1.0, 1.0, 1.0],
        A_eq=[[1.0, 2.0, 4.0]],
        b_eq=[7.0],
        bounds=Bounds([0, 0, 0], [1, 1, 1]),
        time_limit_s=10.0,
    )
    assert res.status is SolveStatus.OPTIMAL
    np.testing.assert_allclose(res.x, [1.0, 1.0, 1.0], atol=1e-9)


@pytest.mark.parametrize("solver", ["lp", "milp"])
def test_infeasible_is_a_status_not_an_exception(solver: str) -> None:
    # x + y >= 3 with both in [0, 1].
    args = ([1.0, 1.0], [[-1.0, -1.0]], [-3.0])
    if solver == "lp":
        res = solve_lp(*args, bounds=[(0, 1), (0, 1)])
    else:
        res = solve_milp(*args, bounds=[(0, 1), (0, 1)], time_limit_s=5.0)
    assert res.status is SolveStatus.INFEASIBLE
    assert not res.ok and res.x is None and res.objective is None
    assert "infeasible" in res.message.lower()


def test_unbounded_lp_is_a_status() -> None:
    res = solve_lp([-1.0, 0.0], bounds=[(0, None), (0, 1)])
    assert res.status is SolveStatus.UNBOUNDED and res.x is None


def test_time_limited_milp_reports_what_it_has() -> None:
    # A 60-item knapsack with a limit far too short to prove optimality in general: the
    # answer is optimal, or feasible and flagged as time-limited, or failed, and a returned
    # point is always within the capacity.
    rng = np.random.default_rng(7)
    values = rng.integers(10, 100, 60).astype(float)
    weights = rng.integers(10, 100, (1, 60)).astype(float)
    cap = [float(weights.sum() / 3)]
    res = solve_milp(values, weights, cap, bounds=(0, 1), maximize=True, time_limit_s=1e-3)
    assert res.status in (SolveStatus.OPTIMAL, SolveStatus.TIME_LIMIT, SolveStatus.FAILED)
    if res.ok:
        assert res.x is not None and float((weights @ res.x)[0]) <= cap[0] + 1e-6
        assert res.status.has_solution
    else:
        assert res.x is None and res.objective is None


def test_a_node_limited_milp_keeps_its_incumbent_and_bound() -> None:
    """The node limit stops HiGHS at the same point on any machine (unlike the clock): a
    5-constraint, 60-item knapsack that one node cannot prove. scipy reports that stop as
    an unrecognised status with the incumbent attached; the wrapper must report the limit
    and keep the point (Dorm's node-limited solves fell back to DRF when it did not)."""
    rng = np.random.default_rng(0)
    weights = rng.integers(10, 100, (5, 60)).astype(float)
    values = weights.sum(0) / 5 + rng.integers(0, 20, 60)
    cap = weights.sum(1) // 2
    res = solve_milp(values, weights, cap, bounds=(0, 1), maximize=True, time_limit_s=60,
                     node_limit=1)  # fmt: skip
    assert res.status is SolveStatus.TIME_LIMIT, res.message
    assert res.x is not None and res.objective is not None
    assert np.all(weights @ res.x <= cap + 1e-6)
    assert np.allclose(res.x, np.round(res.x))
    assert res.dual_bound is not None and res.mip_gap is not None and res.mip_gap > 0
    assert res.objective < res.dual_bound  # not proven: the bound (of a maximum) is above
    # The bound lies between the incumbent and the LP relaxation's value: branch and bound
    # only tightens the relaxation (proving the optimum itself takes tens of seconds).
    relaxed = solve_lp(values, weights, cap, bounds=(0, 1), maximize=True)
    assert relaxed.objective is not None and res.dual_bound <= relaxed.objective + 1e-6


def test_milp_requires_a_time_limit() -> None:
    with pytest.raises(TypeError, match="time_limit_s"):
        solve_milp(KS_VALUES, KS_WEIGHTS, KS_CAP)  # type: ignore[call-arg]


@pytest.mark.parametrize("bad", [0, -1.0, math.nan, math.inf, None, "5", True])
def test_milp_refuses_an_invalid_time_limit(bad: object) -> None:
    with pytest.raises(ValueError, match="time_limit_s"):
        solve_milp(KS_VALUES, KS_WEIGHTS, KS_CAP, time_limit_s=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"mip_rel_gap": -0.1}, "mip_rel_gap"),
        ({"integrality": [1, 0]}, "integrality"),
        ({"bounds": [(0, 1), (0, 1)]}, "bounds"),
    ],
)
def test_milp_refuses_bad_options(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        solve_milp(KS_VALUES, KS_WEIGHTS, KS_CAP, time_limit_s=1.0, **kwargs)  # type: ignore[arg-type]


def test_lp_refuses_a_bad_time_limit_and_bad_costs() -> None:
    with pytest.raises(ValueError, match="time_limit_s"):
        solve_lp(LP_C, LP_A, LP_B, time_limit_s=-2.0)
    with pytest.raises(ValueError, match="c must"):
        solve_lp([[1.0, 2.0]], LP_A, LP_B)
    with pytest.raises(ValueError, match="finite"):
        solve_lp([1.0, math.nan], LP_A, LP_B)


def test_result_is_frozen() -> None:
    res = solve_lp(LP_C, LP_A, LP_B)
    assert isinstance(res, SolveResult)
    with pytest.raises(AttributeError):
        res.objective = 1.0  # type: ignore[misc]


def test_native_solver_prints_go_to_stderr_not_stdout(capfd: pytest.CaptureFixture[str]) -> None:
    """HiGHS prints some diagnostics from C whatever its options say; here its whole log
    (``disp``) stands in for them: it must land on stderr, and stdout must work after."""
    from scipy.optimize import LinearConstraint, milp

    from mlsched.scheduler.solvers.quiet import stdout_to_stderr

    with stdout_to_stderr():
        res = milp(
            -np.array(KS_VALUES),
            integrality=np.ones(3),
            bounds=Bounds(0, 1),
            constraints=LinearConstraint(KS_WEIGHTS, -np.inf, KS_CAP),
            options={"disp": True},
        )
        os.write(1, b"raw fd 1\n")
    print("after")
    out, err = capfd.readouterr()
    assert res.status == 0 and -res.fun == pytest.approx(9.0)
    assert out == "after\n"
    assert "raw fd 1" in err and "HiGHS" in err  # the solver's log, moved, not lost


def test_the_wrappers_print_nothing_to_stdout(capfd: pytest.CaptureFixture[str]) -> None:
    solve_lp(LP_C, LP_A, LP_B, maximize=True)
    solve_milp(KS_VALUES, KS_WEIGHTS, KS_CAP, integrality=[1, 1, 1], bounds=(0, 1), maximize=True,
               time_limit_s=5.0)  # fmt: skip
    assert capfd.readouterr().out == ""


def _knapsack(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A 3-constraint, 14-item integer knapsack (items up to 2 copies) HiGHS proves fast."""
    rng = np.random.default_rng(seed)
    weights = rng.integers(1, 20, (3, 14)).astype(float)
    values = weights.sum(0) / 3 + rng.integers(0, 10, 14)
    return values, weights, weights.sum(1) // 2


@pytest.mark.parametrize("seed", range(8))
def test_a_start_leads_to_the_same_optimum(seed: int) -> None:
    """The start path builds the program itself (highspy, column-wise matrix, bounds, sense):
    from any feasible start it must prove the optimum the cold path proves."""
    values, weights, cap = _knapsack(seed)
    kwargs: dict[str, Any] = dict(bounds=(0, 2), maximize=True, time_limit_s=30.0)
    cold = solve_milp(values, weights, cap, **kwargs)
    # A feasible start: items in order, one copy each, while they fit.
    start = np.zeros(len(values))
    for i in range(len(values)):
        if np.all(weights @ start + weights[:, i] <= cap):
            start[i] = 1.0
    warm = solve_milp(values, weights, cap, start=start, **kwargs)
    assert cold.is_optimal and warm.is_optimal, (cold.message, warm.message)
    assert warm.objective == pytest.approx(cold.objective, rel=1e-9)
    assert warm.x is not None and np.all(weights @ warm.x <= cap + 1e-6)
    assert warm.objective == pytest.approx(float(values @ warm.x))
    assert warm.dual_bound == pytest.approx(warm.objective, rel=1e-6)
    # Minimising the negated values from the same start: the same point, the sign kept.
    low = solve_milp(-values, weights, cap, bounds=(0, 2), time_limit_s=30.0, start=start)
    assert low.objective == pytest.approx(-cold.objective, rel=1e-9)


def test_a_start_with_equalities_and_continuous_columns() -> None:
    # max x + y + z  s.t.  2x + 2y <= 5,  x - z = 0,  x integer, y and z continuous:
    # x = 2, y = 0.5, z = 2 (objective 4.5), from the start (0, 0, 0).
    res = solve_milp(
        [1.0, 1.0, 1.0],
        [[2.0, 2.0, 0.0]],
        [5.0],
        A_eq=[[1.0, 0.0, -1.0]],
        b_eq=[0.0],
        integrality=[1, 0, 0],
        bounds=(0, 10),
        maximize=True,
        time_limit_s=10.0,
        start=[0.0, 0.0, 0.0],
    )
    assert res.is_optimal and res.objective == pytest.approx(4.5)
    np.testing.assert_allclose(res.x, [2.0, 0.5, 2.0], atol=1e-9)


@pytest.mark.parametrize(
    ("start", "match"),
    [
        ([1.0, 1.0, 1.0], "feasible"),  # weight 6 > 5
        ([1.0, 0.5, 0.0], "feasible"),  # not integer
        ([2.0, 0.0, 0.0], "feasible"),  # above the bound
        ([1.0, 0.0], "3 finite values"),
        ([1.0, float("nan"), 0.0], "3 finite values"),
    ],
)
def test_an_infeasible_start_is_refused(start: list[float], match: str) -> None:
    with pytest.raises(ValueError, match=f"start.*{match}|{match}"):
        solve_milp(KS_VALUES, KS_WEIGHTS, KS_CAP, bounds=(0, 1), maximize=True,
                   time_limit_s=5.0, start=start)  # fmt: skip


def test_a_node_limited_solve_from_a_start_keeps_at_least_the_start() -> None:
    rng = np.random.default_rng(0)
    weights = rng.integers(10, 100, (5, 60)).astype(float)
    values = weights.sum(0) / 5 + rng.integers(0, 20, 60)
    cap = weights.sum(1) // 2
    start = np.zeros(60)
    start[:5] = 1.0
    res = solve_milp(values, weights, cap, bounds=(0, 1), maximize=True, time_limit_s=60,
                     node_limit=1, start=start)  # fmt: skip
    assert res.status in (SolveStatus.TIME_LIMIT, SolveStatus.OPTIMAL), res.message
    assert res.objective is not None and res.objective >= float(values @ start) - 1e-9
    assert res.x is not None and np.all(weights @ res.x <= cap + 1e-6)


def test_the_start_path_prints_nothing(capfd: pytest.CaptureFixture[str]) -> None:
    """highspy prints a banner when a solver is made, whatever its options: not here."""
    solve_milp(KS_VALUES, KS_WEIGHTS, KS_CAP, bounds=(0, 1), maximize=True, time_limit_s=5.0,
               start=[0.0, 0.0, 0.0])  # fmt: skip
    out, err = capfd.readouterr()
    assert out == "" and "HiGHS" not in err
