"""The node agent: runs on each machine, registers with the controller and runs its tasks.

:mod:`.discovery` finds what the machine offers, :mod:`.task` runs one trainer process,
:mod:`.measurement` follows its metrics, :mod:`.telemetry` samples the node, and
:mod:`.daemon` holds the register/heartbeat protocol, :mod:`.serde` its one conversion to
and from the wire. :mod:`.cli` is ``mlsched agent``.

The names below are re-exported lazily (PEP 562), so that ``mlsched --help``, which builds
the agent's options from :mod:`.cli`, does not import the daemon, gRPC and psutil.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mlsched.core.lazy import lazy_exports

if TYPE_CHECKING:
    from mlsched.agent.daemon import Agent, AgentError
    from mlsched.agent.discovery import NodeInfo, discover
    from mlsched.agent.orders import TaskOrder
    from mlsched.agent.serde import task_order, task_plan, to_register_request
    from mlsched.agent.task import TaskProcess

_MODULE_OF = {
    "Agent": "daemon",
    "AgentError": "daemon",
    "NodeInfo": "discovery",
    "discover": "discovery",
    "to_register_request": "serde",
    "TaskOrder": "orders",
    "TaskProcess": "task",
    "task_order": "serde",
    "task_plan": "serde",
}

__all__ = [
    "Agent",
    "AgentError",
    "NodeInfo",
    "TaskOrder",
    "TaskProcess",
    "discover",
    "task_order",
    "task_plan",
    "to_register_request",
]


__getattr__, __dir__ = lazy_exports(__name__, _MODULE_OF, __all__, globals())
