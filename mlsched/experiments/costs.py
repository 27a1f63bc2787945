"""What each experiment charges for a restart (a preemption, a resume, a re-layout), and why.

A claim is decided under its paper's own assumption: free where the paper says restarts
are free (specs 000, 001 and 003), 0.1 slot for spec 002 (AMB-15's Tiresias penalty, to
every scheme alike), and nothing for spec 004, whose jobs are placed once and never
restarted. Beside it, where restarts happen, the experiment runs the claim again charging
what a restart costs on a cluster (:data:`CLUSTER`: checkpoint save + relaunch, in seconds,
whatever the slot), so a reader sees whether the claim survives real costs; those checks
are rows of their own (:func:`cluster_check`). ``results.json`` states both costs, each in
seconds and as a share of the experiment's slot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mlsched.engine.simulator import DEFAULT_RESTART_S, TruthConfig

__all__ = [
    "CLUSTER",
    "CLUSTER_LABEL",
    "FREE",
    "Costs",
    "RestartCost",
    "cluster_check",
    "slot_share",
]


@dataclass(frozen=True)
class RestartCost:
    """``seconds`` per restart plus ``slots`` of the experiment's slot (one of them is 0)."""

    why: str
    seconds: float = 0.0
    slots: float = 0.0

    def restart_s(self, slot_seconds: float) -> float:
        return self.seconds + self.slots * slot_seconds

    def truth(self, slot_seconds: float) -> TruthConfig:
        return TruthConfig(restart_s=self.restart_s(slot_seconds))

    def to_dict(self, slot_seconds: float) -> dict[str, Any]:
        seconds = self.restart_s(slot_seconds)
        return {
            "restart_s": seconds,
            "slot_seconds": slot_seconds,
            "slot_share": seconds / slot_seconds,
            "why": self.why,
        }


FREE = RestartCost("free, as the paper assumes")


def slot_share(share: float, why: str) -> RestartCost:
    return RestartCost(why, slots=share)


CLUSTER = RestartCost(
    "a restart on a cluster: checkpoint save + relaunch to the first iteration, the "
    "simulator's default (DEFAULT_RESTART_S); benchmarks.restart_cost measures 5-23 s for "
    "small models on CPU stand-ins, a GPU job's checkpoint and start take longer",
    seconds=DEFAULT_RESTART_S,
)
#: How the reproduction table names a check decided under :data:`CLUSTER`.
CLUSTER_LABEL = "a cluster's restart cost"


def cluster_check(name: str) -> str:
    """The name of check ``name`` decided on runs that charge a cluster's restart cost."""
    return f"{name} {{{CLUSTER_LABEL}}}"


@dataclass(frozen=True)
class Costs:
    """An experiment's restart costs: the paper's (its verdicts) and a cluster's (rows of
    their own; None where no scheme ever restarts), over its slot of ``slot_seconds``."""

    paper: RestartCost
    cluster: RestartCost | None
    slot_seconds: float

    def of(self, which: str) -> RestartCost:
        """``paper`` or ``cluster``: the cost a run of that kind charges."""
        cost = {"paper": self.paper, "cluster": self.cluster}.get(which)
        if cost is None:
            raise ValueError(f"no {which!r} restart cost here (paper or cluster)")
        return cost

    def to_dict(self) -> dict[str, Any]:
        return {
            "restart_cost": self.paper.to_dict(self.slot_seconds),
            "cluster_restart_cost": (
                self.cluster.to_dict(self.slot_seconds) if self.cluster is not None else None
            ),
        }
