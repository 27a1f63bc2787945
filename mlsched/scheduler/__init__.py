"""Policies behind one interface and a registry; importing this registers the built-ins."""

from mlsched.scheduler import (
    baselines,  # noqa: F401  (registers the baselines)
    dps,  # noqa: F401  (registers DPS and its pricing baselines)
    gadget,  # noqa: F401  (registers GADGET)
    hetero,  # noqa: F401  (registers the heterogeneous batch scheduler)
    oasis,  # noqa: F401  (registers OASiS)
    pdors,  # noqa: F401  (registers PD-ORS)
)
from mlsched.scheduler.policy import Policy
from mlsched.scheduler.registry import available, create, register, registered
from mlsched.scheduler.view import CapacityLedger, ClusterView, JobView, RunContext

__all__ = [
    "CapacityLedger",
    "ClusterView",
    "JobView",
    "Policy",
    "RunContext",
    "available",
    "create",
    "register",
    "registered",
]
