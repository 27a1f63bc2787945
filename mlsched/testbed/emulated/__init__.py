"""An emulated multi-host cluster on one machine (docs/emulation.md).

Agents run in network namespaces joined by veth pairs and bridges whose links ``tc``
shapes to the rates of a real cluster, so the training traffic between them crosses links
of different speeds and the closed loop can learn them.

:mod:`.topology` plans names and addresses (pure data), :mod:`.netns` and :mod:`.shaping`
run ``ip`` and ``tc``, :mod:`.network` builds and removes the namespaces and links,
:mod:`.state` is the state file, :mod:`.cluster` the cluster with its processes,
:mod:`.probe` measures a link, :mod:`.comm_report` compares measured communication with
the runtime model and :mod:`.demo` is ``mlsched demo --emulate``. The experiments that run
on it are :mod:`mlsched.testbed.experiment` and :mod:`mlsched.testbed.fidelity`; its
commands (``mlsched cluster``) are :mod:`mlsched.testbed.cli`.

The names below are re-exported lazily (PEP 562), so that ``mlsched --help`` imports none
of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mlsched.core.lazy import lazy_exports

if TYPE_CHECKING:
    from mlsched.testbed.emulated.cluster import EmulatedCluster, teardown
    from mlsched.testbed.emulated.netns import (
        EmulationError,
        EmulationUnavailable,
        missing_requirements,
        require_emulation,
    )
    from mlsched.testbed.emulated.topology import EmulationSpec, NetworkPlan, plan_network

_MODULE_OF = {
    "EmulatedCluster": "cluster",
    "teardown": "cluster",
    "EmulationError": "netns",
    "EmulationUnavailable": "netns",
    "missing_requirements": "netns",
    "require_emulation": "netns",
    "EmulationSpec": "topology",
    "NetworkPlan": "topology",
    "plan_network": "topology",
}

__all__ = [
    "EmulatedCluster",
    "EmulationError",
    "EmulationSpec",
    "EmulationUnavailable",
    "NetworkPlan",
    "missing_requirements",
    "plan_network",
    "require_emulation",
    "teardown",
]

__getattr__, __dir__ = lazy_exports(__name__, _MODULE_OF, __all__, globals())
