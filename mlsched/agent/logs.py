"""The agent's side of ``mlsched logs``: answer the controller's log requests from the logs
this agent created for its own tasks, and from nothing else.

A request names a task id, never a path. The file is the one the agent opened for that task
when it launched it (``--workdir/TASK_ID/log.txt``), found through the agent's own table of
tasks (``log_of``). A task the agent does not know, an id that is not an id, a range out of
bounds, or a log that is no longer a regular file (a link or a FIFO put in its place) is
answered with an error and nothing is read. At most :data:`MAX_LOG_CHUNK` bytes per answer
and :data:`MAX_LOG_REQUESTS` answers per heartbeat, whatever the request asks.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path

from mlsched.agent.orders import MAX_TASK_ID_LEN
from mlsched.core.errors import SpecError, shorten
from mlsched.core.ids import check_id
from mlsched.core.task_logs import (
    MAX_LOG_ERROR,
    MAX_LOG_REQUESTS,
    LogChunk,
    LogRequest,
    check_range,
)

__all__ = ["LogLookup", "answer", "read_log"]

#: Task id -> (its log file, whether the task has exited); None: not a task of this agent.
LogLookup = Callable[[str], tuple[Path, bool] | None]

# No links (the last component), and no blocking on a FIFO: the type is checked once open.
_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


def read_log(path: Path, offset: int, max_bytes: int) -> tuple[bytes, int]:
    """At most ``max_bytes`` of the regular file ``path`` from ``offset``, and the file's
    length; OSError when it cannot be opened or is not a regular file."""
    fd = os.open(path, _FLAGS)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{path.name} is not a regular file")
        data = os.pread(fd, max_bytes, offset)
    finally:
        os.close(fd)
    # The task may have written more since fstat: the length is at least what was read.
    return data, max(info.st_size, offset + len(data))


def _answer(request: LogRequest, log_of: LogLookup) -> LogChunk:
    def refuse(why: str) -> LogChunk:
        return LogChunk(
            request.request_id, str(request.task_id)[:200], error=shorten(why, MAX_LOG_ERROR)
        )

    try:
        task_id = check_id(request.task_id, "task_id", max_len=MAX_TASK_ID_LEN)
        offset, max_bytes = check_range(request.offset, request.max_bytes)
    except SpecError as err:
        return refuse(f"invalid log request: {err}")
    found = log_of(task_id)
    if found is None:
        return refuse(f"this agent runs no task {task_id!r} and remembers none")
    path, ended = found
    try:
        data, size = read_log(path, offset, max_bytes)
    except OSError as err:
        return refuse(f"task {task_id!r} has no readable log ({err.strerror or err})")
    return LogChunk(request.request_id, task_id, offset, data, size, ended)


def answer(requests: Iterable[LogRequest], log_of: LogLookup) -> list[LogChunk]:
    """An answer to each of the first :data:`MAX_LOG_REQUESTS` requests, in order."""
    out: list[LogChunk] = []
    for request in requests:
        if len(out) >= MAX_LOG_REQUESTS:
            break
        out.append(_answer(request, log_of))
    return out
