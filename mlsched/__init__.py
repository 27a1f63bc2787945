"""mlsched: online scheduling and pricing of distributed deep-learning jobs, simulated at
paper scale and run on a real cluster by the same policy code.

The public API (stable names; docs/writing-a-policy.md walks through it)::

    from mlsched import Policy, register, JobSpec, Cluster, load_workload, simulate

* write a policy: subclass :class:`Policy` (``on_arrival``, ``allocate``), give it a
  ``name`` and ``description``; make it known with :func:`register`, or by
  ``package.module:Class`` wherever a policy name is taken, or by an entry point in the
  group ``mlsched.policies``;
* run it: :func:`simulate` on a :func:`load_workload` workload with a
  :class:`SimulationConfig`, then :func:`summarize` the :class:`RunResult`.

Names are imported on first use (PEP 562), so ``import mlsched`` loads nothing heavy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mlsched.core.lazy import lazy_exports

if TYPE_CHECKING:
    from mlsched.core.allocation import (
        Admission,
        Allocation,
        JobState,
        Placement,
        Plan,
        Quote,
        RejectKind,
    )
    from mlsched.core.cluster import Cluster, Server, Topology
    from mlsched.core.errors import PolicyError, SpecError
    from mlsched.core.job import Arch, JobSpec, SyncMode
    from mlsched.core.resources import ResourceVector
    from mlsched.core.utility import Utility
    from mlsched.engine.builder import SimulationConfig, compare, simulate
    from mlsched.engine.results import JobRecord, RunResult
    from mlsched.engine.simulator import TruthConfig
    from mlsched.engine.summary import Summary, summarize
    from mlsched.scheduler.placement import pack
    from mlsched.scheduler.policy import Policy
    from mlsched.scheduler.registry import available, create, policy_options, register
    from mlsched.scheduler.view import CapacityLedger, ClusterView, JobView, RunContext
    from mlsched.workloads.base import Workload
    from mlsched.workloads.loading import load_workload

_SOURCES = {
    "core.allocation": (
        "Admission",
        "Allocation",
        "JobState",
        "Placement",
        "Plan",
        "Quote",
        "RejectKind",
    ),
    "core.cluster": ("Cluster", "Server", "Topology"),
    "core.errors": ("PolicyError", "SpecError"),
    "core.job": ("Arch", "JobSpec", "SyncMode"),
    "core.resources": ("ResourceVector",),
    "core.utility": ("Utility",),
    "engine.builder": ("SimulationConfig", "compare", "simulate"),
    "engine.results": ("JobRecord", "RunResult"),
    "engine.simulator": ("TruthConfig",),
    "engine.summary": ("Summary", "summarize"),
    "scheduler.placement": ("pack",),
    "scheduler.policy": ("Policy",),
    "scheduler.registry": ("available", "create", "policy_options", "register"),
    "scheduler.view": ("CapacityLedger", "ClusterView", "JobView", "RunContext"),
    "workloads.base": ("Workload",),
    "workloads.loading": ("load_workload",),
}

# Literal, so that linters and type checkers read it; a test holds it equal to _SOURCES.
__all__ = [
    "Admission",
    "Allocation",
    "Arch",
    "CapacityLedger",
    "Cluster",
    "ClusterView",
    "JobRecord",
    "JobSpec",
    "JobState",
    "JobView",
    "Placement",
    "Plan",
    "Policy",
    "PolicyError",
    "Quote",
    "RejectKind",
    "ResourceVector",
    "RunContext",
    "RunResult",
    "Server",
    "SimulationConfig",
    "SpecError",
    "Summary",
    "SyncMode",
    "Topology",
    "TruthConfig",
    "Utility",
    "Workload",
    "available",
    "compare",
    "create",
    "load_workload",
    "pack",
    "policy_options",
    "register",
    "simulate",
    "summarize",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {name: module for module, names in _SOURCES.items() for name in names},
    __all__,
    globals(),
)
