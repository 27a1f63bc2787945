"""Start a whole training job on this machine: what ``mlsched train`` runs.

* PS jobs: ``num_ps`` parameter-server processes and ``num_workers`` worker processes of
  ``python -m mlsched.trainers`` on a fresh loopback port;
* DDP: ``torchrun --nproc-per-node W -m mlsched.trainers ...`` (``--launcher direct``: one
  ``python -m mlsched.trainers`` per rank);
* Horovod: ``horovodrun -np W -H localhost:W --gloo python -m mlsched.trainers ...``.

:func:`node_command` is the command of one node's share of a job, what a node agent runs
for a task: one trainer, one torchrun for the node's DDP ranks, or the node's Horovod ranks.

The launcher waits, forwards SIGINT/SIGTERM to the job (which stops at the next step and
checkpoints), stops the rest if one process fails, and summarises the metrics file. Run it
again with the same checkpoint directory, a larger stop step and other W/K: it resumes.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType
from typing import Any

import psutil

from mlsched.core.tasks import LaunchKind, NodeLaunch
from mlsched.core.train_config import Backend, Launcher, Role, TrainConfig
from mlsched.net.ports import free_port
from mlsched.trainers.cpu_share import SliceGroups

__all__ = [
    "JobOutcome",
    "flag_value",
    "free_port",
    "is_trainer",
    "launch",
    "node_command",
    "stop_gracefully",
    "summarize_metrics",
    "wait_all",
]

log = logging.getLogger(__name__)


@dataclass
class JobOutcome:
    returncodes: list[int]
    wall_s: float
    summary: dict[str, Any] = field(default_factory=dict)
    metrics_path: str = ""  # the JSON-lines file the run's measurements went to

    @property
    def ok(self) -> bool:
        return all(rc == 0 for rc in self.returncodes)


def flag_value(cmd: Sequence[str], flag: str) -> str | None:
    """The value of ``flag`` in a command line (``--flag=v`` or ``--flag v``), or None."""
    for i, arg in enumerate(cmd):
        if arg.startswith(flag + "="):
            return arg[len(flag) + 1 :]
        if arg == flag and i + 1 < len(cmd):
            return cmd[i + 1]
    return None


def is_trainer(cmd: Sequence[str]) -> bool:
    """Whether a command line runs a trainer process (``python [-u] -m mlsched.trainers``),
    not a launcher whose arguments name it (torchrun, the Horovod node launcher)."""
    module = next((b for a, b in itertools.pairwise(cmd) if a == "-m"), None)
    return module == "mlsched.trainers"


def _trainer_cmd(cfg: TrainConfig) -> list[str]:
    return [sys.executable, "-m", "mlsched.trainers", *cfg.to_args()]


def commands(cfg: TrainConfig, *, ranks_per_node: int | None = None) -> list[list[str]]:
    """The command lines that make up the job described by ``cfg`` (rank fields ignored).

    An all-reduce job runs under one launcher (torchrun, or Horovod's) for all its ranks,
    or, with ``ranks_per_node``, under one launcher per that many ranks, as agents launch
    a job spread over machines (each node's launcher joins node 0's rendezvous)."""
    if ranks_per_node is not None and cfg.arch != "ps" and cfg.launcher is not Launcher.DIRECT:
        sizes = node_sizes(cfg.num_workers, ranks_per_node)
        kind = LaunchKind.HOROVOD if cfg.backend is Backend.HOROVOD else LaunchKind.TORCHRUN
        return [node_command(cfg, NodeLaunch(kind, r, sizes)) for r in range(len(sizes))]
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
    if cfg.launcher is Launcher.DIRECT:
        return [_trainer_cmd(replace(cfg, rank=r)) for r in range(cfg.num_workers)]
    return [node_command(cfg, NodeLaunch(LaunchKind.TORCHRUN, 0, (cfg.num_workers,)))]


def node_command(cfg: TrainConfig, node: NodeLaunch, *, log_dir: str = "") -> list[str]:
    """The command line of one node's share of the job ``cfg`` describes.

    torchrun gets a static rendezvous at ``cfg.rendezvous`` (node 0 hosts its store), no
    restarts (a failed rank fails the generation; the controller decides what comes next)
    and a join timeout of the trainer's ``timeout_s`` (at least 30 s: the other nodes'
    agents start their share on their next heartbeat).
    """
    trainer = ["-m", "mlsched.trainers", *cfg.to_args()]
    if node.launcher is LaunchKind.DIRECT:
        return [sys.executable, *trainer]
    sizes = ",".join(str(n) for n in node.node_sizes)
    if node.launcher is LaunchKind.HOROVOD:
        return [
            sys.executable,
            "-m",
            "mlsched.trainers.allreduce.horovod_node",
            "--node-rank",
            str(node.node_rank),
            "--node-sizes",
            sizes,
            "--",
            *cfg.to_args(),
        ]
    host, port = cfg.master
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes",
        str(node.nnodes),
        "--node-rank",
        str(node.node_rank),
        "--nproc-per-node",
        str(node.nproc),
        "--master-addr",
        host,
        "--master-port",
        str(port),
        "--max-restarts",
        "0",
        "--rdzv-conf",
        f"timeout={max(30, int(cfg.timeout_s))}",
    ]
    if log_dir:
        cmd += ["--log-dir", log_dir]
    return [*cmd, *trainer]


class StepFollower:
    """The highest training step the metrics file shows so far, read incrementally (each
    call reads only the lines appended since the last)."""

    def __init__(self, path: str, offset_lines: int) -> None:
        self.path = path
        self._skip = offset_lines
        self._pos = 0
        self.step = 0

    def poll(self) -> int:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self._pos)
                for raw in fh:
                    if not raw.endswith(b"\n"):
                        break  # a line still being written: read it next time
                    self._pos += len(raw)
                    if self._skip > 0:
                        self._skip -= 1
                        continue
                    try:
                        rec = json.loads(raw)
                    except ValueError:
                        continue
                    if rec.get("type") == "iter" and isinstance(rec.get("step"), int):
                        self.step = max(self.step, rec["step"] + 1)
        except FileNotFoundError:
            pass
        return self.step


def node_sizes(ranks: int, per_node: int) -> tuple[int, ...]:
    """``ranks`` split into nodes of ``per_node`` (the last one the rest)."""
    if per_node < 1:
        raise ValueError(f"ranks_per_node: {per_node}: an integer >= 1")
    full, rest = divmod(ranks, per_node)
    return (per_node,) * full + ((rest,) if rest else ())


def command_shares(
    cfg: TrainConfig, *, ranks_per_node: int | None = None
) -> list[tuple[bool, int]]:
    """Per command of :func:`commands`: whether it is a parameter server, and its ranks."""
    if cfg.arch == "ps":
        return [(True, 1)] * cfg.num_ps + [(False, 1)] * cfg.num_workers
    if cfg.backend is not Backend.HOROVOD and cfg.launcher is Launcher.DIRECT:
        return [(False, 1)] * cfg.num_workers
    if ranks_per_node is not None:
        return [(False, n) for n in node_sizes(cfg.num_workers, ranks_per_node)]
    return [(False, cfg.num_workers)]


def launch(
    cfg: TrainConfig,
    *,
    grace_s: float = 30.0,
    progress: Callable[[int], None] | None = None,
    slices: SliceGroups | None = None,
    ranks_per_node: int | None = None,
) -> JobOutcome:
    """Run the job to completion (or failure) and summarise its metrics; ``progress`` is
    called about once a second with the steps done so far. With ``slices``, each command
    runs in a CPU share of its own (its stand-in devices', as an agent would give it);
    ``ranks_per_node``: see :func:`commands`."""
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
    cmds = commands(cfg, ranks_per_node=ranks_per_node)
    names = [f"{cfg.job_id or 'job'}-{i}" for i in range(len(cmds))]
    if slices is not None:
        shares = command_shares(cfg, ranks_per_node=ranks_per_node)
        cmds = [
            slices.argv(name, slices.slices.cores(ps=ps, ranks=ranks), cmd)
            for name, cmd, (ps, ranks) in zip(names, cmds, shares, strict=True)
        ]
    procs = [subprocess.Popen(cmd, env=envs, start_new_session=True) for cmd in cmds]

    def forward(signum: int, frame: FrameType | None) -> None:
        for p in procs:
            if p.poll() is None:
                stop_gracefully(p.pid)

    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    follower = StepFollower(cfg.metrics, offset)
    try:
        codes = wait_all(
            procs, grace_s, on_poll=None if progress is None else lambda: progress(follower.poll())
        )
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
        if slices is not None:
            for name in names:
                slices.release(name)
    outcome = JobOutcome(codes, time.perf_counter() - start, metrics_path=cfg.metrics)
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
        trainers = [c for c in children if is_trainer(c.cmdline())]
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


def wait_all(
    procs: Sequence[subprocess.Popen[bytes]],
    grace_s: float,
    *,
    on_poll: Callable[[], None] | None = None,
    poll_every_s: float = 1.0,
) -> list[int]:
    """Wait for all; once one fails, SIGTERM the rest, SIGKILL after ``grace_s``.
    ``on_poll`` is called every ``poll_every_s`` while they run (progress)."""
    deadline: float | None = None
    next_poll = time.monotonic()
    while True:
        if on_poll is not None and time.monotonic() >= next_poll:
            on_poll()
            next_poll = time.monotonic() + poll_every_s
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
