"""Reading a task's log through the agent that runs it: the request, the answer, the bounds.

The controller never names a file. A request names a task and a byte range; the agent reads
the log it created itself for that task (``--workdir/TASK_ID/log.txt``) and answers with
at most :data:`MAX_LOG_CHUNK` bytes. Both sides check every field with :func:`check_range`
and the id rules, so neither trusts the other's numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mlsched.core.errors import SpecError
from mlsched.core.ids import MAX_ID_LEN

__all__ = [
    "MAX_LOG_CHUNK",
    "MAX_LOG_ERROR",
    "MAX_LOG_OFFSET",
    "MAX_LOG_REQUESTS",
    "MAX_TASK_ID_LEN",
    "LogChunk",
    "LogRequest",
    "check_range",
]

#: Most bytes one answer carries (and the default of a request that asks for 0).
MAX_LOG_CHUNK = 64 * 1024
#: Largest offset: far beyond any log, well inside int64 and a double's exact integers.
MAX_LOG_OFFSET = 1 << 50
#: Most log requests one heartbeat reply carries, and answers one heartbeat carries.
MAX_LOG_REQUESTS = 8
#: Longest error text an answer carries.
MAX_LOG_ERROR = 300
#: Longest task id: a job id and its ``.g<generation>.<role><rank>`` suffix (the agent's
#: bound, ``mlsched.agent.task.MAX_TASK_ID_LEN``, is the same).
MAX_TASK_ID_LEN = MAX_ID_LEN + 64


def _integer(value: Any, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise SpecError(field, value, f"an integer in [{low}, {high}]")
    return value


def check_range(offset: Any, max_bytes: Any) -> tuple[int, int]:
    """``(offset, max_bytes)`` checked: ``0 <= offset <= MAX_LOG_OFFSET`` and
    ``0 <= max_bytes <= MAX_LOG_CHUNK``, 0 meaning the largest chunk."""
    offset = _integer(offset, "offset", 0, MAX_LOG_OFFSET)
    max_bytes = _integer(max_bytes, "max_bytes", 0, MAX_LOG_CHUNK)
    return offset, max_bytes or MAX_LOG_CHUNK


@dataclass(frozen=True)
class LogRequest:
    """Read at most ``max_bytes`` of task ``task_id``'s log from ``offset``."""

    request_id: int
    task_id: str
    offset: int
    max_bytes: int


@dataclass(frozen=True)
class LogChunk:
    """An agent's answer to :class:`LogRequest` ``request_id``: ``data`` starts at
    ``offset``; ``size`` is the log's length when it was read; ``ended``: the task has
    exited, so nothing more will be written. ``error`` set: nothing was read, and why."""

    request_id: int
    task_id: str
    offset: int = 0
    data: bytes = b""
    size: int = 0
    ended: bool = False
    error: str = ""

    @property
    def next_offset(self) -> int:
        return self.offset + len(self.data)
