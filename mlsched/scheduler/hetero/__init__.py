"""Zhou et al.'s heterogeneous batch scheduler (spec 002): A_online, A_dual, A_maxweight
and the cost-minimisation subroutines for PS and ring-all-reduce jobs on worker and PS types.

Modules: :mod:`~.catalogue` (the shipped type table, which servers may host a job's
workers), :mod:`~.grid` (capacity and prices of one A_maxweight call), :mod:`~.batch` (one
round's jobs and grid), :mod:`~.shapes` (a job's candidate shapes and durations),
:mod:`~.mincost` (the per-job cost minimisation), :mod:`~.maxweight` (A_maxweight and
A_dual), :mod:`~.greedy_rtl` (Jain et al.'s greedy, the baseline of A_maxweight) and
:mod:`~.policy` (A_online, registered as ``hetero``).
"""

from mlsched.scheduler.hetero.batch import RoundInputs, round_inputs
from mlsched.scheduler.hetero.catalogue import (
    DEFAULT_CATALOGUE,
    PsType,
    TypeCatalogue,
    WorkerType,
)
from mlsched.scheduler.hetero.greedy_rtl import greedy_rtl, scheduled_weight
from mlsched.scheduler.hetero.grid import Grid, price_base
from mlsched.scheduler.hetero.maxweight import Scheduled, dual, maxweight, theory_alpha
from mlsched.scheduler.hetero.mincost import Candidate, mincost
from mlsched.scheduler.hetero.policy import DEFAULT_ALPHA, HeteroPolicy, RoundRecord
from mlsched.scheduler.hetero.shapes import JobShapes, Shape

__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_CATALOGUE",
    "Candidate",
    "Grid",
    "HeteroPolicy",
    "JobShapes",
    "PsType",
    "RoundInputs",
    "RoundRecord",
    "Scheduled",
    "Shape",
    "TypeCatalogue",
    "WorkerType",
    "dual",
    "greedy_rtl",
    "maxweight",
    "mincost",
    "price_base",
    "round_inputs",
    "scheduled_weight",
    "theory_alpha",
]
