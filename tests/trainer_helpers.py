"""Shared helpers for the trainer tests that start real processes on loopback.

Jobs are small (a 2-layer MLP on 8x8 synthetic images, batch 16) so that a whole job takes a
few seconds, most of it importing torch. Every process gets ``OMP_NUM_THREADS=1``.
Processes started here run in their own session, like the tasks a node agent starts, and
:func:`reap` kills whatever a failing test leaves behind (by pid, never by name).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import replace
from pathlib import Path
from typing import Any

import psutil
import torch

from mlsched.core.train_config import TrainConfig
from mlsched.net.ports import listen_port
from mlsched.trainers.checkpoint import TrainState, load_latest
from mlsched.trainers.common import build_trainee, restore
from mlsched.trainers.launch import commands
from mlsched.trainers.models import build_model
from mlsched.trainers.ps.protocol import HEADER
from mlsched.trainers.run import param_checksum

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
PYTHON = sys.executable

# Small, fast, and learnable: the loss falls from ~2.3 to well under 1 in 40 steps.
SMALL: dict[str, Any] = {
    "model": "mlp",
    "batch_size": 16,
    "lr": 0.05,
    "num_samples": 512,
    "image_size": 8,
    "num_classes": 10,
    "threads": 1,
    "timeout_s": 30.0,
    "rendezvous": "127.0.0.1:0",
    # Checkpoints only at a stop, unless a test asks for periodic ones.
    "checkpoint_every_s": 0.0,
}


def make_config(root: Path, name: str, **overrides: Any) -> TrainConfig:
    """A TrainConfig with small defaults; metrics go to ``root/<name>.jsonl``.

    The checkpoint directory defaults to ``root/ckpt`` so that successive runs of one test
    (stop, then resume) share it.
    """
    fields: dict[str, Any] = {
        **SMALL,
        "checkpoint_dir": str(root / "ckpt"),
        "metrics": str(root / f"{name}.jsonl"),
        "job_id": name,
        **overrides,
    }
    if fields.get("arch") == "allreduce":
        fields.setdefault("num_ps", 0)
    return TrainConfig(**fields)


def with_port(cfg: TrainConfig) -> TrainConfig:
    """``cfg`` with a concrete free loopback port (for processes started without launch)."""
    if cfg.rendezvous.endswith(":0"):
        return replace(cfg, rendezvous=f"127.0.0.1:{listen_port()}")
    return cfg


# Metrics --------------------------------------------------------------------------------------
def read_records(path: str | Path) -> list[dict[str, Any]]:
    """Every JSON line of a metrics file (a missing file has none)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def of_type(
    records: Iterable[dict[str, Any]], kind: str, role: str | None = None, rank: int | None = None
) -> list[dict[str, Any]]:
    return [
        r
        for r in records
        if r.get("type") == kind
        and (role is None or r.get("role") == role)
        and (rank is None or r.get("rank") == rank)
    ]


def steps_of(
    records: Iterable[dict[str, Any]], role: str | None = None, rank: int | None = None
) -> list[int]:
    """The ``step`` of every iteration line (of one role/rank), in file order."""
    return [int(r["step"]) for r in of_type(records, "iter", role, rank)]


def losses_by_step(
    records: Iterable[dict[str, Any]], role: str, rank: int | None = None
) -> list[float]:
    """Losses of the iteration lines ordered by step (ties: file order)."""
    its = of_type(records, "iter", role, rank)
    return [float(r["loss"]) for r in sorted(its, key=lambda r: int(r["step"]))]


def mean(values: Sequence[float]) -> float:
    assert values, "no values"
    return sum(values) / len(values)


def assert_loss_decreases(losses: Sequence[float], *, factor: float = 0.6) -> None:
    """Mean of the last 10 losses below ``factor`` x the mean of the first 10."""
    assert len(losses) >= 20, f"only {len(losses)} losses"
    first, last = mean(losses[:10]), mean(losses[-10:])
    assert last < factor * first, (
        f"loss did not decrease enough: first 10 {first:.3f}, last 10 {last:.3f}"
    )


def wait_for_iterations(
    path: str | Path,
    n: int,
    *,
    procs: Sequence[subprocess.Popen[bytes]],
    deadline_s: float = 60.0,
    min_step: int = -1,
) -> list[dict[str, Any]]:
    """Poll the metrics file until it holds ``n`` iteration lines with step > ``min_step``.

    Fails at once if a process exits meanwhile, and after ``deadline_s`` seconds.
    """
    deadline = time.monotonic() + deadline_s
    while True:
        records = read_records(path)
        if sum(1 for s in steps_of(records) if s > min_step) >= n:
            return records
        exited = [(p.args, p.returncode) for p in procs if p.poll() is not None]
        assert not exited, f"a process exited before {n} iterations: {exited}"
        assert time.monotonic() < deadline, f"fewer than {n} iterations after {deadline_s}s"
        time.sleep(0.1)


