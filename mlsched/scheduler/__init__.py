"""Policies behind one interface and a registry (:mod:`.registry`: built-ins by name,
policies of other packages by ``module:Class`` or entry point)."""

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
