"""``mlsched train``: start a whole training job on this machine and summarise it."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from dataclasses import fields
from enum import Enum
from typing import Any

from mlsched.core.train_config import JOB_SETTINGS, TrainConfig

__all__ = ["add_train_parser", "run_train", "train_config"]


def add_train_parser(sub: Any) -> None:
    p = sub.add_parser(
        "train",
        help="run a PS or all-reduce training job locally (resumes from --checkpoint-dir)",
        description="Start the whole job on this machine (torchrun for DDP, horovodrun for "
        "Horovod, the PS processes for PS), wait, and print a summary. Run again with the "
        "same --checkpoint-dir, a larger --stop-step and other --workers/--ps: it resumes.",
    )
    p.add_argument("--model", required=True, help="model name (resnet20, vgg11-narrow, ...)")
    p.add_argument("--arch", required=True, choices=["ps", "allreduce"])
    p.add_argument("--mode", default="async", choices=["async", "sync"], help="PS mode")
    p.add_argument("--workers", type=int, required=True, help="workers / ranks")
    p.add_argument("--ps", type=int, default=1, help="parameter servers (PS jobs)")
    p.add_argument("--stop-step", type=int, required=True, help="global step to stop at")
    p.add_argument("--checkpoint-dir", required=True)
    p.add_argument("--metrics", default="", help="JSON-lines file (default CKPT/metrics.jsonl)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"])
    settings = p.add_argument_group(
        "trainer settings", "what a job's training: mapping may set (default: the trainer's)"
    )
    for f in fields(TrainConfig):
        if f.name not in JOB_SETTINGS:
            continue
        flags = ["--" + f.name.replace("_", "-")]
        if f.name == "timeout_s":
            flags.append("--timeout")
        default = f.default.value if isinstance(f.default, Enum) else f.default
        text = f"default: {default}"
        if isinstance(default, bool):
            settings.add_argument(
                *flags, dest=f.name, default=None, action=argparse.BooleanOptionalAction, help=text
            )
            continue
        kind = type(default) if isinstance(default, (int, float)) else str
        settings.add_argument(*flags, dest=f.name, type=kind, default=None, help=text)


def train_config(args: argparse.Namespace) -> TrainConfig:
    settings = {k: getattr(args, k) for k in JOB_SETTINGS if getattr(args, k) is not None}
    return TrainConfig(
        model=args.model,
        arch=args.arch,
        mode=args.mode,
        num_workers=args.workers,
        num_ps=args.ps if args.arch == "ps" else 0,
        rendezvous="127.0.0.1:0",
        stop_step=args.stop_step,
        checkpoint_dir=args.checkpoint_dir,
        metrics=args.metrics,
        batch_size=args.batch_size,
        device=args.device,
        job_id="train",
        **settings,
    )


def _progress(cfg: TrainConfig) -> tuple[Callable[[int], None], Callable[[], None]]:
    """(report steps done, close): a bar on a terminal, else a line on stderr when the
    step moved and 10 s have passed (logs, CI)."""
    total = cfg.stop_step
    if sys.stderr.isatty() and not os.environ.get("CI"):
        from tqdm import tqdm

        bar = tqdm(total=total, desc=f"{cfg.model} steps", unit="step", file=sys.stderr)

        def advance(step: int) -> None:
            bar.update(max(0, min(step, total) - bar.n))

        return advance, bar.close
    last = {"step": -1, "at": 0.0}

    def line(step: int) -> None:
        now = time.monotonic()
        if step != last["step"] and now - last["at"] >= 10.0:
            print(f"  step {step} / {total}", file=sys.stderr, flush=True)
            last.update(step=step, at=now)

    return line, lambda: None


def run_train(cfg: TrainConfig) -> int:
    from mlsched.trainers.launch import launch

    advance, close = _progress(cfg)
    try:
        outcome = launch(cfg, progress=advance)
    finally:
        close()
    s = outcome.summary
    layout = (
        f"{cfg.num_workers} workers + {cfg.num_ps} PS ({cfg.mode})"
        if cfg.arch == "ps"
        else f"{cfg.num_workers} ranks ({cfg.backend.value})"
    )
    print(f"{cfg.model} {cfg.arch}: {layout}, batch {cfg.batch_size}, wall {outcome.wall_s:.1f}s")
    if "compute_time_mean" in s:
        total = s["compute_time_mean"] + s["comm_time_mean"]
        share = s["comm_time_mean"] / total if total > 0 else 0.0
        print(
            f"  steps {s.get('first_step', 0)}..{s.get('last_step', 0)} "
            f"(final step {s['final_step']}), {s['iterations']} iterations measured"
        )
        print(
            f"  samples/s {s['samples_per_s']:.1f}; per iteration: compute "
            f"{1e3 * s['compute_time_mean']:.1f} ms, communication "
            f"{1e3 * s['comm_time_mean']:.1f} ms ({100 * share:.0f}%)"
        )
        print(f"  loss {s['first_loss']:.4f} -> {s['final_loss']:.4f}")
    else:
        print(f"  no iterations ran (final step {s.get('final_step', 0)})")
    for err in s.get("errors", []):
        print(f"  error: {err}", file=sys.stderr)
    print(f"  checkpoint: {cfg.checkpoint_dir}; metrics: {outcome.metrics_path}")
    return 0 if outcome.ok else 1
