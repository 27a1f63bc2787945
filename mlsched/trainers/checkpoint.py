"""Atomic checkpoints that every trainer (PS, DDP, Horovod) reads and writes the same way.

A checkpoint is a directory ``<root>/step-<N>/`` holding ``state.pt``: the full model
state (parameters and buffers by name), the SGD momentum by parameter name, the global step
(which is also the data position: batches are indexed by step), the RNG state and the
layout that wrote it: tensors and plain types only, read back with ``weights_only=True`` so
that loading a checkpoint never executes code from it. Because it is keyed by parameter *name*, not by shard or rank, a run
may resume with a different number of workers, PSs or ranks.

Writes go to a temporary directory that is renamed into place, then ``latest`` is replaced
atomically, so a SIGKILL mid-write leaves the previous checkpoint intact (STYLE.md: a
``torch.save`` straight to the final path can be torn).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

__all__ = ["CheckpointError", "Periodic", "TrainState", "latest_step", "load_latest", "save"]

log = logging.getLogger(__name__)

_LATEST = "latest"


class CheckpointError(RuntimeError):
    """A checkpoint directory is unreadable or inconsistent."""


@dataclass
class TrainState:
    """``data_cursor`` counts the mini-batches of the global data stream consumed so far
    (with W synchronous workers a step consumes W of them), so the next run, whatever its
    W, continues the stream where this one stopped."""

    step: int
    model: dict[str, torch.Tensor]
    data_cursor: int = 0
    momentum: dict[str, torch.Tensor] = field(default_factory=dict)
    rng: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)


class Periodic:
    """When the process that writes a job's checkpoints writes its next periodic one: every
    ``every_s`` seconds or ``every_steps`` steps since the last (0 turns either off)."""

    def __init__(
        self,
        every_s: float,
        every_steps: int,
        start_step: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.every_s, self.every_steps, self.clock = every_s, every_steps, clock
        self.last_step, self.last_t = start_step, clock()

    def due(self, step: int) -> bool:
        if step <= self.last_step:
            return False
        by_steps = self.every_steps > 0 and step - self.last_step >= self.every_steps
        by_time = self.every_s > 0 and self.clock() - self.last_t >= self.every_s
        return by_steps or by_time

    def done(self, step: int) -> None:
        self.last_step, self.last_t = step, self.clock()


def _step_dir(root: Path, step: int) -> Path:
    return root / f"step-{step:09d}"


def save(root: str | os.PathLike[str], state: TrainState, *, keep: int = 2) -> Path:
    """Write ``state`` atomically under ``root`` and point ``latest`` at it."""
    base = Path(root)
    base.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=base))
    try:
        target = tmp / "state.pt"
        with open(target, "wb") as fh:
            torch.save(
                {
                    "step": state.step,
                    "data_cursor": state.data_cursor,
                    "model": state.model,
                    "momentum": state.momentum,
                    "rng": state.rng,
                    "meta": state.meta,
                },
                fh,
            )
            fh.flush()
            os.fsync(fh.fileno())
        final = _step_dir(base, state.step)
        if final.exists():  # a rerun stopping at the same step replaces it
            shutil.rmtree(final)
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    pointer = base / f".{_LATEST}.tmp"
    pointer.write_text(final.name)
    os.replace(pointer, base / _LATEST)
    _prune(base, keep)
    log.info("[checkpoint] saved step %d to %s", state.step, final)
    return final


def _prune(base: Path, keep: int) -> None:
    steps = sorted(p for p in base.glob("step-*") if p.is_dir())
    for old in steps[: max(0, len(steps) - max(1, keep))]:
        shutil.rmtree(old, ignore_errors=True)


def latest_step(root: str | os.PathLike[str]) -> int | None:
    """The step of the latest complete checkpoint, or None if there is none."""
    pointer = Path(root) / _LATEST
    if not pointer.exists():
        return None
    try:
        name = pointer.read_text(encoding="ascii", errors="replace")[:64].strip()
    except OSError as err:
        raise CheckpointError(f"{pointer}: unreadable ({err.strerror})") from None
    if not re.fullmatch(r"step-[0-9]{1,18}", name):
        raise CheckpointError(f"{pointer}: unexpected content {name!r}")
    return int(name.removeprefix("step-"))


def load_latest(root: str | os.PathLike[str]) -> TrainState | None:
    """The latest checkpoint under ``root`` (None when the directory has none)."""
    step = latest_step(root)
    if step is None:
        return None
    path = _step_dir(Path(root), step) / "state.pt"
    try:
        # weights_only: a checkpoint holds tensors and plain types only, and loading one
        # must never run code (a pickle can; a job's directory is not trusted).
        raw = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # OSError, EOFError, RuntimeError (torn zip), UnpicklingError
        raise CheckpointError(f"cannot read checkpoint {path}: {err}") from err
    try:
        return TrainState(
            step=int(raw["step"]),
            model=raw["model"],
            data_cursor=int(raw.get("data_cursor", raw["step"])),
            momentum=raw.get("momentum", {}),
            rng=raw.get("rng", {}),
            meta=raw.get("meta", {}),
        )
    except (AttributeError, KeyError, TypeError, ValueError) as err:
        raise CheckpointError(f"{path} is not a training checkpoint: {err!r}") from err
