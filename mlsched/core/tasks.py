"""What the controller asks an agent to run: one task, its trainer configuration and how its
processes start on the node.

A *task* is the unit an agent supervises: one process tree, one metrics file, one exit
status. A parameter-server role or a directly launched DDP rank is one process; a torchrun
or Horovod task is one node's share of an all-reduce job (its ``node_sizes[node_rank]``
ranks under one launcher process).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from mlsched.core.errors import SpecError
from mlsched.core.train_config import Backend, Launcher, Role, TrainConfig

__all__ = ["LaunchKind", "NodeLaunch", "TaskPlan", "launch_kind"]


class LaunchKind(str, Enum):
    DIRECT = "direct"  # one ``python -m mlsched.trainers``
    TORCHRUN = "torchrun"  # one torchrun for the node's DDP ranks
    HOROVOD = "horovod"  # the node's Horovod ranks (node 0 also hosts the rendezvous)

    @classmethod
    def of(cls, text: str) -> LaunchKind:
        """The launch named ``text``; :class:`SpecError` naming ``node.launcher`` if none."""
        try:
            return cls(text)
        except ValueError:
            choices = ", ".join(k.value for k in cls)
            raise SpecError("node.launcher", text, f"one of {choices}") from None


def launch_kind(cfg: TrainConfig) -> LaunchKind:
    """How ``cfg``'s job starts on each node: PS roles directly; all-reduce by its backend
    and, for DDP, its launcher."""
    if cfg.arch == "ps":
        return LaunchKind.DIRECT
    if cfg.backend is Backend.HOROVOD:
        return LaunchKind.HOROVOD
    return LaunchKind.TORCHRUN if cfg.launcher is Launcher.TORCHRUN else LaunchKind.DIRECT


@dataclass(frozen=True)
class NodeLaunch:
    """How a task's processes start: ``node_sizes`` ranks per node in node order (empty for
    a direct launch), this node being ``node_rank``."""

    launcher: LaunchKind = LaunchKind.DIRECT
    node_rank: int = 0
    node_sizes: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "launcher", LaunchKind.of(self.launcher))
        sizes = tuple(self.node_sizes)
        object.__setattr__(self, "node_sizes", sizes)
        if self.launcher is LaunchKind.DIRECT:
            if sizes or self.node_rank:
                raise SpecError("node.node_sizes", sizes, "empty for a direct launch")
            return
        if not sizes or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in sizes):
            raise SpecError("node.node_sizes", sizes, "one rank count >= 1 per node")
        if not 0 <= self.node_rank < len(sizes):
            raise SpecError("node.node_rank", self.node_rank, f"an index in [0, {len(sizes)})")

    @property
    def nnodes(self) -> int:
        return max(1, len(self.node_sizes))

    @property
    def nproc(self) -> int:
        """Processes that train on this node (1 for a direct launch)."""
        return self.node_sizes[self.node_rank] if self.node_sizes else 1

    @property
    def first_rank(self) -> int:
        return sum(self.node_sizes[: self.node_rank])


@dataclass(frozen=True)
class TaskPlan:
    """One task of one generation of a job, as the controller plans and the agent runs it."""

    task_id: str
    config: TrainConfig
    node: NodeLaunch = NodeLaunch()
    generation: int = 0
    gpu_indices: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        node, cfg = self.node, self.config
        if node.launcher is not LaunchKind.DIRECT:
            if node.launcher is not launch_kind(cfg):
                raise SpecError("node.launcher", node.launcher.value, launch_kind(cfg).value)
            if sum(node.node_sizes) != cfg.num_workers:
                raise SpecError("node.node_sizes", node.node_sizes, f"{cfg.num_workers} ranks")
        object.__setattr__(self, "gpu_indices", tuple(self.gpu_indices))

    @property
    def job_id(self) -> str:
        return self.config.job_id

    @property
    def computes(self) -> bool:
        """Its processes train (they are not parameter servers)."""
        return self.config.role is not Role.PS

    @property
    def launch(self) -> str:
        """How the job runs, for tables: ``ps``, ``torchrun``, ``horovod`` or ``direct``."""
        if self.config.arch == "ps":
            return "ps"
        return launch_kind(self.config).value
