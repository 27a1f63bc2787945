"""Cumulative measurements of one task, read incrementally from its metrics file.

The trainer appends JSON lines (see :mod:`mlsched.trainers.metrics`); each :meth:`update`
reads only what was appended since the last one, and only complete lines (a flush may end
mid-line while the agent reads). Totals are cumulative since the task started, so the
controller loses nothing when a heartbeat is lost: it takes differences.

A torchrun or Horovod task's ranks share one file: each rank's first ``warmup`` iterations
are left out of the timed totals, and steps and checkpoints are the furthest any rank got.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from mlsched.core.reports import TaskMeasurement

__all__ = ["MetricsTail"]

log = logging.getLogger(__name__)


class MetricsTail:
    """Running totals of a metrics file from byte ``offset`` on."""

    def __init__(self, path: str | Path, *, warmup: int = 2, offset: int = 0) -> None:
        self.path = Path(path)
        self.warmup = max(0, warmup)
        self.offset = offset
        self.iterations = 0
        self._seen: dict[tuple[str, int], int] = {}  # iterations per (role, rank)
        self.timed_iterations = 0
        self.compute_s = 0.0
        self.comm_s = 0.0
        self.bytes_sent = 0.0
        self.bytes_recv = 0.0
        self.last_loss = 0.0
        self.last_step = -1
        self.first_unix = 0.0
        self.last_unix = 0.0
        self.start_step = -1
        self.checkpoint_step = -1
        self.checkpoint_cursor = -1
        self.summary: dict[str, Any] | None = None
        self.error = ""

    @property
    def started(self) -> bool:
        """The trainer is training: its start event or an iteration has been seen."""
        return self.start_step >= 0 or self.iterations > 0

    def update(self) -> None:
        try:
            with self.path.open("rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except FileNotFoundError:
            return
        end = data.rfind(b"\n")
        if end < 0:
            return
        self.offset += end + 1
        for line in data[: end + 1].splitlines():
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                log.debug("skipping a malformed metrics line in %s", self.path)
                continue
            if isinstance(record, dict):
                self._add(record)

    def _add(self, rec: dict[str, Any]) -> None:
        kind = rec.get("type")
        if kind == "iter":
            self.iterations += 1
            key = (str(rec.get("role", "")), int(rec.get("rank", 0)))
            self._seen[key] = self._seen.get(key, 0) + 1
            if self._seen[key] > self.warmup:
                self.timed_iterations += 1
                self.compute_s += float(rec.get("compute_time", 0.0))
                self.comm_s += float(rec.get("comm_time", 0.0))
            self.bytes_sent += float(rec.get("bytes_sent", 0.0))
            self.bytes_recv += float(rec.get("bytes_recv", 0.0))
            self.last_loss = float(rec.get("loss", 0.0))
            self.last_step = max(self.last_step, int(rec.get("step", self.last_step)))
            t = float(rec.get("t", 0.0))
            if self.first_unix == 0.0:
                self.first_unix = t
            self.last_unix = t
        elif kind == "event":
            event = rec.get("event")
            if event == "start":
                self.start_step = int(rec.get("step", 0))
            elif event == "checkpoint" and int(rec.get("step", -1)) >= self.checkpoint_step:
                self.checkpoint_step = int(rec.get("step", -1))
                self.checkpoint_cursor = int(rec.get("data_cursor", -1))
        elif kind == "summary":
            self.summary = rec
        elif kind == "error":
            self.error = str(rec.get("error", ""))

    def report(self) -> TaskMeasurement:
        return TaskMeasurement(
            iterations=self.iterations,
            compute_time_s=self.compute_s,
            comm_time_s=self.comm_s,
            bytes_sent=self.bytes_sent,
            bytes_recv=self.bytes_recv,
            last_loss=self.last_loss,
            last_step=self.last_step,
            last_iteration_unix=self.last_unix,
            timed_iterations=self.timed_iterations,
            start_step=self.start_step,
            checkpoint_step=self.checkpoint_step,
            checkpoint_cursor=self.checkpoint_cursor,
            first_iteration_unix=self.first_unix,
        )
