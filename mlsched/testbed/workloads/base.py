"""Workloads: a cluster, a job set and the settings a run needs, built by name or from a file.

A :class:`Workload` is everything the simulator and the engine need besides the policy:
the cluster, the jobs (with arrival slots), the horizon, the slot length and the runtime
families the engine's model uses. Built-in generators register under a name with a
one-line description (:func:`register_workload`); :func:`load_workload` resolves a name to
a generator and anything else to a workload file (:mod:`mlsched.testbed.workloads.trace`),
so the CLI and the experiments treat both alike.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from mlsched.core.cluster import Cluster
from mlsched.core.errors import SpecError
from mlsched.core.job import JobSpec
from mlsched.perfmodel.estimator import FAMILIES

__all__ = [
    "DEFAULT_SLOT_SECONDS",
    "RUNTIME_KINDS",
    "Workload",
    "WorkloadGenerator",
    "builtin_workloads",
    "check_runtime_families",
    "load_workload",
    "register_workload",
]

log = logging.getLogger(__name__)

#: The slot length of a workload that gives none.
DEFAULT_SLOT_SECONDS = 3600.0

#: Notes the loaders keep for themselves, not written back to a file.
_INTERNAL_NOTES = frozenset({"slot_seconds_given"})

#: Job kinds a ``runtime:`` mapping may name (see :class:`RuntimeEstimator`).
RUNTIME_KINDS: tuple[str, ...] = ("ps_async", "ps_sync", "allreduce")


@dataclass(frozen=True)
class Workload:
    """A cluster and a job set, ready to run.

    ``horizon_slots`` is None for open-ended runs (the engine stops when every job is final
    or nothing can change). ``runtime`` maps a job kind to a runtime family name (empty:
    each kind's default). ``notes`` holds facts about how the workload was generated (the
    oasis-paper generator records its resampling rejection rate there).
    """

    name: str
    cluster: Cluster
    jobs: tuple[JobSpec, ...]
    horizon_slots: int | None = None
    slot_seconds: float = DEFAULT_SLOT_SECONDS
    runtime: Mapping[str, str] = field(default_factory=dict)
    description: str = ""
    notes: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "jobs", tuple(sorted(self.jobs, key=lambda j: j.arrival_slot)))
        seen: set[str] = set()
        for i, job in enumerate(self.jobs):
            if job.job_id in seen:
                raise SpecError(f"jobs[{i}].job_id", job.job_id, "a job id used only once")
            seen.add(job.job_id)
        if self.horizon_slots is not None and (
            not isinstance(self.horizon_slots, int) or self.horizon_slots < 1
        ):
            raise SpecError("horizon_slots", self.horizon_slots, "an integer >= 1 or null")
        if not self.slot_seconds > 0:
            raise SpecError("slot_seconds", self.slot_seconds, "a number > 0")
        check_runtime_families(self.runtime)

    def head(self, n: int) -> Workload:
        """The first ``n`` jobs by arrival (for smaller runs of a file workload)."""
        if n < 1:
            raise SpecError("jobs", n, "a job count >= 1")
        return replace(self, jobs=self.jobs[:n])

    def with_settings(
        self, *, horizon_slots: int | None = None, slot_seconds: float | None = None
    ) -> Workload:
        """The same workload with a different horizon and/or slot length."""
        return replace(
            self,
            horizon_slots=self.horizon_slots if horizon_slots is None else horizon_slots,
            slot_seconds=self.slot_seconds if slot_seconds is None else slot_seconds,
        )

    def to_dict(self) -> dict[str, Any]:
        """The workload-file form (see docs/workloads.md), notes included."""
        out: dict[str, Any] = {"name": self.name}
        if self.description:
            out["description"] = self.description
        if self.horizon_slots is not None:
            out["horizon_slots"] = self.horizon_slots
        out["slot_seconds"] = self.slot_seconds
        if self.runtime:
            out["runtime"] = dict(self.runtime)
        out["cluster"] = self.cluster.to_dict()
        notes = {k: v for k, v in self.notes.items() if k not in _INTERNAL_NOTES}
        if notes:
            out["notes"] = notes
        out["jobs"] = [j.to_dict() for j in self.jobs]
        return out


def check_runtime_families(runtime: Mapping[str, Any], field_name: str = "runtime") -> None:
    """Refuse unknown job kinds and unknown family names, naming the entry."""
    for kind, family in runtime.items():
        if kind not in RUNTIME_KINDS:
            raise SpecError(
                f"{field_name}.{kind}", family, f"a job kind among {', '.join(RUNTIME_KINDS)}"
            )
        if family not in FAMILIES:
            raise SpecError(
                f"{field_name}.{kind}",
                family,
                f"a runtime family among {', '.join(sorted(FAMILIES))}",
            )


#: A generator takes a seed and keyword options (``jobs``, ``horizon``, ``slot_seconds``
#: and its own) and returns a workload; the same seed gives the same workload.
WorkloadGenerator = Callable[..., Workload]
G = TypeVar("G", bound=WorkloadGenerator)


@dataclass(frozen=True)
class _Entry:
    name: str
    description: str
    generator: WorkloadGenerator


_REGISTRY: dict[str, _Entry] = {}


def register_workload(name: str, description: str) -> Callable[[G], G]:
    """Decorator: make a generator loadable by ``name``; a name binds only once."""
    if not name or not description:
        raise ValueError("a workload needs a name and a one-line description")

    def deco(fn: G) -> G:
        old = _REGISTRY.get(name)
        if old is not None and old.generator is not fn:
            raise ValueError(
                f"workload name {name!r} is already registered by "
                f"{old.generator.__module__}.{old.generator.__qualname__}"
            )
        _REGISTRY[name] = _Entry(name, description, fn)
        return fn

    return deco


def _load_builtin() -> None:
    import mlsched.testbed.workloads  # noqa: F401  (registers the built-in generators)


def builtin_workloads() -> dict[str, str]:
    """Name -> one-line description of every built-in workload, sorted by name."""
    _load_builtin()
    return {n: _REGISTRY[n].description for n in sorted(_REGISTRY)}


def load_workload(
    name_or_path: str | Path,
    *,
    seed: int = 0,
    jobs: int | None = None,
    horizon: int | None = None,
    slot_seconds: float | None = None,
    options: Mapping[str, Any] | None = None,
) -> Workload:
    """A built-in workload by name, or a workload file (YAML, JSON or CSV) by path.

    ``jobs``, ``horizon`` and ``slot_seconds`` scale a generator (oasis-paper draws its
    arrivals over the horizon) or, for a file, keep its first ``jobs`` jobs and override
    its settings. ``options`` go to the generator as keywords (``servers=10``), or, for a
    CSV trace, may name its ``cluster`` file. Unknown names and options raise SpecError.
    """
    _load_builtin()
    key = str(name_or_path)
    entry = _REGISTRY.get(key)
    if entry is not None:
        return _generate(
            entry,
            seed=seed,
            jobs=jobs,
            horizon=horizon,
            slot_seconds=slot_seconds,
            options=dict(options or {}),
        )
    path = Path(key)
    if not path.suffix and not path.exists():
        raise SpecError(
            "workload",
            key,
            f"a built-in workload ({', '.join(sorted(_REGISTRY))}) or a .yaml/.json/.csv file",
        )
    from mlsched.testbed.workloads.trace import load_workload_file

    opts = dict(options or {})
    cluster = opts.pop("cluster", None)
    if opts:
        raise SpecError(
            f"options.{sorted(opts)[0]}",
            opts[sorted(opts)[0]],
            "no generator options for a workload file (only 'cluster' for CSV)",
        )
    from mlsched.testbed.workloads.traps import warn_traps

    workload = load_workload_file(path, cluster=cluster)
    if jobs is not None:
        workload = workload.head(jobs)
    given = workload.notes.get("slot_seconds_given", True)
    warn_traps(
        str(path),
        workload.jobs,
        file_slot_seconds=workload.slot_seconds if given else None,
        slot_seconds=slot_seconds,
    )
    return workload.with_settings(horizon_slots=horizon, slot_seconds=slot_seconds)


def _generate(
    entry: _Entry,
    *,
    seed: int,
    jobs: int | None,
    horizon: int | None,
    slot_seconds: float | None,
    options: dict[str, Any],
) -> Workload:
    params = inspect.signature(entry.generator).parameters
    kwargs: dict[str, Any] = {"seed": seed}
    for key, value in (("jobs", jobs), ("horizon", horizon), ("slot_seconds", slot_seconds)):
        if value is not None:
            kwargs[key] = value
    kwargs.update(options)
    for key in kwargs:
        if key not in params:
            allowed = ", ".join(p for p in params if p != "seed")
            raise SpecError(
                f"options.{key}", kwargs[key], f"an option of workload {entry.name!r}: {allowed}"
            )
    return entry.generator(**kwargs)
