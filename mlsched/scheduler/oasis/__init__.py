"""OASiS (spec 001, Bao et al., INFOCOM'18): online primal-dual admission and scheduling of
asynchronous parameter-server jobs with exponential per-(server, resource, slot) prices.

Modules: :mod:`~.needs` (a job in worker-slots, from the runtime model), :mod:`~.prices`
(price functions and the U/L constants), :mod:`~.usage` (committed capacity per slot),
:mod:`~.placement` (COST_t, cheapest-first within a slot), :mod:`~.schedule` (Alg. 2's
dynamic programs) and :mod:`~.policy` (Alg. 1, registered as ``oasis``).
"""

from mlsched.scheduler.oasis.needs import JobNeeds, per_worker_rate
from mlsched.scheduler.oasis.placement import Filled, Layout, SlotOffer, place, slot_costs
from mlsched.scheduler.oasis.policy import DEFAULT_WINDOW, ArrivalRecord, OasisPolicy
from mlsched.scheduler.oasis.prices import (
    ConstantsEstimator,
    PriceConstants,
    direct_price,
    log_price,
)
from mlsched.scheduler.oasis.schedule import FastDP, ReferenceDP, Schedule, best_schedule
from mlsched.scheduler.oasis.usage import CommittedUsage

__all__ = [
    "DEFAULT_WINDOW",
    "ArrivalRecord",
    "CommittedUsage",
    "ConstantsEstimator",
    "FastDP",
    "Filled",
    "JobNeeds",
    "Layout",
    "OasisPolicy",
    "PriceConstants",
    "ReferenceDP",
    "Schedule",
    "SlotOffer",
    "best_schedule",
    "direct_price",
    "log_price",
    "per_worker_rate",
    "place",
    "slot_costs",
]
