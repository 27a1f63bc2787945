"""A parameter server: owns one flat shard of the parameters and its SGD state.

async (spec 001): apply each worker's gradient as it arrives and reply with the updated shard;
PS 0 also hands out tickets (global steps) until the stop step (see :mod:`.protocol`).
sync (specs 000/002): each round, wait for every worker's gradient, apply their mean, reply
to all. Both end when every worker has said goodbye; then the shards, the momentum and
worker 0's buffers (batch-norm statistics) are gathered on PS 0, which writes the checkpoint.
Periodic checkpoints in between are worker 0's: on its request each PS sends it the shard's
momentum right after the reply that carried the updated parameters.
"""

from __future__ import annotations

import logging
import time

import torch
import torch.distributed as dist

from mlsched.core.train_config import TrainConfig
from mlsched.trainers.checkpoint import load_latest, save
from mlsched.trainers.common import StopFlag, Trainee, sgd, snapshot
from mlsched.trainers.metrics import MetricsSink
from mlsched.trainers.ps.layout import FlatLayout
from mlsched.trainers.ps.protocol import (
    CKPT_FLAG,
    GOODBYE,
    HEADER,
    TAG_CKPT,
    TAG_GATHER,
    TAG_PROTOCOL,
    make_message,
)

__all__ = ["run_ps"]

log = logging.getLogger(__name__)


class _Shard:
    def __init__(self, cfg: TrainConfig, trainee: Trainee, layout: FlatLayout) -> None:
        self.lo, self.hi = layout.bounds(cfg.rank)
        state = load_latest(cfg.checkpoint_dir)
        source: dict[str, torch.Tensor] = (
            state.model if state is not None else dict(trainee.model.named_parameters())
        )
        self.start = state.step if state is not None else 0
        self.cursor = state.data_cursor if state is not None else 0
        self.param = torch.nn.Parameter(layout.flatten(source)[self.lo : self.hi].clone())
        self.opt = sgd(cfg, [self.param])
        if state is not None and state.momentum:
            flat = layout.flatten(
                {
                    n: state.momentum.get(n, torch.zeros(s))
                    for n, s in zip(layout.names, layout.shapes, strict=True)
                }
            )
            self.opt.state[self.param]["momentum_buffer"] = flat[self.lo : self.hi].clone()

    def apply(self, grad: torch.Tensor) -> None:
        self.param.grad = grad
        self.opt.step()

    def momentum(self) -> torch.Tensor:
        buf = self.opt.state.get(self.param, {}).get("momentum_buffer")
        return buf if buf is not None else torch.zeros_like(self.param.data)


def run_ps(cfg: TrainConfig, trainee: Trainee, stop: StopFlag, sink: MetricsSink) -> int:
    """Serve until every worker says goodbye; returns the final global step."""
    k_ps, n_w = cfg.num_ps, cfg.num_workers
    layout = FlatLayout.of(trainee.model, k_ps)
    shard = _Shard(cfg, trainee, layout)
    size = shard.hi - shard.lo
    workers = [k_ps + w for w in range(n_w)]
    head = cfg.rank == 0
    step = shard.start
    next_ticket = shard.start
    out = make_message(size)
    inbox = make_message(size)

    def reply_header(cont: bool, ticket: int) -> None:
        out[0] = 1.0 if cont else 0.0
        out[1] = float(ticket)
        out[2] = 1.0 if stop else 0.0
        out[3] = float(step)
        out[HEADER:] = shard.param.data

    def grant() -> tuple[bool, int]:
        nonlocal next_ticket
        if head and not stop and next_ticket < cfg.stop_step:
            next_ticket += 1
            return True, next_ticket - 1
        return False, -1

    sink.emit({"type": "event", "event": "start", "step": step, "shard": [shard.lo, shard.hi]})
    # Initial pull: every worker starts from the shard's current parameters.
    for w in workers:
        if cfg.mode == "async":
            reply_header(*grant())
        else:
            reply_header(head and not stop and step < cfg.stop_step, step)
        dist.send(out, w, tag=TAG_PROTOCOL)
    # Async: when each worker was last answered (it owes a push or a goodbye). A receive from
    # any source returns as long as *one* worker pushes, so it alone would never notice a
    # lost worker: check the others' deadlines after every message.
    owed = dict.fromkeys(workers, time.monotonic())
    momentum_out = _MomentumOut(k_ps)

    goodbyes = 0
    while goodbyes < n_w:
        if cfg.mode == "async":
            src = dist.recv(inbox, tag=TAG_PROTOCOL)
            owed.pop(src, None)
            _check_owed(owed, cfg.timeout_s)
            if inbox[2] > 0:
                stop.set(f"requested by worker rank {src}")
            if inbox[0] == GOODBYE:
                goodbyes += 1
                continue
            t0 = time.perf_counter()
            shard.apply(inbox[HEADER:].clone())
            update_s = time.perf_counter() - t0
            step += 1
            reply_header(*grant())
            dist.send(out, src, tag=TAG_PROTOCOL)
            if src == k_ps and inbox[CKPT_FLAG] > 0:  # worker 0 checkpoints this state
                momentum_out.send(shard.momentum())
            owed[src] = time.monotonic()
        else:
            total = torch.zeros(size)
            pushes = 0
            checkpoint = False
            for w in workers:
                dist.recv(inbox, src=w, tag=TAG_PROTOCOL)
                if inbox[2] > 0:
                    stop.set(f"requested by worker rank {w}")
                checkpoint = checkpoint or (w == k_ps and bool(inbox[CKPT_FLAG] > 0))
                if inbox[0] == GOODBYE:
                    goodbyes += 1
                else:
                    total += inbox[HEADER:]
                    pushes += 1
            if pushes == 0:
                break
            if pushes != n_w:
                raise RuntimeError(
                    f"sync round at step {step}: {pushes} of {n_w} workers pushed, the others left"
                )
            t0 = time.perf_counter()
            shard.apply(total / n_w)
            update_s = time.perf_counter() - t0
            step += 1
            reply_header(head and not stop and step < cfg.stop_step, step)
            handles = [dist.isend(out, w, tag=TAG_PROTOCOL) for w in workers]
            for h in handles:
                if h is not None:
                    h.wait()
            if checkpoint:  # worker 0 checkpoints the state after this round
                momentum_out.send(shard.momentum())
        sink.emit({"type": "ps_update", "step": step, "update_time": update_s})

    momentum_out.wait()
    cursor = _gather_and_save(cfg, trainee, layout, shard, step)
    event: dict[str, object] = {"type": "event", "event": "checkpoint" if head else "stop"}
    sink.emit({**event, "step": step, "data_cursor": cursor})
    return step


