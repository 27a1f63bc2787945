"""What every all-reduce rank does around its training step, whatever the backend.

A rank trains batch ``cursor + (step - start) * world + rank`` at step ``step``, reports
each step with the ring all-reduce's traffic (``2 (W - 1) / W`` times the gradient), and at
the end completes the stop vote and, on rank 0, checkpoints its replica.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from mlsched.core.train_config import TrainConfig
from mlsched.trainers.allreduce.vote import StopVote
from mlsched.trainers.checkpoint import Periodic
from mlsched.trainers.common import save_replica
from mlsched.trainers.metrics import IterationStats, MetricsSink, record_iteration

__all__ = ["Replica"]

log = logging.getLogger(__name__)


@dataclass
class Replica:
    """One rank's place in the job: its rank, the world, where it resumed."""

    cfg: TrainConfig
    sink: MetricsSink
    stats: IterationStats
    rank: int
    world: int
    start: int
    cursor: int
    ring_bytes: float
    periodic: Periodic

    @classmethod
    def of(
        cls,
        cfg: TrainConfig,
        sink: MetricsSink,
        stats: IterationStats,
        model: nn.Module,
        *,
        rank: int,
        world: int,
        start: int,
        cursor: int,
    ) -> Replica:
        grad_bytes = sum(p.numel() for p in model.parameters() if p.requires_grad) * 4
        ring = 2.0 * grad_bytes * (world - 1) / world
        sink.emit({"type": "event", "event": "start", "step": start, "world": world})
        periodic = Periodic(cfg.checkpoint_every_s, cfg.checkpoint_every_steps, start)
        return cls(cfg, sink, stats, rank, world, start, cursor, ring, periodic)

    def batch_index(self, step: int) -> int:
        return self.cursor + (step - self.start) * self.world + self.rank

    def data_cursor(self, step: int) -> int:
        return self.cursor + (step - self.start) * self.world

    def record(self, step: int, compute_s: float, comm_s: float, loss: float) -> None:
        record_iteration(
            self.stats,
            self.sink,
            step=step,
            compute_s=compute_s,
            comm_s=comm_s,
            sent=self.ring_bytes,
            recv=self.ring_bytes,
            loss=loss,
            batch=self.cfg.batch_size,
        )
        if self.cfg.log_every and (step + 1) % self.cfg.log_every == 0:
            log.info("[rank %d] step %d loss %.4f", self.rank, step + 1, loss)

    def after_step(
        self, step: int, model: nn.Module, opt: torch.optim.Optimizer, layout: dict[str, Any]
    ) -> None:
        """Rank 0 writes a periodic checkpoint once one is due, ``step`` steps done: every
        replica holds the same state, so no other rank takes part (they wait for rank 0 at
        the next all-reduce, the cost of the checkpoint)."""
        if self.rank == 0 and step < self.cfg.stop_step and self.periodic.due(step):
            self._save(step, model, opt, layout)
            self.periodic.done(step)

    def _save(
        self, step: int, model: nn.Module, opt: torch.optim.Optimizer, layout: dict[str, Any]
    ) -> None:
        save_replica(
            self.cfg,
            model,
            opt,
            self.sink,
            step,
            self.data_cursor(step),
            {"world_size": self.world, **layout},
        )

    def finish(
        self,
        vote: StopVote,
        model: nn.Module,
        opt: torch.optim.Optimizer,
        step: int,
        layout: dict[str, Any],
    ) -> None:
        """Complete the last stop vote; rank 0 checkpoints at ``step``."""
        vote.finish()
        if self.rank == 0:
            self._save(step, model, opt, layout)
