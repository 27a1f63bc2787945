"""``mlsched logs`` on the controller: which agent holds a task's log, and the round trip
through that agent's heartbeats.

Agents run no server, so the controller never calls them. A client's request waits in the
:class:`LogBroker` until the agent's next heartbeat reply carries it; the agent reads its
own log of that task and answers in a heartbeat it sends at once; the client's call, which
has waited meanwhile (a few heartbeat intervals at most), returns the answer. An agent can
answer only what was asked of it: answers to requests it was not sent are dropped.

:class:`TaskIndex` remembers which agent ran each task of a job, for every generation this
controller launched or adopted, because the executor forgets a generation once it has
ended and a finished job's log is the one most often wanted.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from mlsched.controller.agents import AgentRegistry
from mlsched.controller.status import JobStatus
from mlsched.core.errors import MlschedError, shorten
from mlsched.core.ids import check_id
from mlsched.core.task_logs import (
    MAX_LOG_REQUESTS,
    MAX_TASK_ID_LEN,
    LogChunk,
    LogRequest,
    check_range,
)
from mlsched.core.tasks import TaskPlan

__all__ = ["LogBroker", "LogError", "TaskIndex", "TaskLog", "TaskLogs"]

#: Task ids remembered per job (the newest kept): a crash-looping job must not grow it.
MAX_TASKS_PER_JOB = 64
#: Log requests waiting for one agent; more are refused until some are answered.
MAX_PENDING_PER_AGENT = 32
#: Client calls waiting for an answer at once. They hold gRPC handler threads, which the
#: agents' heartbeats need too, so they are few.
MAX_WAITING = 8
#: The longest a call waits for an agent's answer, whatever the heartbeat interval.
MAX_WAIT_S = 30.0


class LogError(MlschedError):
    """A log that cannot be read now; ``kind`` says why (the service maps it to a status):
    ``not_found``, ``no_task``, ``lost``, ``timeout``, ``busy`` or ``refused``."""

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(shorten(message, 600))


class TaskIndex:
    """Job id -> {task id: agent id}, oldest generation first, and each job's default task
    (the latest generation's first task that trains). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tasks: dict[str, OrderedDict[str, str]] = {}
        self._latest: dict[str, str] = {}

    def record(
        self, job_id: str, plans: Mapping[str, TaskPlan], agent_of: Mapping[str, str]
    ) -> None:
        """A generation of ``job_id`` launched (or adopted): its tasks and their agents."""
        if not plans:
            return
        with self._lock:
            known = self._tasks.setdefault(job_id, OrderedDict())
            for task_id in plans:
                agent_id = agent_of.get(task_id)
                if agent_id is not None:  # a damaged stored run lacks some; skip, not fail
                    known[task_id] = agent_id
                    known.move_to_end(task_id)
            while len(known) > MAX_TASKS_PER_JOB:
                known.popitem(last=False)
            # Workers and ranks print the training; a PS prints little.
            self._latest[job_id] = next(
                (t for t, p in plans.items() if p.computes), next(iter(plans))
            )

    def tasks(self, job_id: str) -> dict[str, str]:
        with self._lock:
            return dict(self._tasks.get(job_id, {}))

    def latest(self, job_id: str) -> str:
        with self._lock:
            return self._latest.get(job_id, "")


@dataclass
class _Pending:
    request: LogRequest
    agent_id: str
    done: threading.Event = field(default_factory=threading.Event)
    answer: LogChunk | None = None


class LogBroker:
    """Log requests waiting for their agents' heartbeats, and the answers. Thread-safe:
    clients' calls wait in :meth:`ask`; heartbeat handlers call :meth:`requests_for` and
    :meth:`deliver`."""

    def __init__(
        self, *, max_pending: int = MAX_PENDING_PER_AGENT, max_waiting: int = MAX_WAITING
    ) -> None:
        self.max_pending = max_pending
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._pending: dict[str, dict[int, _Pending]] = {}
        self._slots = threading.BoundedSemaphore(max_waiting)

    def ask(
        self,
        agent_id: str,
        task_id: str,
        offset: int,
        max_bytes: int,
        *,
        wait_s: float,
        lost: Callable[[], bool],
        what: str,
    ) -> LogChunk:
        """The agent's answer to a request for ``task_id``'s log; :class:`LogError` when the
        agent is ``lost`` meanwhile or does not answer within ``wait_s``. ``what`` names the
        task and job in errors."""
        if not self._slots.acquire(blocking=False):
            raise LogError("busy", f"too many log requests in flight; retry {what} shortly")
        pending: _Pending | None = None
        try:
            with self._lock:
                mine = self._pending.setdefault(agent_id, {})
                if len(mine) >= self.max_pending:
                    raise LogError("busy", f"agent {agent_id!r} has too many log requests waiting")
                pending = _Pending(
                    LogRequest(next(self._ids), task_id, offset, max_bytes), agent_id
                )
                mine[pending.request.request_id] = pending
            deadline = time.monotonic() + wait_s
            while not pending.done.wait(min(0.1, max(0.0, deadline - time.monotonic()))):
                if lost():
                    raise LogError("lost", f"agent {agent_id!r} was lost while reading {what}")
                if time.monotonic() >= deadline:
                    raise LogError(
                        "timeout",
                        f"agent {agent_id!r} did not answer within {wait_s:.1f}s for {what}",
                    )
            assert pending.answer is not None
            return pending.answer
        finally:
            if pending is not None:
                with self._lock:
                    self._pending.get(agent_id, {}).pop(pending.request.request_id, None)
            self._slots.release()

    def requests_for(self, agent_id: str) -> list[LogRequest]:
        """What the reply to ``agent_id``'s heartbeat carries: its unanswered requests
        (again until answered, so a lost reply costs one interval, not the request)."""
        with self._lock:
            waiting = [
                p.request for p in self._pending.get(agent_id, {}).values() if p.answer is None
            ]
        return waiting[:MAX_LOG_REQUESTS]

    def deliver(self, agent_id: str, chunks: Iterable[LogChunk]) -> None:
        """Answers from ``agent_id``: each settles the request it names if that request was
        sent to this agent; an answer that does not fit its request becomes an error."""
        with self._lock:
            mine = self._pending.get(agent_id, {})
            for chunk in itertools.islice(chunks, MAX_LOG_REQUESTS):
                pending = mine.get(chunk.request_id)
                if pending is None or pending.answer is not None:
                    continue  # not asked of this agent, or answered already
                asked = pending.request
                fits = (
                    chunk.task_id == asked.task_id
                    and chunk.offset == asked.offset
                    and len(chunk.data) <= asked.max_bytes
                )
                if not chunk.error and not fits:
                    chunk = LogChunk(
                        asked.request_id,
                        asked.task_id,
                        error="the agent's answer does not match the request",
                    )
                pending.answer = chunk
                pending.done.set()


@dataclass(frozen=True)
class TaskLog:
    """What a client is told: the chunk read, where it came from, and the job's state."""

    job_id: str
    task_id: str
    agent_id: str
    chunk: LogChunk
    job_state: str
    latest_task_id: str
    task_ids: tuple[str, ...]


class TaskLogs:
    """The job service's log reads for one controller."""

    def __init__(
        self,
        *,
        heartbeat_s: float,
        job: Callable[[str], JobStatus],
        index: TaskIndex,
        agents: AgentRegistry,
        broker: LogBroker | None = None,
    ) -> None:
        self.heartbeat_s = heartbeat_s
        self.job = job  # a job's status by id (KeyError: none)
        self.index = index
        self.agents = agents
        self.broker = broker or LogBroker()

    def wait_s(self) -> float:
        """How long a call waits for an agent: the request rides the next heartbeat reply
        and the answer the heartbeat after it, so a few intervals and a margin."""
        return min(MAX_WAIT_S, 3 * self.heartbeat_s + 1.0)

    def read(
        self, job_id: str, task_id: str, offset: int, max_bytes: int, *, wait_s: float
    ) -> TaskLog:
        """Read a task's log (``task_id`` "": the job's default task); :class:`SpecError`
        for a malformed field, :class:`LogError` for a log that cannot be read."""
        check_id(job_id, "job_id")
        if task_id:
            check_id(task_id, "task_id", max_len=MAX_TASK_ID_LEN)
        offset, max_bytes = check_range(offset, max_bytes)
        try:
            status = self.job(job_id)
        except KeyError:
            raise LogError("not_found", f"no job {job_id!r}") from None
        index = self.index
        tasks = index.tasks(job_id)
        if not tasks:
            why = f": {status.reason}" if status.reason else ""
            raise LogError(
                "no_task",
                f"job {job_id!r} has no task whose log could be read (it is {status.state}{why})",
            )
        task_id = task_id or index.latest(job_id)
        agent_id = tasks.get(task_id)
        if agent_id is None:
            raise LogError(
                "not_found",
                f"job {job_id!r} has no task {task_id!r}; its tasks: {', '.join(tasks)}",
            )
        what = f"task {task_id!r} of job {job_id!r}"

        def lost() -> bool:
            agent = self.agents.get(agent_id)
            return agent is None or not agent.alive

        if lost():
            agent = self.agents.get(agent_id)
            why = (
                "has not come back since the controller restarted"
                if agent is not None and agent.returning
                else "is lost"
            )
            raise LogError("lost", f"agent {agent_id!r}, which ran {what}, {why}")
        chunk = self.broker.ask(
            agent_id, task_id, offset, max_bytes, wait_s=wait_s, lost=lost, what=what
        )
        if chunk.error:
            raise LogError("refused", f"agent {agent_id!r} cannot read {what}: {chunk.error}")
        return TaskLog(
            job_id=job_id,
            task_id=task_id,
            agent_id=agent_id,
            chunk=chunk,
            job_state=self.job(job_id).state,  # after the read: a final state is final
            latest_task_id=index.latest(job_id),
            task_ids=tuple(index.tasks(job_id)),
        )
