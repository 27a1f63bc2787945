"""Run one process of a training job: process group, sink, telemetry, role, summary.

Failures are reported, not hung on: every collective and point-to-point operation runs
under ``timeout_s``, a lost peer surfaces as a communication error, and the process exits 1
with one clear line on stderr and an ``error`` event in the metrics sink.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable

import torch
import torch.distributed as dist

from mlsched.core.train_config import Backend, Role, TrainConfig
from mlsched.trainers import env
from mlsched.trainers.common import StopFlag, build_trainee, timeout
from mlsched.trainers.metrics import IterationStats, MetricsSink
from mlsched.trainers.rendezvous import rendezvous_store
from mlsched.trainers.telemetry import TelemetrySampler

__all__ = ["param_checksum", "run"]

log = logging.getLogger(__name__)


def _init_process_group(cfg: TrainConfig) -> None:
    if cfg.arch == "allreduce" and env.under_torchrun():
        backend = "nccl" if cfg.device != "cpu" and _cuda() else "gloo"
        dist.init_process_group(backend, timeout=timeout(cfg))
        return
    host, port = cfg.master
    backend = "gloo"
    if cfg.arch == "allreduce" and cfg.device != "cpu" and _cuda():
        backend = "nccl"
    store = rendezvous_store(
        host,
        port,
        world_size=cfg.world_size,
        is_master=cfg.global_rank == 0,
        timeout=timeout(cfg),
    )
    dist.init_process_group(
        backend, store=store, rank=cfg.global_rank, world_size=cfg.world_size, timeout=timeout(cfg)
    )


def _cuda() -> bool:
    return torch.cuda.is_available()


def _role_name(cfg: TrainConfig) -> tuple[str, int]:
    if cfg.arch == "allreduce":
        if cfg.backend is Backend.DDP and env.under_torchrun():
            return "rank", env.rank()
        if cfg.backend is Backend.HOROVOD and env.horovod_rank() is not None:
            return "rank", env.horovod_rank() or 0
        return "rank", cfg.rank
    return cfg.role.value, cfg.rank


def param_checksum(model: torch.nn.Module) -> list[float]:
    """(sum, sum of squares) of all parameters in float64: equal replicas give equal values."""
    with torch.no_grad():
        flat = torch.cat([p.detach().reshape(-1).double().cpu() for p in model.parameters()])
    return [float(flat.sum()), float((flat * flat).sum())]


def run(cfg: TrainConfig) -> int:
    role, rank = _role_name(cfg)
    # Unique across the job: PS and worker indices overlap, the global rank does not.
    if cfg.arch == "allreduce" and cfg.device != "cpu" and _cuda():
        torch.cuda.set_device(env.gpu_local_rank())
    sink = MetricsSink(cfg.metrics, static={"job": cfg.job_id, "role": role, "rank": rank})
    stop = StopFlag().install().watch_parent()
    stats = IterationStats(batch_size=cfg.batch_size)
    sampler: TelemetrySampler | None = None
    shutdown: Callable[[], None] | None = None
    t_start = time.time()
    try:
        trainee = build_trainee(cfg)
        sampler = TelemetrySampler(sink, gpu_index=trainee.device.index).start()
        if cfg.arch == "allreduce" and cfg.backend is Backend.HOROVOD:
            from mlsched.trainers.allreduce.horovod import horovod_available, run_horovod

            if not horovod_available():
                raise RuntimeError(
                    "--backend horovod: horovod.torch does not import (run `make horovod`)"
                )
            import horovod.torch as hvd

            hvd.init()
            shutdown = hvd.shutdown  # explicit: the trainer leaves without atexit handlers
            step = run_horovod(cfg, trainee, stop, sink, stats)
        else:
            _init_process_group(cfg)
            if cfg.arch == "allreduce":
                from mlsched.trainers.allreduce.ddp import run_ddp

                step = run_ddp(cfg, trainee, stop, sink, stats, overlap=cfg.overlap)
            elif cfg.role is Role.PS:
                from mlsched.trainers.ps.server import run_ps

                step = run_ps(cfg, trainee, stop, sink)
            else:
                from mlsched.trainers.ps.worker import run_worker

                step = run_worker(cfg, trainee, stop, sink, stats)
        summary = stats.summary()
        summary.update(
            final_step=step, stopped_by=stop.reason or "stop_step", process_s=time.time() - t_start
        )
        if role != "ps":
            summary["param_checksum"] = param_checksum(trainee.model)
        sink.emit(summary)
        log.info("[%s %d] done at step %d (%s)", role, rank, step, summary["stopped_by"])
        return 0
    except Exception as err:  # report any failure as data; the agent reads the exit code
        message = f"{type(err).__name__}: {err}"
        sink.emit({"type": "error", "error": message, "steps": stats.steps})
        log.error("[%s %d] failed: %s", role, rank, message)
        return 1
    finally:
        if sampler is not None:
            sampler.stop()
        sink.close()
        if dist.is_initialized():
            with contextlib.suppress(Exception):  # a broken group after a lost peer
                dist.destroy_process_group()
        if shutdown is not None:
            with contextlib.suppress(Exception):
                shutdown()
