"""Domain model shared by every layer: resources, cluster, jobs, utilities, allocations.

The names below are re-exported lazily (PEP 562): importing a light submodule such as
``mlsched.core.errors`` runs this file first, and eager re-exports would make every such
import pay for numpy (the command line's start-up, ``mlsched.net.auth``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mlsched.core.lazy import lazy_exports

if TYPE_CHECKING:
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

_SOURCES = {
    "allocation": (
        "Admission",
        "Allocation",
        "Decision",
        "JobState",
        "Placement",
        "Plan",
        "Quote",
        "RejectKind",
    ),
    "cluster": ("Cluster", "Pool", "Server", "Topology"),
    "errors": ("MlschedError", "PolicyError", "SpecError"),
    "job": ("Arch", "JobSpec", "SyncMode"),
    "resources": ("ResourceVector",),
    "utility": ("Utility", "UtilityKind"),
}
_MODULE_OF = {name: module for module, names in _SOURCES.items() for name in names}

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


__getattr__, __dir__ = lazy_exports(__name__, _MODULE_OF, __all__, globals())
