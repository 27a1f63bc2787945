"""Workloads by name (built-in generators) or from files; importing registers the built-ins."""

from mlsched.testbed.workloads import demo, dps, gadget, hetero, oasis, oasis_testbed, pdors
from mlsched.testbed.workloads.base import (
    Workload,
    builtin_workloads,
    load_workload,
    register_workload,
)

__all__ = [
    "Workload",
    "builtin_workloads",
    "demo",
    "dps",
    "gadget",
    "hetero",
    "load_workload",
    "oasis",
    "oasis_testbed",
    "pdors",
    "register_workload",
]
