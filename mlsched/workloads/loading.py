"""Load a workload by name (a built-in generator) or from a file (YAML, JSON or CSV).

A name is looked up after the built-in generators are imported (they register
themselves, :func:`mlsched.workloads.base.register_workload`); a trace read in place
imports none of them.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mlsched.core.errors import SpecError
from mlsched.workloads.base import GeneratorEntry, Workload
from mlsched.workloads.base import registered_workloads as _registered
from mlsched.workloads.trace import load_workload_file
from mlsched.workloads.traps import warn_traps

__all__ = ["builtin_workloads", "from_trace", "load_workload"]


def registered_workloads() -> dict[str, GeneratorEntry]:
    """Every registered generator, the built-in ones imported first (here, not at this
    module's import: a trace read in place needs none of them)."""
    from mlsched.workloads import (  # noqa: F401  (importing registers them)
        demo,
        dps,
        gadget,
        hetero,
        oasis,
        oasis_testbed,
        pdors,
    )

    return _registered()


def builtin_workloads() -> dict[str, str]:
    """Name -> one-line description of every built-in workload, sorted by name."""
    registry = registered_workloads()
    return {n: registry[n].description for n in sorted(registry)}


def load_workload(
    name_or_path: str | Path,
    *,
    seed: int = 0,
    jobs: int | None = None,
    horizon: int | None = None,
    slot_seconds: float | None = None,
    options: Mapping[str, Any] | None = None,
    trace_format: str | None = None,
) -> Workload:
    """A built-in workload by name, or a workload file (YAML, JSON or CSV) by path.

    ``jobs``, ``horizon`` and ``slot_seconds`` scale a generator (oasis-paper draws its
    arrivals over the horizon) or, for a file, keep its first ``jobs`` jobs and override
    its settings. ``options`` go to the generator as keywords (``servers=10``), or, for a
    CSV trace, may name its ``cluster`` file. Unknown names and options raise SpecError.
    With ``trace_format``, the file is a public trace read as ``mlsched trace import``
    reads it (:func:`from_trace`), in the same process.
    """
    if trace_format is not None:
        return from_trace(
            name_or_path,
            trace_format,
            jobs=jobs,
            horizon=horizon,
            slot_seconds=slot_seconds,
            options=options,
        )
    registry = registered_workloads()
    key = str(name_or_path)
    entry = registry.get(key)
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
            f"a built-in workload ({', '.join(sorted(registry))}) or a .yaml/.json/.csv file",
        )
    opts = dict(options or {})
    cluster = opts.pop("cluster", None)
    if opts:
        raise SpecError(
            f"options.{sorted(opts)[0]}",
            opts[sorted(opts)[0]],
            "no generator options for a workload file (only 'cluster' for CSV)",
        )
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


#: What ``-W`` may give a trace read in place (``trace import``'s options of that name).
_TRACE_OPTIONS = ("cluster", "throughputs", "tasks", "ignore_gpu_type", "skip_invalid")


def from_trace(
    path: str | Path,
    fmt: str,
    *,
    jobs: int | None = None,
    horizon: int | None = None,
    slot_seconds: float | None = None,
    options: Mapping[str, Any] | None = None,
) -> Workload:
    """A public trace as a workload, without a workload file between: the jobs ``mlsched
    trace import`` would write, built in memory (what the import assumed is in the notes).
    ``options`` holds the import's ``cluster`` (a file; required), ``throughputs``,
    ``tasks``, ``ignore_gpu_type`` and ``skip_invalid``."""
    from mlsched.workloads.trace import load_cluster_file
    from mlsched.workloads.traces import import_trace

    opts = dict(options or {})
    for key in opts:
        if key not in _TRACE_OPTIONS:
            raise SpecError(
                f"options.{key}", opts[key], f"an option of a trace: {', '.join(_TRACE_OPTIONS)}"
            )
    if opts.get("cluster") is None:
        raise SpecError("--cluster", None, "a cluster file for the trace (YAML/JSON)")
    cluster = load_cluster_file(opts["cluster"])
    imported = import_trace(
        path,
        fmt,
        throughputs=opts.get("throughputs"),
        tasks=opts.get("tasks"),
        cluster=cluster,
        slot_seconds=slot_seconds,
        ignore_gpu_type=bool(opts.get("ignore_gpu_type", False)),
        skip_invalid=bool(opts.get("skip_invalid", False)),
        limit=jobs,
    )
    return Workload(
        name=imported.name,
        cluster=cluster,
        jobs=tuple(imported.jobs),
        horizon_slots=horizon,
        slot_seconds=imported.slot_seconds,
        description=imported.notes["source"]["description"],
        notes={**imported.notes, "slot_seconds_given": slot_seconds is not None},
    )


def _generate(
    entry: GeneratorEntry,
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
