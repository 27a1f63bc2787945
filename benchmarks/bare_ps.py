"""A bare parameter-server loop: the baseline the instrumented PS trainer is compared
against in :mod:`benchmarks.trainer_overhead`.

Hand-written with gloo point-to-point messages and the *same message pattern* as
:mod:`mlsched.trainers.ps`: every message is one flat fp32 tensor, a 4-float header then a
shard; a worker ``isend``\\ s its flattened gradient to every PS and ``recv``\\ s every PS's
updated shard; async PS 0 replies to whichever worker pushed (``recv`` from any source) and
hands out steps until the stop step; sync PSs wait for every worker, apply the mean and
reply to all. What is left out is everything the trainer adds around that: the metrics sink,
telemetry, stop requests, logging, the checkpoint.

The same model and synthetic batches as the trainer (async: batch ``ticket``; sync: batch
``round*W + w``), one torch thread per process. Timing: ``perf_counter`` around each worker
iteration and ``time.time()`` at its end, written once per worker after the loop.

``python -m benchmarks.bare_ps --mode async --workers 2 --ps 1 --steps 80 --out DIR``
starts the ``ps + workers`` processes itself (``--role`` is then set for each) and waits.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

from benchmarks.bare_ddp import add_common_args, setup, sgd, write_timings

__all__ = ["main"]

HEADER = 4


def _bounds(total: int, k: int, shards: int) -> tuple[int, int]:
    base, extra = divmod(total, shards)
    start = k * base + min(k, extra)
    return start, start + base + (1 if k < extra else 0)


def _ps(args: argparse.Namespace) -> None:
    s = setup(args)
    params = [p for p in s.model.parameters() if p.requires_grad]
    total = sum(p.numel() for p in params)
    lo, hi = _bounds(total, args.rank, args.ps)
    flat = torch.nn.utils.parameters_to_vector(params).detach()
    shard = torch.nn.Parameter(flat[lo:hi].clone())
    opt = sgd(args, [shard])
    size = hi - lo
    workers = [args.ps + w for w in range(args.workers)]
    out = torch.zeros(HEADER + size)
    inbox = torch.zeros(HEADER + size)
    head = args.rank == 0
    step = 0
    next_ticket = 0

    def reply(cont: bool, ticket: int) -> None:
        out[0], out[1], out[2], out[3] = float(cont), float(ticket), 0.0, float(step)
        out[HEADER:] = shard.data

    def grant() -> tuple[bool, int]:
        nonlocal next_ticket
        if head and next_ticket < args.steps:
            next_ticket += 1
            return True, next_ticket - 1
        return False, -1

    for w in workers:
        if args.mode == "async":
            reply(*grant())
        else:
            reply(head and step < args.steps, step)
        dist.send(out, w)
    goodbyes = 0
    while goodbyes < args.workers:
        if args.mode == "async":
            src = dist.recv(inbox)
            if inbox[0] == 2.0:
                goodbyes += 1
                continue
            shard.grad = inbox[HEADER:].clone()
            opt.step()
            step += 1
            reply(*grant())
            dist.send(out, src)
        else:
            acc = torch.zeros(size)
            pushes = 0
            for w in workers:
                dist.recv(inbox, src=w)
                if inbox[0] == 2.0:
                    goodbyes += 1
                else:
                    acc += inbox[HEADER:]
                    pushes += 1
            if pushes == 0:
                break
            shard.grad = acc / args.workers
            opt.step()
            step += 1
            reply(head and step < args.steps, step)
            handles = [dist.isend(out, w) for w in workers]
            for h in handles:
                if h is not None:
                    h.wait()


def _worker(args: argparse.Namespace) -> None:
    s = setup(args)
    model = s.model
    params = [p for p in model.parameters() if p.requires_grad]
    total = sum(p.numel() for p in params)
    bounds = [_bounds(total, k, args.ps) for k in range(args.ps)]
    inboxes = [torch.zeros(HEADER + hi - lo) for lo, hi in bounds]
    pushes = [torch.zeros(HEADER + hi - lo) for lo, hi in bounds]
    flat = torch.zeros(total)

    def pull() -> tuple[bool, int]:
        for k, (lo, hi) in enumerate(bounds):
            dist.recv(inboxes[k], src=k)
            flat[lo:hi] = inboxes[k][HEADER:]
        torch.nn.utils.vector_to_parameters(flat, params)
        return bool(inboxes[0][0] > 0), int(inboxes[0][1])

    iter_s: list[float] = []
    t_end: list[float] = []
    losses: list[torch.Tensor] = []
    granted, ticket = pull()
    rnd = 0
    model.train()
    while granted:
        t0 = time.perf_counter()
        index = ticket if args.mode == "async" else rnd * args.workers + args.rank
        x, y = s.batch(index, args.batch_size)
        model.zero_grad(set_to_none=True)
        loss = s.loss_fn(model(x), y)
        loss.backward()
        grad = torch.cat([p.grad.reshape(-1) for p in params])  # type: ignore[union-attr]
        handles = []
        for k, (lo, hi) in enumerate(bounds):
            msg = pushes[k]
            msg[0], msg[1] = 1.0, float(index)
            msg[HEADER:] = grad[lo:hi]
            handles.append(dist.isend(msg, k))
        granted, ticket = pull()
        for h in handles:
            if h is not None:
                h.wait()
        iter_s.append(time.perf_counter() - t0)
        t_end.append(time.time())
        losses.append(loss.detach())
        rnd += 1
    for k, msg in enumerate(pushes):
        msg.zero_()
        msg[0] = 2.0
        dist.send(msg, k)
    write_timings(
        args.out,
        f"bare-ps-{args.mode}-worker{args.rank}",
        iter_s,
        t_end,
        [float(v) for v in losses],
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _launch(args: argparse.Namespace, argv: list[str]) -> int:
    port = _free_port()
    base = [sys.executable, "-m", "benchmarks.bare_ps", *argv, "--port", str(port)]
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    cmds = [[*base, "--role", "ps", "--rank", str(k)] for k in range(args.ps)]
    cmds += [[*base, "--role", "worker", "--rank", str(w)] for w in range(args.workers)]
    procs = [subprocess.Popen(c, env=env) for c in cmds]
    codes = [p.wait() for p in procs]
    return 0 if all(c == 0 for c in codes) else 1


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(prog="python -m benchmarks.bare_ps", description=__doc__)
    add_common_args(p)
    p.add_argument("--mode", choices=["async", "sync"], default="async")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--ps", type=int, default=1)
    p.add_argument("--role", choices=["ps", "worker"], default=None)
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--port", type=int, default=0)
    args = p.parse_args(argv)
    if args.role is None:
        return _launch(args, argv)
    rank = args.rank if args.role == "ps" else args.ps + args.rank
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{args.port}",
        rank=rank,
        world_size=args.ps + args.workers,
        timeout=timedelta(seconds=120),
    )
    try:
        if args.role == "ps":
            _ps(args)
        else:
            _worker(args)
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
