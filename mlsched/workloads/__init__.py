"""Workloads by name (built-in generators) or from files, and public-trace import
(:mod:`.traces`).

Names are re-exported lazily: importing a light part (``mlsched.workloads.traces.cli`` for
the command line's parser) must not import every generator; :mod:`.loading` imports the
built-in generators, which register themselves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mlsched.core.lazy import lazy_exports

if TYPE_CHECKING:
    from mlsched.workloads.base import Workload, register_workload
    from mlsched.workloads.loading import builtin_workloads, load_workload

__all__ = ["Workload", "builtin_workloads", "load_workload", "register_workload"]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Workload": "base",
        "register_workload": "base",
        "builtin_workloads": "loading",
        "load_workload": "loading",
    },
    __all__,
    globals(),
)