class _MomentumOut:
    """Sends a copy of the shard's momentum to worker 0 without waiting for it to be taken.

    A blocking send could deadlock: worker 0 takes the momentum only after every PS's reply,
    and another PS may be waiting on a worker that waits on this PS. The copy is sent
    asynchronously; worker 0 has taken it before it can ask again, so each send completes
    before the next one starts."""

    def __init__(self, worker0: int) -> None:
        self.worker0 = worker0
        self.pending: tuple[torch.Tensor, dist.Work | None] | None = None

    def send(self, momentum: torch.Tensor) -> None:
        self.wait()
        copy = momentum.detach().clone()
        self.pending = (copy, dist.isend(copy, self.worker0, tag=TAG_CKPT))

    def wait(self) -> None:
        if self.pending is not None and self.pending[1] is not None:
            self.pending[1].wait()
        self.pending = None


def _check_owed(owed: dict[int, float], timeout_s: float) -> None:
    now = time.monotonic()
    for rank, since in owed.items():
        if now - since > timeout_s:
            raise RuntimeError(
                f"worker rank {rank} sent nothing for {now - since:.1f}s "
                f"(timeout {timeout_s:g}s): lost peer"
            )


def _gather_and_save(
    cfg: TrainConfig, trainee: Trainee, layout: FlatLayout, shard: _Shard, step: int
) -> int:
    """Shards and momentum go to PS 0, with worker 0's buffers; PS 0 writes the checkpoint.
    Returns the data cursor at ``step``."""
    # Async: one mini-batch per step (ticket); sync: one per worker per step.
    cursor = shard.cursor + (step - shard.start) * (1 if cfg.mode == "async" else cfg.num_workers)
    if cfg.rank != 0:
        dist.send(torch.cat([shard.param.data, shard.momentum()]), 0, tag=TAG_GATHER)
        return cursor
    params = torch.zeros(layout.total)
    momentum = torch.zeros(layout.total)
    params[shard.lo : shard.hi] = shard.param.data
    momentum[shard.lo : shard.hi] = shard.momentum()
    for k in range(1, cfg.num_ps):
        lo, hi = layout.bounds(k)
        buf = torch.zeros(2 * (hi - lo))
        dist.recv(buf, src=k, tag=TAG_GATHER)
        params[lo:hi] = buf[: hi - lo]
        momentum[lo:hi] = buf[hi - lo :]
    model = trainee.model
    buffers = [(n, b) for n, b in model.named_buffers()]
    if buffers:
        flat = torch.zeros(sum(b.numel() for _, b in buffers))
        dist.recv(flat, src=cfg.num_ps, tag=TAG_GATHER)  # worker 0
        offset = 0
        with torch.no_grad():
            for _, b in buffers:
                b.copy_(flat[offset : offset + b.numel()].view_as(b).to(b.dtype))
                offset += b.numel()
    named = layout.unflatten(params)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name in named:
                p.copy_(named[name].to(p.device))
    state = snapshot(
        cfg,
        model,
        layout.unflatten(momentum),
        step,
        cursor,
        {"num_workers": cfg.num_workers, "num_ps": cfg.num_ps},
    )
    save(cfg.checkpoint_dir, state, keep=cfg.checkpoint_keep)
    return cursor
