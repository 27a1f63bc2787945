"""The finite range of every number a user may set, in one table.

Job files, the testbed's intake, CSV traces, the simulator and the trainers' own
configuration read their bounds from here, so a value one of them admits is never refused
(or worse, overflowed) by another. Bounds are generous for real clusters and small enough
that derived quantities (total work, stop steps, proto int64 fields) stay exact.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "JOB_LIMITS",
    "MAX_DOCUMENT_BYTES",
    "MAX_DOCUMENT_DEPTH",
    "MAX_DOCUMENT_NODES",
    "MAX_JOBS_PER_DOCUMENT",
    "MAX_PATH_LEN",
    "MAX_RESOURCE",
    "MAX_STRING_LEN",
    "MAX_TOTAL_WORK",
    "MAX_UTILITY_PARAM",
    "TRAINING_LIMITS",
    "Bound",
]


@dataclass(frozen=True)
class Bound:
    """``low <= x <= high`` (``low < x`` when ``open_low``); ``integer`` for counts."""

    low: float
    high: float
    integer: bool = False
    open_low: bool = False

    def describe(self) -> str:
        kind = "an integer" if self.integer else "a number"
        left = "(" if self.open_low else "["
        return f"{kind} in {left}{self.low:g}, {self.high:g}]"

    def holds(self, x: float) -> bool:
        above = x > self.low if self.open_low else x >= self.low
        return above and x <= self.high


def _count(low: int, high: int) -> Bound:
    return Bound(low, high, integer=True)


def _positive(high: float) -> Bound:
    return Bound(0.0, high, open_low=True)


MAX_WORKERS = 4096

#: JobSpec's numeric fields.
JOB_LIMITS: dict[str, Bound] = {
    "arrival_slot": _count(0, 10_000_000),
    "epochs": _count(1, 1_000_000),
    "chunks": _count(1, 1_000_000),
    "batches_per_chunk": _count(1, 1_000_000_000),
    "batch_size": _count(1, 65_536),
    "global_batch": _count(1, 100_000_000),
    "max_workers": _count(1, MAX_WORKERS),
    "min_workers": _count(1, MAX_WORKERS),
    "requested_workers": _count(1, MAX_WORKERS),
    "requested_ps": _count(1, MAX_WORKERS),
    "ps_ratio": _positive(MAX_WORKERS),
    "compute_s": _positive(86_400.0),
    "update_s": Bound(0.0, 86_400.0),
    "gradient_mb": Bound(0.0, 1_000_000.0),
    "internal_gbps": _positive(1_000_000.0),
    "hop_gbps": _positive(1_000_000.0),
    "weight": Bound(0.0, 1e6),
    "valuation": _positive(1e12),
    "budget_worker_slots": _positive(1e12),
}

#: epochs * chunks * batches_per_chunk: a trainer's step counter stays far from int64 limits.
MAX_TOTAL_WORK = 1e12
#: Any resource amount of a job or a server (GPUs, cores, GB, Gbit/s).
MAX_RESOURCE = 1e6
#: Any utility parameter (priority, decay, target, deadline, ...).
MAX_UTILITY_PARAM = 1e9

#: Trainer settings a job's ``training:`` mapping may fix (and the trainers accept).
TRAINING_LIMITS: dict[str, Bound] = {
    "lr": _positive(10.0),
    "momentum": Bound(0.0, 0.999),
    "weight_decay": Bound(0.0, 1.0),
    "num_samples": _count(1, 100_000_000),
    "num_classes": _count(1, 100_000),
    "image_size": _count(4, 1024),
    "seed": _count(0, 2**31 - 1),
    "timeout_s": _positive(86_400.0),
    "threads": _count(1, 256),
    "checkpoint_keep": _count(1, 100),
    "checkpoint_every_s": Bound(0.0, 86_400.0),
    "checkpoint_every_steps": _count(0, 1_000_000_000),
}

#: Free-text fields (names, descriptions) and paths.
MAX_STRING_LEN = 256
MAX_PATH_LEN = 1024

#: A submitted job document, and the jobs in it.
MAX_DOCUMENT_BYTES = 1 << 20
#: Nesting a document may have, and nodes its YAML aliases may expand to.
MAX_DOCUMENT_DEPTH = 64
MAX_DOCUMENT_NODES = 1_000_000
MAX_JOBS_PER_DOCUMENT = 10_000
