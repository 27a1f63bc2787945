"""``mlsched logs JOB``: a task's log, read through the controller from the agent that runs it.

Each call returns at most 64 KiB and where to read on (``next_offset``). Without
``--follow`` the log is printed as it is now (its last ``--tail N`` lines: read backwards
from the end), then the command exits. With ``--follow`` it keeps reading from the last
offset until the task has exited and everything it wrote was printed; without ``--task`` it
moves on to the task of the job's next generation when the job is re-placed, and ends when
the job is final. Ctrl-C stops it.

What is printed is the trainer's output as the agent read it, decoded as UTF-8, with control
characters other than newlines and tabs shown as ``?``: a log must not drive the terminal.
"""

from __future__ import annotations

import argparse
import codecs
import sys
import time
from typing import TYPE_CHECKING

from mlsched.controller.status import FINAL_STATES
from mlsched.core.errors import SpecError
from mlsched.core.task_logs import MAX_LOG_CHUNK

if TYPE_CHECKING:
    from mlsched.v1 import jobs_pb2, jobs_pb2_grpc

__all__ = ["run_logs"]

#: How far back ``--tail`` reads at most, whatever N is.
MAX_TAIL_BYTES = 1 << 20
#: Pause between reads that found nothing new while following. The read itself waits for
#: the agent's heartbeat, so this only keeps an idle follow from polling back to back.
FOLLOW_PAUSE_S = 0.5

# C0 controls but tab and newline, DEL and the C1 controls: escape sequences never reach
# the terminal.
_SAFE = {c: "?" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0)) if c not in (0x09, 0x0A)}


class _Printer:
    """Decodes a byte stream across chunk boundaries and prints it safely."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def write(self, data: bytes, *, final: bool = False) -> None:
        text = self._decoder.decode(data, final=final)
        if text:
            sys.stdout.write(text.translate(_SAFE))
            sys.stdout.flush()


def _fetch(
    stub: jobs_pb2_grpc.JobServiceStub,
    args: argparse.Namespace,
    task: str,
    offset: int,
    max_bytes: int = MAX_LOG_CHUNK,
) -> jobs_pb2.GetTaskLogResponse:
    from mlsched.v1 import jobs_pb2

    request = jobs_pb2.GetTaskLogRequest(
        job_id=args.job, task_id=task, offset=offset, max_bytes=max_bytes
    )
    return stub.GetTaskLog(request, timeout=args.timeout)


def _tail(
    stub: jobs_pb2_grpc.JobServiceStub,
    args: argparse.Namespace,
    first: jobs_pb2.GetTaskLogResponse,
    lines: int,
) -> bytes:
    """The last ``lines`` lines of the log whose first chunk is ``first`` (up to its length
    then), read backwards a chunk at a time."""
    size, buf = first.size, first.data
    pos = 0 if first.next_offset >= size else size
    if pos:
        buf = b""
    while pos > 0 and buf.count(b"\n") <= lines and size - pos < MAX_TAIL_BYTES:
        start = max(0, pos - MAX_LOG_CHUNK)
        buf = _fetch(stub, args, first.task_id, start, pos - start).data[: pos - start] + buf
        pos = start
    kept = buf.splitlines(keepends=True)
    return b"".join(kept[-lines:]) if lines else b""


def run_logs(stub: jobs_pb2_grpc.JobServiceStub, args: argparse.Namespace) -> int:
    if args.tail is not None and args.tail < 0:
        raise SpecError("--tail", args.tail, "a number of lines >= 0")
    try:
        return _logs(stub, args)
    except KeyboardInterrupt:  # Ctrl-C ends a follow; nothing to clean up
        return 130


def _logs(stub: jobs_pb2_grpc.JobServiceStub, args: argparse.Namespace) -> int:
    out = _Printer()
    first = _fetch(stub, args, args.task or "", 0)
    task, size = first.task_id, first.size
    if args.tail is not None:
        out.write(_tail(stub, args, first, args.tail))
        offset = size
    else:
        out.write(first.data)
        offset = first.next_offset
        # The log as it is now: up to the length the first answer saw.
        while offset < size:
            more = _fetch(stub, args, task, offset)
            if not more.data:
                break
            out.write(more.data)
            offset = more.next_offset
    if not args.follow:
        out.write(b"", final=True)
        return 0
    while True:
        resp = _fetch(stub, args, task, offset)
        out.write(resp.data)
        offset = resp.next_offset
        if resp.data and offset < resp.size:
            continue  # more is there already
        if resp.ended and not args.task and resp.latest_task_id not in ("", task):
            out.write(b"", final=True)
            out.reset()
            task, offset = resp.latest_task_id, 0
            print(f"mlsched logs: job {args.job} continues in task {task}", file=sys.stderr)
            continue
        if resp.ended and (args.task or resp.job_state in FINAL_STATES):
            out.write(b"", final=True)
            return 0
        time.sleep(FOLLOW_PAUSE_S)
