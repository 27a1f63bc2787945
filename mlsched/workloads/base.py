"""Workloads: a cluster, a job set and the settings a run needs, built by name or from a file.

A :class:`Workload` is everything the simulator and the engine need besides the policy:
the cluster, the jobs (with arrival slots), the horizon, the slot length and the runtime
families the engine's model uses. Built-in generators register under a name with a
one-line description (:func:`register_workload`);
:func:`mlsched.workloads.loading.load_workload` resolves a name to a generator and anything
else to a workload file (:mod:`mlsched.workloads.trace`), so the CLI and the experiments
treat both alike.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
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
    "check_runtime_families",
    "register_workload",
    "registered_workloads",
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
class GeneratorEntry:
    name: str
    description: str
    generator: WorkloadGenerator


_REGISTRY: dict[str, GeneratorEntry] = {}


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
        _REGISTRY[name] = GeneratorEntry(name, description, fn)
        return fn

    return deco


def registered_workloads() -> dict[str, GeneratorEntry]:
    """Name -> entry of every generator registered so far (the built-ins once
    :func:`mlsched.workloads.loading.registered_workloads` has imported them)."""
    return dict(_REGISTRY)
