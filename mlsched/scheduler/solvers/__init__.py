"""Shared LP/MILP helpers for the policies (scipy HiGHS); statuses are data, not errors."""

from mlsched.scheduler.solvers.highs import SolveResult, SolveStatus, solve_lp, solve_milp

__all__ = ["SolveResult", "SolveStatus", "solve_lp", "solve_milp"]
