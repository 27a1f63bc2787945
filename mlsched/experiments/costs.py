"""What each experiment charges for a restart (a preemption, a resume, a re-layout), and why.

Every scheme of an experiment is charged alike. By default a restart costs what
:data:`mlsched.engine.simulator.DEFAULT_RESTART_S` says; an experiment runs with free
restarts only where its paper assumes them, and its results say so (``restart_cost`` in
``results.json``, with the spec's words).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mlsched.engine.simulator import DEFAULT_RESTART_S, TruthConfig

__all__ = ["CHARGED", "RestartCost", "paper_assumes_free"]


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


def paper_assumes_free(where: str) -> RestartCost:
    """Free restarts, as the paper's model has them (``where``: the spec's words)."""
    return RestartCost(0.0, f"free, as the paper assumes ({where})")
