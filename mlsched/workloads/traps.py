"""Warnings for the silent traps of a workload file (logged; the run goes on).

* **Assumed slot length.** A CSV trace, or a file without ``slot_seconds``, runs with
  3,600-s slots unless ``--slot-seconds`` says otherwise; the cluster file has no say.
* **Rescaled arrivals.** Arrivals are stored in slots, so another slot length moves every
  arrival in seconds (slot 10 of 60 s is 600 s; of 3,600 s, ten hours).
* **Pooled speeds.** The runtime model shares fitted parameters between jobs of one profile
  key (kind, profile or model name, batch sizes, GPU type): jobs that share a model name but not a
  speed are averaged into one, and per-job speeds from a trace are lost.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any

from mlsched.core.job import JobSpec
from mlsched.workloads.base import DEFAULT_SLOT_SECONDS

__all__ = ["pooled_speeds", "warn_traps"]

log = logging.getLogger(__name__)

#: How many pooled model names a warning lists.
_LIST = 5


def pooled_speeds(jobs: tuple[JobSpec, ...]) -> dict[str, int]:
    """Profile (model name unless given) -> how many jobs share a profile key with a job of
    another speed (``compute_s``, ``compute_s_by_type`` or ``gradient_mb``): the runtime
    model fits them as one."""
    groups: dict[tuple[Any, ...], list[JobSpec]] = defaultdict(list)
    for job in jobs:
        profile = job.profile or job.model
        key = (job.arch, job.sync, profile, job.batch_size, job.global_batch, job.gpu_type)
        groups[key].append(job)
    out: dict[str, int] = defaultdict(int)
    for key, members in groups.items():
        speeds = {
            (j.compute_s, j.gradient_mb, tuple(sorted(j.compute_s_by_type.items())))
            for j in members
        }
        if len(speeds) > 1:
            out[str(key[2])] += len(members)
    return dict(out)


def warn_traps(
    where: str,
    jobs: tuple[JobSpec, ...],
    *,
    file_slot_seconds: float | None,
    slot_seconds: float | None,
) -> list[str]:
    """Log (and return) a warning for each trap of the workload file ``where``:
    ``file_slot_seconds`` is the file's own slot length (None: it gives none) and
    ``slot_seconds`` the one asked for instead (None: none)."""
    said: list[str] = []
    if file_slot_seconds is None and slot_seconds is None:
        said.append(
            f"{where}: no slot length given (a CSV trace has none, and the cluster file has "
            f"no say): {DEFAULT_SLOT_SECONDS:g}-s slots assumed; pass --slot-seconds, or "
            "slot_seconds: in a YAML workload"
        )
    old = DEFAULT_SLOT_SECONDS if file_slot_seconds is None else file_slot_seconds
    late = max((j.arrival_slot for j in jobs), default=0)
    if slot_seconds is not None and slot_seconds != old and late > 0:
        said.append(
            f"{where}: arrivals are counted in slots, so {slot_seconds:g}-s slots instead of "
            f"{old:g}-s ones move them: the last arrival (slot {late}) comes at "
            f"{late * slot_seconds:g} s instead of {late * old:g} s"
        )
    pooled = pooled_speeds(jobs)
    if pooled:
        names = sorted(pooled, key=lambda n: -pooled[n])
        shown = ", ".join(f"{n} ({pooled[n]} jobs)" for n in names[:_LIST])
        more = f" and {len(names) - _LIST} more" if len(names) > _LIST else ""
        said.append(
            f"{where}: jobs that share a model name run at different speeds ({shown}{more}); "
            "the runtime model fits one speed per profile (default: the model name), batch "
            "size and GPU type, so theirs are averaged: give each speed its own profile: "
            "(mlsched trace import does) to keep it"
        )
    for text in said:
        log.warning(text)
    return said
