"""Ring-all-reduce training with DistributedDataParallel (gloo on CPU, NCCL on GPU).

Launched by torchrun (rank, world size and master address come from its environment, see
:mod:`mlsched.trainers.env`) or directly with explicit ``--rank``/``--num-workers``/
``--rendezvous``. Step ``s`` on rank ``r`` of ``W`` trains on batch ``s*W + r``.

Measurement: the papers' models are additive (compute + communication), so by default
gradients are all-reduced *inside* a DDP communication hook that runs synchronously and is
timed (spec 003: "measure with overlap off"); ``comm_time`` is the time spent in the hooks
plus the wait for the stop vote (:mod:`.vote`), ``compute_time`` the rest of the iteration. With
``overlap=True`` DDP's own asynchronous all-reduce is used and ``comm_time`` is only the
stop-vote wait (a lower bound).
"""

from __future__ import annotations

import logging
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from mlsched.core.train_config import TrainConfig
from mlsched.trainers.allreduce.replica import Replica
from mlsched.trainers.allreduce.vote import StopVote, TorchReducer
from mlsched.trainers.common import StopFlag, Trainee, resume, sgd
from mlsched.trainers.metrics import IterationStats, MetricsSink

__all__ = ["run_ddp"]

log = logging.getLogger(__name__)


class _HookTimer:
    def __init__(self, world: int) -> None:
        self.world = world
        self.seconds = 0.0


def _timed_allreduce(
    state: _HookTimer, bucket: dist.GradBucket
) -> torch.futures.Future[torch.Tensor]:
    buf = bucket.buffer()
    if buf.is_cuda:
        torch.cuda.synchronize(buf.device)
    t0 = time.perf_counter()
    dist.all_reduce(buf)
    buf.div_(state.world)
    if buf.is_cuda:
        torch.cuda.synchronize(buf.device)
    state.seconds += time.perf_counter() - t0
    fut: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    fut.set_result(buf)
    return fut


# DDP checks the hook's annotation object, not its string form (this module postpones
# annotations), so give it the class itself.
_timed_allreduce.__annotations__["bucket"] = dist.GradBucket
_timed_allreduce.__annotations__["return"] = torch.futures.Future[torch.Tensor]


def run_ddp(
    cfg: TrainConfig,
    trainee: Trainee,
    stop: StopFlag,
    sink: MetricsSink,
    stats: IterationStats,
    *,
    overlap: bool = False,
) -> int:
    """Train from the latest checkpoint to ``cfg.stop_step``; returns the final step."""
    rank, world = dist.get_rank(), dist.get_world_size()
    model = trainee.model
    opt = sgd(cfg, model.parameters())
    start, cursor = resume(cfg, model, opt)
    device_ids = [trainee.device.index] if trainee.device.type == "cuda" else None
    ddp = DistributedDataParallel(model, device_ids=device_ids)
    timer = _HookTimer(world)
    if not overlap:
        ddp.register_comm_hook(timer, _timed_allreduce)
    replica = Replica.of(
        cfg, sink, stats, model, rank=rank, world=world, start=start, cursor=cursor
    )
    vote = StopVote(stop, TorchReducer(trainee.device))
    step = start
    while step < cfg.stop_step:
        if vote.should_stop():
            break
        timer.seconds = 0.0
        t1 = time.perf_counter()
        ddp.train()
        x, y = trainee.batch(replica.batch_index(step), cfg.batch_size)
        opt.zero_grad(set_to_none=True)
        loss = trainee.loss_fn(ddp(x), y)
        loss.backward()
        opt.step()
        loss_value = float(loss.detach())  # synchronises a GPU stream
        total = time.perf_counter() - t1
        replica.record(
            step, max(0.0, total - timer.seconds), timer.seconds + vote.seconds, loss_value
        )
        step += 1
        replica.after_step(step, model, opt, {"backend": "ddp"})
    replica.finish(vote, model, opt, step, {"backend": "ddp"})
    dist.barrier()
    return step
