"""Per-iteration measurements as JSON lines, and the run summary.

Every training process writes one JSON object per line to its sink (a file path, a
``tcp://host:port`` socket the agent listens on, or ``-`` for stdout). Lines have a ``type``:

* ``iter``: ``step``, ``compute_time``, ``comm_time`` (seconds), ``bytes_sent``,
  ``bytes_recv``, ``loss``, plus ``job``, ``role``, ``rank``, ``batch``, ``t`` (unix time);
* ``telemetry``: NVML GPU and psutil process samples (see :mod:`.telemetry`);
* ``event``: start, resume, checkpoint, stop;
* ``summary``: at exit: steps, samples/s, mean compute and communication time, final loss.

Writes are buffered and flushed at most every ``flush_s`` seconds, so instrumentation costs
microseconds per iteration (the benchmark holds it to <= 3%).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["IterationStats", "MetricsSink", "record_iteration"]


class MetricsSink:
    """A thread-safe JSON-lines writer; an empty target discards everything.

    Several processes of one job may share a file: lines are buffered here and each flush is
    one ``os.write`` on an ``O_APPEND`` descriptor, so lines from different processes never
    interleave mid-line.
    """

    def __init__(
        self, target: str, *, flush_s: float = 0.5, static: dict[str, Any] | None = None
    ) -> None:
        self.target = target
        self._static = dict(static or {})
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._fd: int | None = None
        self._buf: list[str] = []
        self._open = bool(target)
        self._flush_s = flush_s
        self._last_flush = time.monotonic()
        if not target or target == "-":
            return
        if target.startswith("tcp://"):
            host, _, port = target.removeprefix("tcp://").rpartition(":")
            self._sock = socket.create_connection((host, int(port)), timeout=10)
        else:
            self._fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def emit(self, record: dict[str, Any]) -> None:
        if not self._open:
            return
        line = json.dumps({**self._static, **record}, separators=(",", ":"))
        with self._lock:
            self._buf.append(line + "\n")
            now = time.monotonic()
            if now - self._last_flush >= self._flush_s:
                self._flush_locked()
                self._last_flush = now

    def _flush_locked(self) -> None:
        if not self._buf:
            return
        data = "".join(self._buf).encode()
        self._buf.clear()
        if self._fd is not None:
            os.write(self._fd, data)
        elif self._sock is not None:
            self._sock.sendall(data)
        else:
            sys.stdout.write(data.decode())
            sys.stdout.flush()

    def flush(self) -> None:
        with self._lock:
            self._flush_locked()

    def close(self) -> None:
        with self._lock:
            with contextlib.suppress(OSError):
                self._flush_locked()
            self._open = False
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            if self._sock is not None:
                try:
                    self._sock.close()
                finally:
                    self._sock = None


@dataclass
class IterationStats:
    """Running sums behind the summary line (cheap: no per-iteration list)."""

    batch_size: int
    steps: int = 0
    compute_s: float = 0.0
    comm_s: float = 0.0
    bytes_sent: float = 0.0
    bytes_recv: float = 0.0
    last_loss: float = float("nan")
    first_loss: float = float("nan")
    started: float = field(default_factory=time.perf_counter)

    def add(self, compute_s: float, comm_s: float, sent: float, recv: float, loss: float) -> None:
        if self.steps == 0:
            self.first_loss = loss
            # Time the run from its first finished iteration's start: process start-up
            # and rendezvous are not training throughput.
            self.started = time.perf_counter() - (compute_s + comm_s)
        self.steps += 1
        self.compute_s += compute_s
        self.comm_s += comm_s
        self.bytes_sent += sent
        self.bytes_recv += recv
        self.last_loss = loss

    def summary(self) -> dict[str, Any]:
        wall = max(1e-9, time.perf_counter() - self.started)
        n = max(1, self.steps)
        return {
            "type": "summary",
            "steps": self.steps,
            "wall_s": wall,
            "samples_per_s": self.steps * self.batch_size / wall,
            "compute_time_mean": self.compute_s / n,
            "comm_time_mean": self.comm_s / n,
            "bytes_sent": self.bytes_sent,
            "bytes_recv": self.bytes_recv,
            "first_loss": self.first_loss,
            "final_loss": self.last_loss,
        }


def record_iteration(
    stats: IterationStats,
    sink: MetricsSink,
    *,
    step: int,
    compute_s: float,
    comm_s: float,
    sent: float,
    recv: float,
    loss: float,
    batch: int,
) -> None:
    """Add one iteration to the running totals and write its ``iter`` line."""
    stats.add(compute_s, comm_s, sent, recv, loss)
    sink.emit(
        {
            "type": "iter",
            "step": step,
            "compute_time": compute_s,
            "comm_time": comm_s,
            "bytes_sent": sent,
            "bytes_recv": recv,
            "loss": loss,
            "batch": batch,
            "t": time.time(),
        }
    )
