"""What a trace reader yields, and the checked reading of its cells.

A reader turns one source format into :class:`TraceJob` records: a job as the trace saw it
(arrival, GPUs, run time or iterations, per-GPU-type step times), before any choice of
slots. :class:`Reading` collects them with the rows it skipped, by reason, and locates
every error in its file and line. Cell parsers (:func:`number`, :func:`seconds`) name the
trace's own column in their errors.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from mlsched.core.errors import SpecError
from mlsched.core.frozen import fill_at_once
from mlsched.core.limits import MAX_WORKERS

__all__ = [
    "MAX_TRACE_BYTES",
    "Reading",
    "TraceJob",
    "duration",
    "gpu_count",
    "number",
    "open_text",
    "seconds",
]

#: Largest trace file read (public traces reach a few hundred MB).
MAX_TRACE_BYTES = 2 << 30
#: Longest run time a job may claim: ten years, far beyond any trace.
MAX_DURATION_S = 10 * 365 * 86_400.0
#: How many skipped-row errors a reading keeps to show.
_KEEP_ERRORS = 5


@fill_at_once  # a trace reads thousands: its fields filled at once
@dataclass(frozen=True)
class TraceJob:
    """One job as a trace recorded it.

    ``duration_s`` is the run time on ``gpus`` GPUs; ``step_s_by_type`` instead gives the
    seconds per iteration on each GPU type (with ``iterations``), when the source has a
    throughput table. ``gpu_type`` is where the job ran (a pin); ``gpu_share`` the part of
    a GPU each worker took (Alibaba's fractional GPUs).
    """

    job_id: str
    arrival_s: float
    gpus: int
    duration_s: float | None = None
    iterations: int | None = None
    model: str = ""
    user: str = ""
    gpu_type: str | None = None
    priority: float | None = None
    gpu_share: float = 1.0
    status: str = ""
    step_s_by_type: Mapping[str, float] = field(default_factory=dict)


@dataclass
class Reading:
    """The jobs read from one source, the rows skipped (by reason) and what was assumed."""

    source: str
    skip_invalid: bool = False
    jobs: list[TraceJob] = field(default_factory=list)
    rows: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)

    @contextmanager
    def row(self, where: str) -> Iterator[None]:
        """Read one row: a :class:`SpecError` inside is located at ``where`` and raised,
        or, with ``skip_invalid``, counted and the row skipped."""
        self.rows += 1
        try:
            yield
        except SpecError as err:
            self.invalid(err, where)

    def invalid(self, err: SpecError, where: str) -> None:
        """A row found invalid (:meth:`row`'s handling, for a reader that counts its rows
        itself): ``err`` located at ``where`` and raised, or counted with ``skip_invalid``."""
        located = err.at(where)
        if not self.skip_invalid:
            raise located from None
        self.skipped["invalid"] += 1
        if len(self.errors) < _KEEP_ERRORS:
            self.errors.append(str(located))

    def add(self, job: TraceJob) -> None:
        self.jobs.append(job)
        if job.status:
            self.statuses[job.status] += 1

    def skip(self, reason: str) -> None:
        self.skipped[reason] += 1

    def assume(self, text: str) -> None:
        if text not in self.assumptions:
            self.assumptions.append(text)


def open_text(path: Path, what: str) -> Any:
    """``path`` opened as UTF-8 text, refused with a named error when missing or too big."""
    try:
        size = path.stat().st_size
        if size > MAX_TRACE_BYTES:
            raise SpecError(what, str(path), f"a file of at most {MAX_TRACE_BYTES >> 20} MiB")
        return path.open(newline="", encoding="utf-8", errors="strict")
    except OSError as err:
        raise SpecError(what, str(path), f"a readable file ({err.strerror})") from None


def number(text: Any, column: str, *, low: float, high: float, integer: bool = False) -> float:
    """A finite number in [low, high] from a cell; the error names the trace's column."""
    if type(text) is str:  # a cell as read: the common case, inline
        try:
            value = float(text)  # float() strips whitespace as str.strip() does
        except ValueError:
            kind = "an integer" if integer else "a number"
            raise SpecError(column, text.strip(), kind) from None
    elif isinstance(text, bool):
        raise SpecError(column, text, "a number")
    elif isinstance(text, (int, float)):
        value = float(text)
    else:
        cell = str(text).strip()
        try:
            value = float(cell)
        except ValueError:
            kind = "an integer" if integer else "a number"
            raise SpecError(column, cell, kind) from None
    if not math.isfinite(value) or not low <= value <= high:
        raise SpecError(column, text, f"a number in [{low:g}, {high:g}]")
    if integer and value != int(value):
        raise SpecError(column, text, "an integer")
    return value


def gpu_count(text: Any, column: str) -> int:
    """A job's GPU count (0 is allowed: the reader skips CPU-only jobs)."""
    return int(number(text, column, low=0, high=MAX_WORKERS, integer=True))


_STAMP = re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([+-]\d{2}:?\d{2}|Z)?")


def seconds(text: Any, column: str) -> float:
    """A time as seconds: a number of seconds, or a date-time (``2020-04-01 00:00:07``,
    ISO 8601; no zone: read as UTC, since only differences matter)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return number(text, column, low=-1e12, high=1e12)
    cell = str(text).strip()
    try:
        return number(cell, column, low=-1e12, high=1e12)
    except SpecError:
        pass
    if _STAMP.fullmatch(cell):
        try:
            stamp = datetime.fromisoformat(cell.replace("Z", "+00:00"))
        except ValueError:
            stamp = None
        if stamp is not None:
            if stamp.tzinfo is None:
                stamp = stamp.replace(tzinfo=timezone.utc)
            return stamp.timestamp()
    raise SpecError(column, cell, "seconds (a number) or a date-time such as 2020-04-01 00:00:07")


def duration(value: float, column: str) -> float:
    """A run time in seconds: > 0 and at most ten years."""
    if not math.isfinite(value) or not 0 < value <= MAX_DURATION_S:
        raise SpecError(column, value, f"a run time in (0, {MAX_DURATION_S:g}] seconds")
    return value
