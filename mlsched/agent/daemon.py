"""The node agent: registers with the controller, then heartbeats and reconciles tasks.

Protocol (the controller relies on it):

* every heartbeat reports every task the agent knows: the running ones, and the exited ones
  the controller has not acknowledged yet;
* the response lists the tasks that should run (desired state). An unknown desired task is
  launched; a task that already ran is never launched again (a bounded memory of finished
  task ids), it is reported as exited while it stays desired; a running task that is not
  desired is stopped (SIGTERM, SIGKILL after the grace period); an exited task reported in a
  request whose response does not list it is acknowledged and forgotten;
* each response renews the tasks' leases; a task whose lease passes (controller unreachable)
  is stopped with reason "lease expired";
* ``reregister`` in a response, or NOT_FOUND, makes the agent register again while its
  tasks keep running, at a random moment within one heartbeat interval; UNAVAILABLE and
  DEADLINE_EXCEEDED are retried at the next interval;
* a registration that fails is retried after an exponential backoff with full jitter (a
  delay drawn between the base and the current cap): agents started together, or cut off
  together by a controller restart, must not come back in one burst;
* UNAUTHENTICATED (and other refusals no retry can fix) end the agent with a clear error;
* log requests in a response (``mlsched logs``) are answered from the agent's own task logs
  (``agent/logs.py``) in a heartbeat sent at once, not an interval later.

Task processes are polled every ``poll_s`` so that an exit is reported at once, not a whole
heartbeat interval later. Only :meth:`Agent.shutdown` may be called from another thread.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import subprocess
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

import grpc

from mlsched.agent import serde
from mlsched.agent.discovery import NodeInfo, interface_of
from mlsched.agent.logs import answer
from mlsched.agent.orders import TaskOrder
from mlsched.agent.task import EXITED, TaskProcess
from mlsched.agent.telemetry import NodeTelemetry
from mlsched.core.errors import MlschedError, shorten
from mlsched.core.reports import TaskReport
from mlsched.core.task_logs import LogChunk
from mlsched.net.auth import ClientAuth, client_channel
from mlsched.trainers.cpu_share import DeviceSlices, SliceGroups
from mlsched.v1 import agent_pb2_grpc

__all__ = ["Agent", "AgentError"]

log = logging.getLogger(__name__)

#: Most tasks one agent runs at once; a desired list beyond it is cut (a controller bug or a
#: hostile peer must not make the agent fork without bound).
MAX_TASKS = 256

# Refusals that retrying cannot fix: the agent stops with the controller's message.
_FATAL = {
    grpc.StatusCode.UNAUTHENTICATED: "check --token / --token-file",
    grpc.StatusCode.PERMISSION_DENIED: "check the TLS client certificate and the token",
    grpc.StatusCode.INVALID_ARGUMENT: "the controller rejected this agent's registration",
    grpc.StatusCode.UNIMPLEMENTED: "is --controller an mlsched controller?",
}


class AgentError(MlschedError):
    """The controller refused this agent in a way retrying cannot fix (e.g. a wrong token)."""


class Agent:
    """One machine's agent; :meth:`run` blocks until :meth:`shutdown`."""

    def __init__(
        self,
        controller: str,
        node: NodeInfo,
        *,
        workdir: str | Path,
        auth: ClientAuth | None = None,
        grace_s: float = 30.0,
        warmup: int = 2,
        poll_s: float = 0.2,
        rpc_timeout_s: float = 5.0,
        backoff_s: tuple[float, float] = (0.5, 30.0),
        remember: int = 4096,
        use_nvml: bool = True,
        slices: DeviceSlices | None = None,
    ) -> None:
        self.controller = controller
        self.node = node
        self.workdir = Path(workdir)
        self.auth = auth
        self.grace_s = grace_s
        self.warmup = warmup
        self.poll_s = poll_s
        self.rpc_timeout_s = rpc_timeout_s
        self.backoff_s = backoff_s
        self.remember = remember
        self.agent_id = ""
        self.heartbeat_interval_s = 1.0
        self.registered = False
        # Plain flags, not an Event: shutdown() runs in signal handlers, where taking a lock
        # the interrupted main thread may hold would deadlock. Waits poll them every poll_s.
        self._stop_requested = False
        self._force = False
        self._channel: grpc.Channel | None = None
        self._stub: Any = None
        self._interface = interface_of(node.host)
        self._telemetry = NodeTelemetry(
            use_nvml=use_nvml and node.real_gpus,  # stand-ins: the machine's GPUs are not ours
            interface=self._interface,
            devices=[(g.index, g.uuid) for g in node.gpus],
        )
        self._running: dict[str, TaskProcess] = {}
        # Stand-in devices: each task in a CPU share of its own, under this agent's group.
        self._slices = None if slices is None else SliceGroups.here(slices, f"tasks-{os.getpid()}")
        self._exited: dict[str, TaskReport] = {}  # exited, not yet acknowledged
        self._finished: OrderedDict[str, TaskReport] = OrderedDict()
        self._log_answers: list[LogChunk] = []  # for the next heartbeat
        self._problem = ""
        self._backoff = backoff_s[0]
        self._next_register = 0.0
        self._random = random.Random()  # seeded from the OS: each agent draws its own delays

    # Logging and connection -------------------------------------------------------------------
    def _log(self, level: int, msg: str, *args: Any) -> None:
        # Bounded: ids and reasons come from the controller and the tasks.
        log.log(level, "[agent %s] %s", self.node.name, shorten(msg % args, 1000))

    def _rpc(self) -> Any:
        if self._stub is None:
            self._channel = client_channel(self.controller, self.auth)
            self._stub = agent_pb2_grpc.AgentServiceStub(self._channel)
        return self._stub

    def _drop_channel(self) -> None:
        # A fresh channel reconnects at once; an old one may sit in gRPC's own reconnect
        # backoff (up to minutes) after the controller comes back.
        if self._channel is not None:
            self._channel.close()
        self._channel, self._stub = None, None

    def _failed(self, what: str, err: grpc.RpcError) -> None:
        code = err.code()
        text = f"{what} failed: {code.name}: {err.details() or ''}".rstrip(": ")
        if code in _FATAL:
            raise AgentError(
                f"[agent {self.node.name}] controller {self.controller} refused {what} "
                f"({code.name}: {err.details() or 'no details'}); {_FATAL[code]}"
            ) from None
        if code == grpc.StatusCode.UNAVAILABLE:
            self._drop_channel()
        key = f"{what} {code.name}"
        if key != self._problem:  # once per kind of failure, not once per retry
            self._log(logging.WARNING, "%s", text)
            self._problem = key

    def _ok(self) -> None:
        if self._problem:
            self._log(logging.INFO, "controller %s reachable again", self.controller)
            self._problem = ""

    # Registration -------------------------------------------------------------------------------
    def try_register(self) -> bool:
        """One registration attempt; raises :class:`AgentError` when refused for good."""
        try:
            resp = self._rpc().Register(
                serde.to_register_request(self.node), timeout=self.rpc_timeout_s
            )
        except grpc.RpcError as err:
            self._failed("registration", err)
            return False
        self._ok()
        self.agent_id = resp.agent_id
        if resp.heartbeat_interval_s > 0:
            self.heartbeat_interval_s = resp.heartbeat_interval_s
        self.registered = True
        self._backoff = self.backoff_s[0]
        self._log(
            logging.INFO,
            "registered with %s as %s (heartbeat every %gs)",
            self.controller,
            self.agent_id,
            self.heartbeat_interval_s,
        )
        return True

    def register(self) -> bool:
        """Register, retrying with exponential backoff; False if shut down meanwhile."""
        while not self._stop_requested:
            if self.try_register():
                return True
            self._sleep(self._next_backoff())
        return False

    def _sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self._stop_requested and (left := deadline - time.monotonic()) > 0:
            time.sleep(min(self.poll_s, left))

    def _next_backoff(self) -> float:
        """The next retry's delay: drawn between the base and the current cap, which
        doubles per failure up to the largest (full jitter)."""
        cap = self._backoff
        self._backoff = min(self.backoff_s[1], 2 * self._backoff)
        return self._random.uniform(min(self.backoff_s[0], cap), cap)

    def _reregister(self, why: str) -> None:
        self._log(logging.WARNING, "%s: registering again (tasks keep running)", why)
        self.registered = False
        # Within one interval, not at once: a restarted controller asks every agent, and
        # agents started together heartbeat together.
        delay = self._random.uniform(0.0, self.heartbeat_interval_s)
        self._next_register = time.monotonic() + delay

    # Main loop ------------------------------------------------------------------------------
    @property
    def stopping(self) -> bool:
        return self._stop_requested

    def shutdown(self, *, force: bool = False) -> None:
        """Ask :meth:`run` to stop the tasks and return (safe from any thread or handler).

        ``force``: SIGKILL the tasks at once instead of waiting for their grace period.
        """
        self._force = self._force or force
        self._stop_requested = True

    def run(self) -> None:
        """Register, then heartbeat and reconcile until :meth:`shutdown`."""
        self._log(
            logging.INFO, "starting (controller %s, workdir %s)", self.controller, self.workdir
        )
        next_beat = 0.0
        try:
            while not self._stop_requested:
                now = time.monotonic()
                if self._poll_tasks():
                    next_beat = now  # tell the controller about an exit at once
                if not self.registered and now >= self._next_register:
                    if self.try_register():
                        next_beat = now
                    else:
                        self._next_register = now + self._next_backoff()
                if self.registered and now >= next_beat:
                    self._heartbeat()
                    next_beat = time.monotonic() + self.heartbeat_interval_s
                    if self._log_answers:  # a client waits for them
                        next_beat = time.monotonic()
                wait = next_beat - time.monotonic() if self.registered else self.poll_s
                time.sleep(min(self.poll_s, max(0.0, wait)))
        finally:
            self._stop_all()
            if self._slices is not None:
                self._slices.close()
            self._last_heartbeat()
            self._drop_channel()
            self._log(logging.INFO, "stopped")

    def _poll_tasks(self) -> bool:
        """Poll every running task, enforce leases; True when one has exited."""
        now = time.time()
        exited = False
        for task_id, task in list(self._running.items()):
            lease = task.lease_expires_unix
            if lease > 0 and now > lease and not task.stopping:
                self._log(logging.WARNING, "lease of task %s expired: stopping it", task_id)
                task.stop(self.grace_s, lease=True)
            if task.poll() == EXITED:
                del self._running[task_id]
                self._finish(task)
                exited = True
        return exited

    def _finish(self, task: TaskProcess) -> None:
        status = task.status()
        self._exited[task.task_id] = status
        self._finished[task.task_id] = status
        self._finished.move_to_end(task.task_id)
        while len(self._finished) > self.remember:
            self._finished.popitem(last=False)
        level = logging.INFO if task.exit_code == 0 else logging.WARNING
        self._log(level, "task %s exited (%d): %s", task.task_id, task.exit_code, task.exit_reason)

    def _statuses(self) -> list[TaskReport]:
        return [t.status() for t in self._running.values()] + list(self._exited.values())

    def _heartbeat(self) -> None:
        reported_exited = set(self._exited)
        # Sent once: a lost answer is asked for again by the controller, never retried in a
        # loop here while it is unreachable.
        logs, self._log_answers = self._log_answers, []
        request = serde.heartbeat_request(
            self.agent_id, self._statuses(), self._telemetry.sample(), logs
        )
        try:
            resp = self._rpc().Heartbeat(request, timeout=self.rpc_timeout_s)
        except grpc.RpcError as err:
            if err.code() == grpc.StatusCode.NOT_FOUND:
                self._reregister(f"controller does not know agent {self.agent_id}")
            else:
                self._failed("heartbeat", err)
            return
        self._ok()
        if resp.reregister:
            # Its desired list means nothing for an agent it does not know: keep the tasks.
            self._reregister("controller asked to register again")
            return
        self._reconcile(resp.tasks, reported_exited)
        if resp.log_requests:
            requests = serde.log_requests_from_proto(resp.log_requests)
            self._log_answers = answer(requests, self._log_of)

    def _log_of(self, task_id: str) -> tuple[Path, bool] | None:
        """The log this agent created for ``task_id``, and whether the task has exited;
        None for a task it neither runs nor remembers."""
        running = self._running.get(task_id)
        if running is not None:
            return running.log_path, False
        done = self._finished.get(task_id)
        if done is not None and done.log_path:
            return Path(done.log_path), True
        return None

    def _reconcile(self, specs: Any, reported_exited: set[str]) -> None:
        desired = {spec.task_id: spec for spec in specs[:MAX_TASKS]}  # protos: ids only
        for task_id in reported_exited - desired.keys():
            self._exited.pop(task_id, None)  # acknowledged
        for task_id, spec in desired.items():
            running = self._running.get(task_id)
            if running is not None:
                running.lease_expires_unix = spec.lease_expires_unix
            elif task_id in self._exited:
                continue
            elif task_id in self._finished:  # ran before: report it again, never relaunch
                self._exited[task_id] = self._finished[task_id]
            else:
                self._launch(serde.task_order(spec))
        for task_id, task in self._running.items():
            if task_id not in desired and not task.stopping:
                self._log(logging.INFO, "task %s is no longer desired: stopping it", task_id)
                task.stop(self.grace_s)

    def _launch(self, order: TaskOrder) -> None:
        task = TaskProcess(
            order,
            workdir=self.workdir,
            real_gpus=self.node.real_gpus,
            devices=tuple(g.visible_as for g in self.node.gpus),
            warmup=self.warmup,
            checkpoint_root=self.node.checkpoint_root,
            interface=self._interface,
            slices=self._slices,
        ).start()
        if task.exited:  # an invalid spec: reported, never retried
            self._finish(task)
            return
        self._running[order.task_id] = task
        assert task.proc is not None
        self._log(
            logging.INFO,
            "started task %s of job %s (pid %d, log %s)",
            order.task_id,
            order.job_id,
            task.proc.pid,
            task.log_path,
        )

    # Shutdown -------------------------------------------------------------------------------
    def _stop_all(self) -> None:
        """SIGTERM every task (they checkpoint), wait up to the grace period, then SIGKILL."""
        if not self._running:
            return
        self._log(logging.INFO, "stopping %d task(s)", len(self._running))
        for task in self._running.values():
            task.stop(self.grace_s)
        deadline = time.monotonic() + self.grace_s + 5.0
        while self._running and time.monotonic() < deadline and not self._force:
            self._poll_tasks()  # SIGKILLs a group once its grace has passed
            time.sleep(0.05)
        for task in list(self._running.values()):
            task.kill()
            if task.proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):  # unkillable (D state)
                    task.proc.wait(timeout=5.0)
        self._poll_tasks()

    def _last_heartbeat(self) -> None:
        if not self.registered:
            return
        request = serde.heartbeat_request(self.agent_id, self._statuses())
        try:
            self._rpc().Heartbeat(request, timeout=min(2.0, self.rpc_timeout_s))
        except grpc.RpcError as err:
            self._log(logging.INFO, "last heartbeat not delivered: %s", err.code().name)
