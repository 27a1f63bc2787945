"""What each experiment charges for a restart (a preemption, a resume, a re-layout), and why.

Every scheme of an experiment is charged alike, as on a cluster: a restart costs what
:data:`mlsched.engine.simulator.DEFAULT_RESTART_S` says (``restart_cost`` in
``results.json``), in the experiments whose papers assume restarts free too (specs 000,
001 and 003; docs/algorithms/ say so): a free run would favour the schemes that re-lay
jobs out most. A free row may be added beside, labelled, where the paper assumes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mlsched.engine.simulator import DEFAULT_RESTART_S, TruthConfig

__all__ = ["CHARGED", "RestartCost"]


@dataclass(frozen=True)
class RestartCost:
    seconds: float
    why: str

    @property
    def truth(self) -> TruthConfig:
        return TruthConfig(restart_s=self.seconds)

    def to_dict(self) -> dict[str, Any]:
        return {"restart_s": self.seconds, "why": self.why}


CHARGED = RestartCost(
    DEFAULT_RESTART_S,
    "the simulator's default restart cost (checkpoint save + relaunch), charged to every "
    "scheme alike",
)
