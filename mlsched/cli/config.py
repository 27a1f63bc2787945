"""What one ``mlsched`` invocation does, independent of argparse (tests build it directly):
read by :mod:`mlsched.cli.entry` and the command bodies it dispatches to."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mlsched.core.train_config import TrainConfig
    from mlsched.engine.simulator import TruthConfig

__all__ = ["Config"]


def _default_truth() -> TruthConfig:
    from mlsched.engine.simulator import TruthConfig

    return TruthConfig()


@dataclass(frozen=True)
class Config:
    """What one invocation does, independent of argparse (tests may build it directly)."""

    command: str
    workload: str = ""
    policies: tuple[str, ...] = ()
    seed: int = 0
    jobs: int | None = None
    horizon: int | None = None
    slot_seconds: float | None = None
    options: dict[str, Any] = field(default_factory=dict)
    policy_options: dict[str, Any] = field(default_factory=dict)
    truth: TruthConfig = field(default_factory=_default_truth)
    out: Path | None = None
    experiment: str = ""
    seeds: int | None = None
    scale: str = "default"
    strict: bool = True  # experiment: a failed check exits 1
    json: bool = False  # listings and simulate: JSON on stdout
    progress: bool = False
    train: TrainConfig | None = None
    replay: Path | None = None
    trace_format: str | None = None  # simulate: the workload is a trace in this format