# Processes ------------------------------------------------------------------------------------
def start(cmd: Sequence[str]) -> subprocess.Popen[bytes]:
    """One process in its own session (its own process group), like an agent's task."""
    return subprocess.Popen(list(cmd), env=ENV, start_new_session=True)


def start_job(cfg: TrainConfig) -> list[subprocess.Popen[bytes]]:
    """Every process of ``cfg``'s job (PS: the PSs first, then the workers; DDP: torchrun)."""
    return [start(cmd) for cmd in commands(cfg)]


def wait_all(procs: Sequence[subprocess.Popen[bytes]], timeout_s: float) -> list[int]:
    """Exit codes of all ``procs``; fails (after killing them) if any runs past ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    for p in procs:
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            kill_all(procs)
            raise AssertionError(f"still running after {timeout_s}s: {p.args!r}") from None
    return [int(p.returncode) for p in procs]


def kill_all(procs: Sequence[subprocess.Popen[bytes]]) -> None:
    """SIGKILL the process groups of ``procs`` (each started in its own session)."""
    for p in procs:
        if p.poll() is None:
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGKILL)
            with suppress(subprocess.TimeoutExpired):
                p.wait(timeout=10)


@contextmanager
def reap(procs: list[subprocess.Popen[bytes]]) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Kill whatever is left of ``procs`` (and their groups) when the block ends."""
    try:
        yield procs
    finally:
        kill_all(procs)


def torchrun_ranks(
    launcher: subprocess.Popen[bytes], world: int, deadline_s: float = 30.0
) -> dict[int, psutil.Process]:
    """torchrun's rank processes by their ``RANK`` environment variable."""
    deadline = time.monotonic() + deadline_s
    while True:
        ranks: dict[int, psutil.Process] = {}
        with suppress(psutil.Error):
            for child in psutil.Process(launcher.pid).children(recursive=True):
                with suppress(psutil.Error):
                    rank = child.environ().get("RANK")
                    if rank is not None and "mlsched.trainers" in " ".join(child.cmdline()):
                        ranks[int(rank)] = child
        if len(ranks) == world:
            return ranks
        assert time.monotonic() < deadline, f"torchrun started {len(ranks)} of {world} ranks"
        time.sleep(0.1)


# Models and checkpoints -----------------------------------------------------------------------
def num_params(cfg: TrainConfig) -> int:
    model = build_model(cfg.model, num_classes=cfg.num_classes, image_size=cfg.image_size)
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def ps_message_bytes(cfg: TrainConfig) -> int:
    """Bytes a PS worker sends (and receives) per iteration: one header + shard per PS."""
    return 4 * (cfg.num_ps * HEADER + num_params(cfg))


def ddp_ring_bytes(cfg: TrainConfig) -> float:
    w = cfg.num_workers
    return 2.0 * 4 * num_params(cfg) * (w - 1) / w


def checkpoint(cfg: TrainConfig) -> TrainState:
    state = load_latest(cfg.checkpoint_dir)
    assert state is not None, f"no checkpoint in {cfg.checkpoint_dir}"
    return state


def checkpoint_checksum(cfg: TrainConfig, state: TrainState) -> list[float]:
    """:func:`param_checksum` of the checkpoint's parameters (as a replica computes it)."""
    model = build_model(cfg.model, num_classes=cfg.num_classes, image_size=cfg.image_size)
    model.load_state_dict(state.model)
    return param_checksum(model)


def loss_at(cfg: TrainConfig, state: TrainState, index: int) -> float:
    """The loss of ``state``'s weights on mini-batch ``index`` of ``cfg``'s data stream."""
    trainee = build_trainee(cfg)
    restore(trainee.model, state, cfg=cfg)
    with torch.no_grad():
        x, y = trainee.batch(index, cfg.batch_size)
        return float(trainee.loss_fn(trainee.model(x), y))


def assert_iteration_fields(records: Iterable[dict[str, Any]], sent: float, recv: float) -> int:
    """Every iteration line has sane measurements; returns how many there are."""
    n = 0
    for r in of_type(records, "iter"):
        for key in ("step", "compute_time", "comm_time", "bytes_sent", "bytes_recv", "loss"):
            assert key in r, f"{key} missing from {r}"
        assert r["step"] >= 0
        assert 0 < r["compute_time"] < 10, r
        assert 0 < r["comm_time"] < 10, r
        assert r["bytes_sent"] == sent, r
        assert r["bytes_recv"] == recv, r
        assert torch.isfinite(torch.tensor(r["loss"])) and r["loss"] > 0, r
        n += 1
    assert n > 0, "no iteration lines"
    return n
