"""A bare data-parallel training loop: the baseline the instrumented all-reduce trainers are
compared against in :mod:`benchmarks.trainer_overhead`.

Plain PyTorch, the way a user would write it: ``DistributedDataParallel`` with its default
bucketed all-reduce overlapping the backward pass (or, with ``--horovod``, Horovod's
``DistributedOptimizer``, which overlaps the same way), no per-step stop flag, no metrics
sink, no telemetry thread. ``--sync-hook`` replaces DDP's all-reduce by a communication
hook that all-reduces each bucket synchronously, untimed: the communication pattern of the
DDP trainer's default measuring mode, so that comparing the two isolates what the
trainer's instrumentation costs. It trains the same model on the same synthetic batches as the
trainers (batch ``s*W + r`` on rank ``r`` at step ``s``) with one torch thread per process.

The only measurement is ``time.perf_counter()`` around each iteration and ``time.time()``
at its end, kept in memory and written as one JSON file per rank after the loop::

    python -m torch.distributed.run --nproc-per-node 2 -m benchmarks.bare_ddp \\
        --model resnet20 --batch-size 32 --image-size 32 --steps 40 --out DIR
    horovodrun -np 2 -H localhost:2 --gloo python -m benchmarks.bare_ddp --horovod ...
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

__all__ = ["BareSetup", "add_common_args", "main", "setup", "write_timings"]


class BareSetup:
    """Model, data and optimizer built exactly as the trainers build them."""

    def __init__(self, args: argparse.Namespace) -> None:
        from mlsched.trainers.data import make_dataset
        from mlsched.trainers.models import build_model

        torch.set_num_threads(args.threads)
        torch.manual_seed(args.seed)  # same initial weights in every process
        self.model: nn.Module = build_model(
            args.model, num_classes=args.num_classes, image_size=args.image_size
        )
        self.dataset = make_dataset(
            "synthetic",
            seed=args.seed,
            num_samples=args.num_samples,
            image_size=args.image_size,
            num_classes=args.num_classes,
        )
        self.loss_fn = nn.CrossEntropyLoss()

    def batch(self, index: int, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = self.dataset.batch(index, batch_size)
        return x, y


def setup(args: argparse.Namespace) -> BareSetup:
    return BareSetup(args)


def sgd(args: argparse.Namespace, params: Any) -> torch.optim.SGD:
    return torch.optim.SGD(params, lr=args.lr, momentum=0.9, weight_decay=5e-4)


def add_common_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="resnet20")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--num-samples", type=int, default=50_000)
    p.add_argument("--num-classes", type=int, default=10)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=40, help="iterations per rank/worker")
    p.add_argument("--out", required=True, help="directory for the per-rank timing files")


def write_timings(
    out: str, name: str, iter_s: list[float], t_end: list[float], losses: list[float]
) -> None:
    Path(out).mkdir(parents=True, exist_ok=True)
    doc = {"iter_s": iter_s, "t_end": t_end, "first_loss": losses[0], "last_loss": losses[-1]}
    (Path(out) / f"{name}.json").write_text(json.dumps(doc))


def _run_ddp(args: argparse.Namespace) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    s = setup(args)
    ddp = DistributedDataParallel(s.model)  # default: bucketed all-reduce overlapping backward
    if args.sync_hook:
        ddp.register_comm_hook(world, _sync_allreduce)
    opt = sgd(args, ddp.parameters())
    ddp.train()
    iter_s: list[float] = []
    t_end: list[float] = []
    losses: list[torch.Tensor] = []
    for step in range(args.steps):
        t0 = time.perf_counter()
        x, y = s.batch(step * world + rank, args.batch_size)
        opt.zero_grad(set_to_none=True)
        loss = s.loss_fn(ddp(x), y)
        loss.backward()
        opt.step()
        iter_s.append(time.perf_counter() - t0)
        t_end.append(time.time())
        losses.append(loss.detach())
    write_timings(args.out, f"bare-ddp-rank{rank}", iter_s, t_end, [float(v) for v in losses])
    dist.barrier()
    dist.destroy_process_group()


def _sync_allreduce(
    world: int, bucket: torch.distributed.GradBucket
) -> torch.futures.Future[torch.Tensor]:
    buf = bucket.buffer()
    torch.distributed.all_reduce(buf)
    buf.div_(world)
    fut: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    fut.set_result(buf)
    return fut


# DDP compares the hook's annotations with the objects (this module postpones annotations).
_sync_allreduce.__annotations__.update(
    bucket=torch.distributed.GradBucket, world=int, **{"return": torch.futures.Future[torch.Tensor]}
)


def _run_horovod(args: argparse.Namespace) -> None:
    import horovod.torch as hvd

    hvd.init()
    rank, world = hvd.rank(), hvd.size()
    s = setup(args)
    opt = hvd.DistributedOptimizer(
        sgd(args, s.model.parameters()), named_parameters=s.model.named_parameters()
    )
    hvd.broadcast_parameters(s.model.state_dict(), root_rank=0)
    s.model.train()
    iter_s: list[float] = []
    t_end: list[float] = []
    losses: list[torch.Tensor] = []
    for step in range(args.steps):
        t0 = time.perf_counter()
        x, y = s.batch(step * world + rank, args.batch_size)
        opt.zero_grad()
        loss = s.loss_fn(s.model(x), y)
        loss.backward()
        opt.step()
        iter_s.append(time.perf_counter() - t0)
        t_end.append(time.time())
        losses.append(loss.detach())
    write_timings(args.out, f"bare-horovod-rank{rank}", iter_s, t_end, [float(v) for v in losses])
    hvd.allreduce(torch.zeros(1), name="done")
    hvd.shutdown()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bare_ddp", description=__doc__)
    add_common_args(p)
    p.add_argument("--horovod", action="store_true", help="Horovod instead of DDP")
    p.add_argument(
        "--sync-hook",
        action="store_true",
        help="all-reduce each bucket synchronously in a comm hook (no overlap)",
    )
    args = p.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    if args.horovod:
        _run_horovod(args)
    else:
        _run_ddp(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
