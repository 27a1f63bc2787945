"""One task the controller asked for: a process tree the agent starts, stops and measures.

A task is one trainer process (a PS role, a PS worker, a directly launched DDP rank), one
torchrun with the node's DDP ranks, or one Horovod node launcher with the node's Horovod
ranks (:func:`mlsched.trainers.launch.node_command`). It runs in its own session (its own
process group), so a stop reaches whatever it started and never the agent. Its output goes
to ``{workdir}/{task_id}/log.txt`` and its ranks' metrics to
``{workdir}/{task_id}/metrics.jsonl``, which :class:`MetricsTail` follows.

A stop is SIGTERM (the trainers finish their step, checkpoint and exit 0), then SIGKILL to
the group once ``grace_s`` has passed; the deadline is checked on each
:meth:`TaskProcess.poll`, so nothing here blocks. Under torchrun the SIGTERM goes to the
ranks only: torchrun counts a signal of its own as a failure even when its ranks stop
cleanly, and exits 0 once they have.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import psutil

from mlsched.agent.measurement import MetricsTail
from mlsched.agent.orders import MAX_TASK_ID_LEN, TaskOrder, local_plan
from mlsched.core.errors import SpecError
from mlsched.core.reports import TaskMeasurement, TaskReport, TaskState
from mlsched.core.tasks import LaunchKind, TaskPlan
from mlsched.trainers.cpu_share import SliceGroups
from mlsched.trainers.launch import is_trainer, node_command

__all__ = ["MAX_TASK_ID_LEN", "TaskProcess"]

STARTING, RUNNING = TaskState.STARTING, TaskState.RUNNING
STOPPING, EXITED = TaskState.STOPPING, TaskState.EXITED


def _dir_name(task_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", task_id[:MAX_TASK_ID_LEN]).lstrip(".") or "task"


def _last_line(path: Path, limit: int = 4096) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(max(0, path.stat().st_size - limit))
            lines = fh.read().decode(errors="replace").splitlines()
    except OSError:
        return ""
    return next((line.strip() for line in reversed(lines) if line.strip()), "")


def task_env(
    base: Mapping[str, str],
    threads: int,
    interface: str | None,
    cuda: bool,
    devices: Sequence[str],
    positions: Sequence[int],
) -> dict[str, str]:
    """A task's environment: ``base`` (the agent's) with its thread count, the interface
    Gloo and NCCL bind their sockets to (the agent's ``--host`` address: traffic stays on
    the network the cluster was set up on), and on a GPU its devices by UUID in PCI bus
    order. An ``NCCL_SOCKET_IFNAME`` the agent was started with is kept (an operator's
    choice, docs/deploy.md). IndexError: a position this agent has no GPU at."""
    env = {**base, "OMP_NUM_THREADS": str(threads), "PYTHONUNBUFFERED": "1"}
    if interface:
        env["GLOO_SOCKET_IFNAME"] = interface
        env.setdefault("NCCL_SOCKET_IFNAME", interface)  # the operator's own setting wins
    if cuda:
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        env["CUDA_VISIBLE_DEVICES"] = ",".join(devices[p] for p in positions)
    return env


class TaskProcess:
    """The process behind one :class:`TaskOrder`; call :meth:`start` once."""

    def __init__(
        self,
        order: TaskOrder,
        *,
        workdir: str | Path,
        real_gpus: bool = False,
        devices: tuple[str, ...] = (),
        warmup: int = 2,
        checkpoint_root: str = "",
        interface: str | None = None,
        slices: SliceGroups | None = None,
    ) -> None:
        self.order = order
        self.task_id = order.task_id
        self.lease_expires_unix = order.lease_expires_unix
        self.real_gpus = real_gpus
        self.devices = devices  # by the controller's GPU position: UUIDs (or indices)
        self.checkpoint_root = checkpoint_root
        self.interface = interface  # Gloo binds the agent's --host address only
        self.slices = slices  # stand-in devices: the task's own CPU share
        self._group = ""
        self.dir = Path(workdir) / _dir_name(order.task_id)
        self.log_path = self.dir / "log.txt"
        self.metrics_path = self.dir / "metrics.jsonl"
        self.tail = MetricsTail(self.metrics_path, warmup=warmup)
        self.proc: subprocess.Popen[bytes] | None = None
        self.plan: TaskPlan | None = None
        self.stop_step = order.stop_step
        self.state = STARTING
        self.exit_code = 0
        self.exit_reason = ""
        self._ps: psutil.Process | None = None
        self._tree: dict[int, psutil.Process] = {}
        self._kill_at: float | None = None
        self._killed = False
        self._lease_stop = False

    # Lifecycle ------------------------------------------------------------------------------
    def start(self) -> TaskProcess:
        """Launch the trainer; an invalid spec or a failed launch ends the task at once.

        Nothing a task spec holds may take the agent down with it: whatever goes wrong here
        is this task's failure, reported with its reason.
        """
        if self.order.plan is None:
            return self._fail(self.order.error or "invalid task spec")
        try:
            plan = self.plan = local_plan(
                self.order.plan,
                metrics=str(self.metrics_path),
                real_gpus=self.real_gpus,
                checkpoint_root=self.checkpoint_root,
            )
            cfg = plan.config
            cmd = node_command(cfg, plan.node, log_dir=str(self.dir / "launcher"))
            if self.slices is not None:
                cores = self.slices.slices.cores(ps=not plan.computes, ranks=plan.node.nproc)
                self._group = self.dir.name
                cmd = self.slices.argv(self._group, cores, cmd)
        except SpecError as err:
            return self._fail(f"invalid task spec: {err}")
        except Exception as err:  # a spec no validation anticipated
            return self._fail(f"invalid task spec: {type(err).__name__}: {str(err)[:200]}")
        try:
            env = task_env(os.environ, cfg.threads, self.interface, cfg.device == "cuda",
                           self.devices, plan.gpu_indices)  # fmt: skip
        except IndexError:
            return self._fail(f"GPU positions {list(plan.gpu_indices)}: this agent has "
                              f"{len(self.devices)} GPUs")  # fmt: skip
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            # A task id seen by an earlier agent run: measure only this run's lines.
            with contextlib.suppress(FileNotFoundError):
                self.tail.offset = self.metrics_path.stat().st_size
            with self.log_path.open("ab") as log:
                self.proc = subprocess.Popen(
                    cmd,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
        except (OSError, ValueError, TypeError) as err:  # ValueError: e.g. a NUL in an argument
            return self._fail(f"launch failed: {type(err).__name__}: {str(err)[:200]}")
        with contextlib.suppress(psutil.Error):
            self._ps = psutil.Process(self.proc.pid)
            self._ps.cpu_percent(None)  # prime: the next call measures from here
            self._tree = {self._ps.pid: self._ps}
        return self

    def _fail(self, reason: str) -> TaskProcess:
        self.state, self.exit_code, self.exit_reason = EXITED, -1, reason
        self._release()
        return self

    def _release(self) -> None:
        """Remove the task's CPU share (whatever its launcher left in it is killed)."""
        if self.slices is not None and self._group:
            with contextlib.suppress(OSError):
                self.slices.release(self._group)
            self._group = ""

    @property
    def exited(self) -> bool:
        return self.state == EXITED

    @property
    def stopping(self) -> bool:
        return self._kill_at is not None

    def stop(self, grace_s: float, *, lease: bool = False) -> None:
        """SIGTERM the process group now and SIGKILL it after ``grace_s`` (see :meth:`poll`)."""
        if self.proc is None or self.exited or self.stopping:
            return
        self._lease_stop = lease
        ranks = self._ranks() if self._launcher is LaunchKind.TORCHRUN else []
        if ranks:
            for rank in ranks:
                with contextlib.suppress(psutil.Error):
                    rank.send_signal(signal.SIGTERM)
        else:
            self._signal(signal.SIGTERM)
        self._kill_at = time.monotonic() + grace_s
        self.state = STOPPING

    @property
    def _launcher(self) -> LaunchKind:
        return self.plan.node.launcher if self.plan is not None else LaunchKind.DIRECT

    def _ranks(self) -> list[psutil.Process]:
        """The trainer processes under the task's launcher (``-m mlsched.trainers``)."""
        if self._ps is None:
            return []
        try:
            children = self._ps.children(recursive=True)
        except psutil.Error:
            return []
        out = []
        for child in children:
            with contextlib.suppress(psutil.Error):
                if is_trainer(child.cmdline()):
                    out.append(child)
        return out

    def kill(self) -> None:
        """SIGKILL the process group now."""
        if self.proc is not None and not self.exited:
            self._killed = True
            self._signal(signal.SIGKILL)

    def _signal(self, sig: signal.Signals) -> None:
        assert self.proc is not None
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, sig)

    def poll(self) -> TaskState:
        """Update and return the state."""
        if self.proc is None or self.exited:
            return self.state
        code = self.proc.poll()
        if code is None:
            if self._kill_at is not None and time.monotonic() >= self._kill_at:
                self.kill()
            self.tail.update()
            if self.stopping:
                self.state = STOPPING
            else:
                self.state = RUNNING if self.tail.started else STARTING
            return self.state
        self.tail.update()  # the summary and error lines are written at exit
        self.exit_code = code
        self.exit_reason = self._reason(code)
        self.state = EXITED
        self._release()
        return self.state

    def _reason(self, code: int) -> str:
        prefix = "lease expired: " if self._lease_stop else ""
        if self._killed:
            return prefix + "killed after grace"
        tail = self.tail
        if code == 0:
            if tail.summary is not None:
                final = int(tail.summary.get("final_step", tail.last_step + 1))
            else:
                final = tail.checkpoint_step if tail.checkpoint_step >= 0 else tail.last_step + 1
            if final >= self.stop_step:
                return "completed"
            return f"{prefix}stopped at step {final}"
        summary = tail.summary or {}
        if int(summary.get("final_step", -1)) >= self.stop_step:
            # Trained, checkpointed and summarised; a signal landed during interpreter exit.
            return "completed"
        if self.stopping and (code == -signal.SIGTERM or not tail.started):
            # SIGTERM came before the trainer installed its handler (or before a launcher
            # started its ranks): nothing to checkpoint.
            return f"{prefix}stopped before training started"
        text = tail.error or _last_line(self.log_path)
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            text = f"killed by {name}" + (f" ({text})" if text else "")
        return f"{prefix}error: {text or f'exit code {code}'}"

    # Reports ----------------------------------------------------------------------------------
    def measurement(self) -> TaskMeasurement:
        self.tail.update()
        return self.tail.report()

    def _usage(self) -> tuple[float, int]:
        """CPU percent and resident bytes of the task's whole process tree (a launcher's
        ranks included), each process measured since the previous call."""
        if self._ps is None or self.exited:
            return 0.0, 0
        try:
            procs = [self._ps, *self._ps.children(recursive=True)]
        except psutil.Error:  # exited between poll and now
            return 0.0, 0
        cpu, rss = 0.0, 0
        known = {}
        for proc in procs:
            proc = self._tree.get(proc.pid, proc)
            known[proc.pid] = proc
            with contextlib.suppress(psutil.Error), proc.oneshot():
                cpu += proc.cpu_percent(None)  # 0.0 on a process's first call
                rss += proc.memory_info().rss
        self._tree = known
        return cpu, rss

    def status(self) -> TaskReport:
        cpu, rss = self._usage()
        return TaskReport(
            task_id=self.task_id,
            job_id=self.order.job_id,
            state=self.state,
            pid=self.proc.pid if self.proc is not None else 0,
            exit_code=self.exit_code,
            exit_reason=self.exit_reason,
            measurement=self.measurement(),
            cpu_percent=cpu,
            rss_bytes=rss,
            log_path=str(self.log_path),
            generation=self.order.generation,
        )
