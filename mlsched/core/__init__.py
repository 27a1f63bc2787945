"""Domain model shared by every layer: resources, cluster, jobs, utilities, allocations."""

from mlsched.core.allocation import (
    Admission,
    Allocation,
    Decision,
    JobState,
    Placement,
    Plan,
    Quote,
    RejectKind,
)
from mlsched.core.cluster import Cluster, Pool, Server, Topology
from mlsched.core.errors import MlschedError, PolicyError, SpecError
from mlsched.core.job import Arch, JobSpec, SyncMode
from mlsched.core.resources import ResourceVector
from mlsched.core.utility import Utility, UtilityKind

__all__ = [
    "Admission",
    "Allocation",
    "Arch",
    "Cluster",
    "Decision",
    "JobSpec",
    "JobState",
    "MlschedError",
    "Placement",
    "Plan",
    "PolicyError",
    "Pool",
    "Quote",
    "RejectKind",
    "ResourceVector",
    "Server",
    "SpecError",
    "SyncMode",
    "Topology",
    "Utility",
    "UtilityKind",
]
