"""Job documents submitted to the testbed: parsed and validated before anything is admitted.

The same job spec as files and the simulator (:class:`JobSpec`), plus what real training
needs: a model the trainers define, and trainer settings (``training``) that a trainer
accepts. One bad field fails the whole document, naming ``jobs[i].field``.
"""

from __future__ import annotations

from collections.abc import Sequence

from mlsched.controller.parsing import DocumentParser
from mlsched.controller.runs import TaskSettings, job_config
from mlsched.core.documents import load_document
from mlsched.core.errors import SpecError
from mlsched.core.job import JobSpec
from mlsched.core.limits import MAX_JOBS_PER_DOCUMENT
from mlsched.trainers.models import check_input, model_names

__all__ = ["check_trainable", "parse_jobs", "warm_up"]


def parse_jobs(
    document: str | bytes,
    *,
    where: str = "request",
    data_root: str = "",
    parser: DocumentParser | None = None,
) -> list[JobSpec]:
    """The jobs of a submitted document, all validated, or a SpecError naming the field.
    ``parser`` parses the document out of process (the controller's); without one, here."""
    if parser is not None:
        raw = parser.parse(document, where=where)
    else:
        raw = load_document(document, where=where)
    if isinstance(raw, dict) and "jobs" in raw:
        raw = raw["jobs"]
    elif isinstance(raw, dict):
        raw = [raw]
    if not isinstance(raw, Sequence) or isinstance(raw, (str, bytes)) or not raw:
        raise SpecError(
            "jobs", raw, "a non-empty list of job specs (or {jobs: [...]})", where=where
        )
    if len(raw) > MAX_JOBS_PER_DOCUMENT:
        raise SpecError(
            "jobs", f"{len(raw)} jobs", f"at most {MAX_JOBS_PER_DOCUMENT} per document", where=where
        )
    jobs: list[JobSpec] = []
    seen: set[str] = set()
    for i, entry in enumerate(raw):
        prefix = f"jobs[{i}]"
        try:
            job = JobSpec.from_dict(entry, prefix)
            check_trainable(job, prefix, data_root=data_root)
        except SpecError as err:
            raise SpecError(err.field, err.value, err.expected, where=where) from None
        if job.job_id in seen:
            raise SpecError(f"{prefix}.job_id", job.job_id, "a job id used once", where=where)
        seen.add(job.job_id)
        jobs.append(job)
    return jobs


def check_trainable(job: JobSpec, prefix: str, *, data_root: str = "") -> None:
    """What the real trainers need beyond the simulator's job spec: a model they define, a
    ``training:`` mapping a :class:`TrainConfig` accepts, a data path under the data root and
    an input size the model can take."""
    if job.model not in model_names():
        raise SpecError(f"{prefix}.model", job.model, f"one of {', '.join(model_names())}")
    if job.global_batch is not None:
        raise SpecError(
            f"{prefix}.global_batch",
            job.global_batch,
            "null on the testbed (trainers use a fixed per-worker batch_size)",
        )
    try:
        cfg = job_config(job, TaskSettings(checkpoint_root="/", data_root=data_root))
        check_input(cfg.model, cfg.image_size, cfg.num_classes)
    except SpecError as err:
        field = err.field.removeprefix("training.")
        where = "" if field in ("job_id", "batch_size", "model") else "training."
        raise SpecError(f"{prefix}.{where}{field}", err.value, err.expected) from None
    except TypeError as err:
        raise SpecError(f"{prefix}.training", job.training, str(err)) from None


def warm_up() -> None:
    """Run the model check once: its first meta-device forward pass imports torch's shape
    machinery (sympy and about 800 modules: a second of held interpreter lock), which would
    otherwise stall every heartbeat at the first submission. A long-running controller
    warms up before it serves, then freezes what it holds (:mod:`mlsched.core.server_gc`)."""
    check_input("resnet20", 32, 10)
