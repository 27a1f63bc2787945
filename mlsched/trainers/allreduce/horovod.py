"""Ring-all-reduce training with Horovod (used when ``horovod.torch`` imports).

Launched by ``horovodrun -np W ... python -m mlsched.trainers --arch allreduce --backend
horovod ...``. Gradients are averaged with one grouped all-reduce after the backward pass,
timed as ``comm_time`` (additive, like the DDP trainer's default).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import torch

from mlsched.core.train_config import TrainConfig
from mlsched.trainers.allreduce.replica import Replica
from mlsched.trainers.allreduce.vote import CallbackReducer, StopVote
from mlsched.trainers.common import StopFlag, Trainee, resume, sgd
from mlsched.trainers.metrics import IterationStats, MetricsSink

__all__ = ["horovod_available", "run_horovod"]

log = logging.getLogger(__name__)


def horovod_available() -> bool:
    try:
        import horovod.torch  # noqa: F401
    except Exception:  # ImportError, or a build without the torch extension
        return False
    return True


def run_horovod(
    cfg: TrainConfig, trainee: Trainee, stop: StopFlag, sink: MetricsSink, stats: IterationStats
) -> int:
    import horovod.torch as hvd

    hvd_mod: Any = hvd
    rank, world = hvd_mod.rank(), hvd_mod.size()
    model = trainee.model
    opt = sgd(cfg, model.parameters())
    start, cursor = resume(cfg, model, opt)
    hvd_mod.broadcast_parameters(model.state_dict(), root_rank=0)
    params = [p for p in model.parameters() if p.requires_grad]
    replica = Replica.of(
        cfg, sink, stats, model, rank=rank, world=world, start=start, cursor=cursor
    )
    vote = StopVote(
        stop,
        CallbackReducer(
            lambda v: hvd_mod.allreduce_async(torch.tensor([v]), op=hvd_mod.Max, name="stop"),
            lambda handle: float(hvd_mod.synchronize(handle)[0]),
        ),
    )
    step = start
    while step < cfg.stop_step:
        if vote.should_stop():
            break
        t1 = time.perf_counter()
        model.train()
        x, y = trainee.batch(replica.batch_index(step), cfg.batch_size)
        opt.zero_grad(set_to_none=True)
        loss = trainee.loss_fn(model(x), y)
        loss.backward()
        if trainee.device.type == "cuda":
            torch.cuda.synchronize(trainee.device)
        t2 = time.perf_counter()
        grads = [p.grad for p in params if p.grad is not None]
        reduced = hvd_mod.grouped_allreduce(grads, op=hvd_mod.Average, name="grads")
        for g, r in zip(grads, reduced, strict=True):
            g.copy_(r)
        t3 = time.perf_counter()
        opt.step()
        loss_value = float(loss.detach())
        t4 = time.perf_counter()
        replica.record(step, (t2 - t1) + (t4 - t3), (t3 - t2) + vote.seconds, loss_value)
        step += 1
        replica.after_step(step, model, opt, {"backend": "horovod"})
    replica.finish(vote, model, opt, step, {"backend": "horovod"})
    hvd_mod.allreduce(torch.zeros(1), name="done")  # nobody exits before the checkpoint
    return step
