"""Start a whole training job on this machine: what ``mlsched train`` runs.

* PS jobs: ``num_ps`` parameter-server processes and ``num_workers`` worker processes of
  ``python -m mlsched.trainers`` on a fresh loopback port;
* DDP: ``torchrun --nproc-per-node W -m mlsched.trainers ...``;
* Horovod: ``horovodrun -np W -H localhost:W --gloo python -m mlsched.trainers ...``.

The launcher waits, forwards SIGINT/SIGTERM to the job (which stops at the next step and
checkpoints), stops the rest if one process fails, and summarises the metrics file. Run it
again with the same checkpoint directory, a larger stop step and other W/K: it resumes.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType
from typing import Any

import psutil

from mlsched.trainers.config import Backend, Role, TrainConfig

__all__ = ["JobOutcome", "free_port", "launch", "stop_gracefully", "summarize_metrics"]

log = logging.getLogger(__name__)


def free_port() -> int:
    """An unused loopback port (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class JobOutcome:
    returncodes: list[int]
    wall_s: float
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(rc == 0 for rc in self.returncodes)


def _trainer_cmd(cfg: TrainConfig) -> list[str]:
    return [sys.executable, "-m", "mlsched.trainers", *cfg.to_args()]


def commands(cfg: TrainConfig) -> list[list[str]]:
    """The command lines that make up the job described by ``cfg`` (rank fields ignored)."""
    if cfg.arch == "ps":
        cmds = [_trainer_cmd(replace(cfg, role=Role.PS, rank=k)) for k in range(cfg.num_ps)]
        cmds += [
            _trainer_cmd(replace(cfg, role=Role.WORKER, rank=w)) for w in range(cfg.num_workers)
        ]
        return cmds
    if cfg.backend is Backend.HOROVOD:
        runner = shutil.which("horovodrun", path=str(Path(sys.executable).parent)) or shutil.which(
            "horovodrun"
        )
        if runner is None:
            raise RuntimeError("horovodrun not found: run `make horovod`")
        w = cfg.num_workers
        return [[runner, "-np", str(w), "-H", f"localhost:{w}", "--gloo", *_trainer_cmd(cfg)]]
    host, port = cfg.master
    return [
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nnodes",
            "1",
            "--nproc-per-node",
            str(cfg.num_workers),
            "--master-addr",
            host,
            "--master-port",
            str(port),
            "-m",
            "mlsched.trainers",
            *cfg.to_args(),
        ]
    ]


def launch(cfg: TrainConfig, *, grace_s: float = 30.0) -> JobOutcome:
    """Run the job to completion (or failure) and summarise its metrics."""
    if not cfg.metrics:
        Path(cfg.checkpoint_dir).mkdir(parents=True, exist_ok=True)
        cfg = replace(cfg, metrics=str(Path(cfg.checkpoint_dir) / "metrics.jsonl"))
    if cfg.rendezvous.endswith(":0"):
        cfg = replace(cfg, rendezvous=f"127.0.0.1:{free_port()}")
    envs = {**os.environ, "OMP_NUM_THREADS": str(cfg.threads)}
    offset = _line_count(cfg.metrics)
    start = time.perf_counter()
    # Own sessions: a terminal's Ctrl-C reaches only this launcher, which stops the job
    # gracefully (torchrun would count a signal of its own as a failure).
    procs = [subprocess.Popen(cmd, env=envs, start_new_session=True) for cmd in commands(cfg)]

    def forward(signum: int, frame: FrameType | None) -> None:
        for p in procs:
            if p.poll() is None:
                stop_gracefully(p.pid)

    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        codes = _wait(procs, grace_s)
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
    outcome = JobOutcome(codes, time.perf_counter() - start)
    outcome.summary = summarize_metrics(cfg.metrics, skip_lines=offset)
    return outcome


def stop_gracefully(pid: int) -> None:
    """SIGTERM the training processes behind ``pid``.

    torchrun and horovodrun treat a SIGTERM to themselves as a failure (exit 1) even when
    their ranks then stop and checkpoint cleanly, so a launcher's children are signalled
    instead; the launcher exits 0 once they have. A trainer process is signalled directly.
    """
    try:
        proc = psutil.Process(pid)
        children = proc.children(recursive=True)
        # Only the Python trainers themselves: a launcher's shell wrapper (horovodrun runs
        # ranks through `sh -c`) killed by SIGTERM would count as a failed rank.
        trainers = [
            c
            for c in children
            if "python" in c.name().lower() and "mlsched.trainers" in " ".join(c.cmdline())
        ]
        for target in trainers or [proc]:
            target.send_signal(signal.SIGTERM)
    except psutil.NoSuchProcess:
        pass


def _line_count(path: str) -> int:
    try:
        with open(path, "rb") as fh:
            return sum(1 for _ in fh)
    except FileNotFoundError:
        return 0


def _wait(procs: Sequence[subprocess.Popen[bytes]], grace_s: float) -> list[int]:
    """Wait for all; once one fails, SIGTERM the rest, SIGKILL after ``grace_s``."""
    deadline: float | None = None
    while True:
        codes = [p.poll() for p in procs]
        if all(c is not None for c in codes):
            return [int(c) for c in codes if c is not None]
        if deadline is None and any(c not in (None, 0) for c in codes):
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + grace_s
        if deadline is not None and time.monotonic() > deadline:
            for p in procs:
                if p.poll() is None:
                    p.kill()
        time.sleep(0.05)


def summarize_metrics(path: str, *, skip_lines: int = 0) -> dict[str, Any]:
    """Steps, samples/s, compute vs communication time and final loss of one run."""
    iters: list[dict[str, Any]] = []
    summaries: list[dict[str, Any]] = []
    errors: list[str] = []
    try:
        with open(path, encoding="utf-8") as fh:
            for i, line in enumerate(fh):
                if i < skip_lines or not line.strip():
                    continue
                rec = json.loads(line)
                kind = rec.get("type")
                if kind == "iter":
                    iters.append(rec)
                elif kind == "summary":
                    summaries.append(rec)
                elif kind == "error":
                    errors.append(f"{rec.get('role')} {rec.get('rank')}: {rec.get('error')}")
    except FileNotFoundError:
        return {"error": f"no metrics file {path}"}
    trainers = [s for s in summaries if s.get("role") in ("worker", "rank")]
    out: dict[str, Any] = {
        "final_step": max((int(s.get("final_step", 0)) for s in summaries), default=0),
        "iterations": len(iters),
        "samples_per_s": sum(float(s.get("samples_per_s", 0.0)) for s in trainers),
        "errors": errors,
    }
    if iters:
        out["compute_time_mean"] = sum(r["compute_time"] for r in iters) / len(iters)
        out["comm_time_mean"] = sum(r["comm_time"] for r in iters) / len(iters)
        first = [r for r in iters if r.get("rank") == 0]
        out["first_loss"] = first[0]["loss"] if first else iters[0]["loss"]
        out["final_loss"] = first[-1]["loss"] if first else iters[-1]["loss"]
        out["first_step"] = min(int(r["step"]) for r in iters)
        out["last_step"] = max(int(r["step"]) for r in iters)
    return out
