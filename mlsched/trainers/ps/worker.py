"""A parameter-server worker: pull parameters, compute a gradient, push it to every PS.

Each iteration is timed in two parts, matching the runtime models: ``compute_time``
(forward, backward, flattening the gradient) and ``comm_time`` (push to and pull from all
PSs, including the PSs' update, and copying the new parameters in).
"""

from __future__ import annotations

import logging
import time

import torch
import torch.distributed as dist

from mlsched.core.train_config import TrainConfig
from mlsched.trainers.checkpoint import Periodic, load_latest, save
from mlsched.trainers.common import StopFlag, Trainee, restore, snapshot
from mlsched.trainers.metrics import IterationStats, MetricsSink, record_iteration
from mlsched.trainers.ps.layout import FlatLayout
from mlsched.trainers.ps.protocol import (
    CKPT_FLAG,
    GOODBYE,
    HEADER,
    PUSH,
    TAG_CKPT,
    TAG_GATHER,
    TAG_PROTOCOL,
    make_message,
)

__all__ = ["run_worker"]

log = logging.getLogger(__name__)


def run_worker(
    cfg: TrainConfig, trainee: Trainee, stop: StopFlag, sink: MetricsSink, stats: IterationStats
) -> int:
    """Train until PS 0 stops granting steps; returns the last step this worker saw."""
    k_ps = cfg.num_ps
    model = trainee.model
    layout = FlatLayout.of(model, k_ps)
    state = load_latest(cfg.checkpoint_dir)
    start, cursor = 0, 0
    if state is not None:
        restore(model, state, cfg=cfg)  # buffers (batch-norm statistics) and parameters
        start, cursor = state.step, state.data_cursor
    bounds = [layout.bounds(k) for k in range(k_ps)]
    inboxes = [make_message(hi - lo) for lo, hi in bounds]
    pushes = [make_message(hi - lo) for lo, hi in bounds]
    params = [p for _, p in trainee.named_params()]
    flat = torch.zeros(layout.total)

    def pull() -> tuple[bool, int, int]:
        """Receive every PS's reply; returns (granted, ticket, step) from PS 0."""
        for k, (lo, hi) in enumerate(bounds):
            dist.recv(inboxes[k], src=k, tag=TAG_PROTOCOL)
            flat[lo:hi] = inboxes[k][HEADER:]
            if inboxes[k][2] > 0:
                stop.set(f"requested by PS {k}")
        torch.nn.utils.vector_to_parameters(flat.to(trainee.device), params)
        head = inboxes[0]
        return bool(head[0] > 0), int(head[1]), int(head[3])

    granted, ticket, step = pull()
    sync_round = step
    periodic = (
        Periodic(cfg.checkpoint_every_s, cfg.checkpoint_every_steps, step)
        if cfg.rank == 0
        else None
    )
    while granted:
        checkpoint = periodic is not None and periodic.due(step)
        this_step = ticket if cfg.mode == "async" else sync_round
        if cfg.mode == "async":
            index = cursor + (ticket - start)
        else:
            index = cursor + (sync_round - start) * cfg.num_workers + cfg.rank
        t0 = time.perf_counter()
        model.train()
        x, y = trainee.batch(index, cfg.batch_size)
        model.zero_grad(set_to_none=True)
        loss = trainee.loss_fn(model(x), y)
        loss.backward()
        grad = torch.cat([_grad(p).reshape(-1) for p in params]).float().cpu()
        loss_value = float(loss.detach())
        t1 = time.perf_counter()
        handles = []
        for k, (lo, hi) in enumerate(bounds):
            msg = pushes[k]
            msg[0], msg[1], msg[2], msg[3] = PUSH, float(index), float(bool(stop)), loss_value
            msg[CKPT_FLAG] = 1.0 if checkpoint else 0.0
            msg[HEADER:] = grad[lo:hi]
            handles.append(dist.isend(msg, k, tag=TAG_PROTOCOL))
        granted, ticket, step = pull()
        for h in handles:
            if h is not None:
                h.wait()
        t2 = time.perf_counter()
        sent = sum(m.numel() for m in pushes) * 4
        recv = sum(m.numel() for m in inboxes) * 4
        record_iteration(
            stats,
            sink,
            step=this_step,
            compute_s=t1 - t0,
            comm_s=t2 - t1,
            sent=sent,
            recv=recv,
            loss=loss_value,
            batch=cfg.batch_size,
        )
        sync_round += 1
        if checkpoint and periodic is not None:
            _save_periodic(cfg, trainee, layout, bounds, sink, step, start, cursor)
            periodic.done(step)
        if cfg.log_every and stats.steps % cfg.log_every == 0:
            log.info("[worker %d] step %d loss %.4f", cfg.rank, step, loss_value)

    for k, msg in enumerate(pushes):
        msg.zero_()
        msg[0] = GOODBYE
        msg[2] = float(bool(stop))
        dist.send(msg, k, tag=TAG_PROTOCOL)
    if cfg.rank == 0:
        buffers = [b for _, b in model.named_buffers()]
        if buffers:
            flat_buffers = torch.cat([b.detach().reshape(-1).float().cpu() for b in buffers])
            dist.send(flat_buffers, 0, tag=TAG_GATHER)
    return step


def _save_periodic(
    cfg: TrainConfig,
    trainee: Trainee,
    layout: FlatLayout,
    bounds: list[tuple[int, int]],
    sink: MetricsSink,
    step: int,
    start: int,
    cursor: int,
) -> None:
    """Worker 0, holding the parameters PS 0 reported at ``step``, gathers the momentum the
    PSs sent after that reply and checkpoints. Sync: every shard is at ``step``. Async:
    shards apply pushes as they come, so one may be a few updates ahead of PS 0; the next
    generation resumes at ``step``, as asynchronous training tolerates."""
    momentum = torch.zeros(layout.total)
    for k, (lo, hi) in enumerate(bounds):
        buf = torch.zeros(hi - lo)
        dist.recv(buf, src=k, tag=TAG_CKPT)
        momentum[lo:hi] = buf
    done = cursor + (step - start) * (1 if cfg.mode == "async" else cfg.num_workers)
    state = snapshot(
        cfg,
        trainee.model,
        layout.unflatten(momentum),
        step,
        done,
        {"num_workers": cfg.num_workers, "num_ps": cfg.num_ps, "periodic": True},
    )
    save(cfg.checkpoint_dir, state, keep=cfg.checkpoint_keep)
    sink.emit({"type": "event", "event": "checkpoint", "step": step, "data_cursor": done})


def _grad(p: torch.Tensor) -> torch.Tensor:
    # A parameter unused in this forward pass has no gradient: it contributes zeros.
    return p.grad if p.grad is not None else torch.zeros_like(p)
