"""The node agent: runs on each machine, registers with the controller and runs its tasks.

:mod:`.discovery` finds what the machine offers, :mod:`.task` runs one trainer process,
:mod:`.measurement` follows its metrics, :mod:`.telemetry` samples the node, and
:mod:`.daemon` holds the register/heartbeat protocol, :mod:`.serde` its one conversion to
and from the wire. :mod:`.cli` is ``mlsched agent``.
"""

from mlsched.agent.daemon import Agent, AgentError
from mlsched.agent.discovery import NodeInfo, discover
from mlsched.agent.serde import to_register_request
from mlsched.agent.task import TaskProcess, task_plan

__all__ = [
    "Agent",
    "AgentError",
    "NodeInfo",
    "TaskProcess",
    "discover",
    "task_plan",
    "to_register_request",
]
