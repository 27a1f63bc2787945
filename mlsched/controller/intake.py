"""Job documents submitted to the testbed: parsed and validated before anything is admitted.

The same job spec as files and the simulator (:class:`JobSpec`), plus what real training
needs: a model the trainers define, and trainer settings (``training``) that a trainer
accepts. One bad field fails the whole document, naming ``jobs[i].field``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Any

import yaml

from mlsched.core.errors import SpecError
from mlsched.core.job import JobSpec
from mlsched.trainers.config import TrainConfig
from mlsched.trainers.models import model_names

__all__ = ["check_trainable", "parse_jobs"]

_TRAIN_FIELDS = {f.name for f in fields(TrainConfig)}


def parse_jobs(document: str, *, where: str = "request") -> list[JobSpec]:
    try:
        raw = yaml.safe_load(document)
    except yaml.YAMLError as err:
        raise SpecError("document", document[:60], f"YAML or JSON ({err})", where=where) from None
    if isinstance(raw, dict) and "jobs" in raw:
        raw = raw["jobs"]
    elif isinstance(raw, dict):
        raw = [raw]
    if not isinstance(raw, Sequence) or isinstance(raw, (str, bytes)) or not raw:
        raise SpecError(
            "jobs", raw, "a non-empty list of job specs (or {jobs: [...]})", where=where
        )
    jobs: list[JobSpec] = []
    seen: set[str] = set()
    for i, entry in enumerate(raw):
        prefix = f"jobs[{i}]"
        try:
            job = JobSpec.from_dict(entry, prefix)
            check_trainable(job, prefix)
        except SpecError as err:
            raise SpecError(err.field, err.value, err.expected, where=where) from None
        if job.job_id in seen:
            raise SpecError(f"{prefix}.job_id", job.job_id, "a job id used once", where=where)
        seen.add(job.job_id)
        jobs.append(job)
    return jobs


def check_trainable(job: JobSpec, prefix: str) -> None:
    """What the real trainers need beyond the simulator's job spec."""
    if job.model not in model_names():
        raise SpecError(f"{prefix}.model", job.model, f"one of {', '.join(model_names())}")
    if job.global_batch is not None:
        raise SpecError(
            f"{prefix}.global_batch",
            job.global_batch,
            "null on the testbed (trainers use a fixed per-worker batch_size)",
        )
    settings: dict[str, Any] = {
        k: v for k, v in job.training.items() if k in _TRAIN_FIELDS and k != "threads"
    }
    try:
        TrainConfig(
            model=job.model,
            arch=job.arch.value,
            mode=job.sync.value,
            checkpoint_dir="/tmp/check",
            batch_size=job.batch_size,
            **settings,
        )
    except SpecError as err:
        raise SpecError(f"{prefix}.training.{err.field}", err.value, err.expected) from None
    except TypeError as err:
        raise SpecError(f"{prefix}.training", job.training, str(err)) from None
    threads = job.training.get("threads", 1)
    if not isinstance(threads, int) or threads < 1:
        raise SpecError(f"{prefix}.training.threads", threads, "an integer >= 1")
