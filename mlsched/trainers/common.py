"""What every trainer shares: torch setup, model and data, the stop flag, state <-> checkpoint.

Determinism: every process seeds torch from (seed, step, global rank) at start, and data
batches are indexed by the global step (see :mod:`mlsched.trainers.data`), so a resumed run
continues the same stream whatever its new layout.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from types import FrameType
from typing import Any

import torch
from torch import nn

from mlsched.core.train_config import TrainConfig
from mlsched.trainers.checkpoint import TrainState, load_latest, save
from mlsched.trainers.data import make_dataset
from mlsched.trainers.data.base import mix_seed
from mlsched.trainers.metrics import MetricsSink
from mlsched.trainers.models import build_model

__all__ = [
    "StopFlag",
    "Trainee",
    "build_trainee",
    "momentum_by_name",
    "restore",
    "resume",
    "save_replica",
    "sgd",
    "snapshot",
    "timeout",
]

log = logging.getLogger(__name__)

# Domain tag of the training draws, apart from the data's own seeds (mix_seed(seed, ...)).
_DRAWS = 0xD80F


def timeout(cfg: TrainConfig) -> timedelta:
    return timedelta(seconds=cfg.timeout_s)


def device_for(cfg: TrainConfig) -> torch.device:
    if cfg.device == "cuda" or (cfg.device == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise RuntimeError("--device cuda requested but CUDA is not available")
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


class StopFlag:
    """Set by SIGTERM or SIGINT (or by a peer's request); read at step boundaries.

    SIGINT too: a Ctrl-C on ``mlsched train`` reaches every process of the job (they share
    the terminal's process group), and should stop and checkpoint like SIGTERM, not raise
    KeyboardInterrupt mid-step. A second SIGINT interrupts at once.
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason = ""

    def install(self) -> StopFlag:
        def handler(signum: int, frame: FrameType | None) -> None:
            self.set(f"signal {signal.Signals(signum).name}")
            if signum == signal.SIGINT:
                signal.signal(signal.SIGINT, signal.default_int_handler)

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)
        return self

    def watch_parent(self, every_s: float = 1.0) -> StopFlag:
        """Stop (and checkpoint) if the process that launched this one dies: an agent or
        launcher that crashed must not leave trainers running that nobody supervises."""
        parent = os.getppid()

        def watch() -> None:
            while not self._event.wait(every_s):
                if os.getppid() != parent:
                    self.set(f"launcher (pid {parent}) exited")
                    return

        if parent > 1:
            threading.Thread(target=watch, name="parent-watch", daemon=True).start()
        return self

    def set(self, reason: str) -> None:
        if not self._event.is_set():
            self.reason = reason
            log.info("[trainer] stop requested: %s", reason)
        self._event.set()

    def __bool__(self) -> bool:
        return self._event.is_set()


@dataclass
class Trainee:
    """The model, its data and its loss, built identically in every process of a job."""

    model: nn.Module
    dataset: Any
    device: torch.device
    loss_fn: nn.Module
    seed: int = 0

    def batch(self, index: int, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Mini-batch ``index`` of the stream, and the random draws of the step that trains
        it (dropout masks) keyed to ``(seed, index)``: the same whatever the layout, however
        often the job stopped and resumed, and different on each replica. No RNG state needs
        to survive a checkpoint."""
        torch.manual_seed(mix_seed(self.seed, index, _DRAWS))
        x, y = self.dataset.batch(index, batch_size)
        return x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)

    def named_params(self) -> Iterator[tuple[str, nn.Parameter]]:
        return ((n, p) for n, p in self.model.named_parameters() if p.requires_grad)


def build_trainee(cfg: TrainConfig) -> Trainee:
    torch.set_num_threads(cfg.threads)
    # Same initial weights in every process: seed before building, independently of rank.
    torch.manual_seed(cfg.seed)
    device = device_for(cfg)
    model = build_model(cfg.model, num_classes=cfg.num_classes, image_size=cfg.image_size)
    dataset = make_dataset(
        cfg.dataset,
        seed=cfg.seed,
        num_samples=cfg.num_samples,
        image_size=cfg.image_size,
        num_classes=cfg.num_classes,
        path=cfg.data_path,
    )
    return Trainee(model.to(device), dataset, device, nn.CrossEntropyLoss(), cfg.seed)


def sgd(cfg: TrainConfig, params: Any) -> torch.optim.SGD:
    return torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)


def momentum_by_name(model: nn.Module, opt: torch.optim.Optimizer) -> dict[str, torch.Tensor]:
    """SGD momentum buffers keyed by parameter name (layout-independent)."""
    out: dict[str, torch.Tensor] = {}
    for name, p in model.named_parameters():
        buf = opt.state.get(p, {}).get("momentum_buffer")
        if buf is not None:
            out[name] = buf.detach().cpu().clone()
    return out


def snapshot(
    cfg: TrainConfig,
    model: nn.Module,
    momentum: dict[str, torch.Tensor],
    step: int,
    data_cursor: int,
    layout: dict[str, Any],
) -> TrainState:
    """A checkpointable state: full model state by name (CPU), momentum, step, data
    position, RNG, layout."""
    return TrainState(
        step=step,
        data_cursor=data_cursor,
        model={k: v.detach().cpu().clone() for k, v in model.state_dict().items()},
        momentum=momentum,
        rng={"seed": cfg.seed, "keyed_by": "batch_index"},
        meta={
            "model": cfg.model,
            "arch": cfg.arch,
            "mode": cfg.mode,
            "job_id": cfg.job_id,
            "batch_size": cfg.batch_size,
            **layout,
        },
    )


def restore(
    model: nn.Module,
    state: TrainState,
    opt: torch.optim.Optimizer | None = None,
    cfg: TrainConfig | None = None,
) -> None:
    """Load a checkpoint into ``model`` (and the optimizer's momentum) by name."""
    if cfg is not None and state.meta.get("model") not in (None, cfg.model):
        raise ValueError(
            f"checkpoint holds model {state.meta.get('model')!r}, this run trains {cfg.model!r}"
        )
    model.load_state_dict(state.model)
    if opt is not None and state.momentum:
        for name, p in model.named_parameters():
            buf = state.momentum.get(name)
            if buf is not None:
                opt.state[p]["momentum_buffer"] = buf.to(p.device).clone()


def resume(cfg: TrainConfig, model: nn.Module, opt: torch.optim.Optimizer) -> tuple[int, int]:
    """Load the latest checkpoint of ``cfg.checkpoint_dir`` if any: (start step, data cursor)."""
    state = load_latest(cfg.checkpoint_dir)
    if state is None:
        return 0, 0
    restore(model, state, opt, cfg)
    return state.step, state.data_cursor


def save_replica(
    cfg: TrainConfig,
    model: nn.Module,
    opt: torch.optim.Optimizer,
    sink: MetricsSink,
    step: int,
    data_cursor: int,
    layout: dict[str, Any],
) -> None:
    """Checkpoint a replica (an all-reduce rank's full model and optimizer) and log it."""
    save(
        cfg.checkpoint_dir,
        snapshot(cfg, model, momentum_by_name(model, opt), step, data_cursor, layout),
        keep=cfg.checkpoint_keep,
    )
    sink.emit({"type": "event", "event": "checkpoint", "step": step, "data_cursor": data_cursor})
