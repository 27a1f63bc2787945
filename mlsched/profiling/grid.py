"""A profile's grid, and the run that fills a profile file cell by cell.

The run writes the file after every cell (atomically), so an interrupted run keeps what it
measured; run again with the same file and settings, it measures only the cells missing.
A file measured elsewhere (another machine, device or settings) is refused, the differing
field named: one file holds the numbers of one machine.

Cells in stand-in device slices may be measured at once (``at_once``, each cell in a process
of its own, so each has slice groups of its own): where the slices of all of them fit in the
machine's cores, each process still gets its share, as the jobs of a real run on that
machine share it (:func:`cells_at_once`).
"""

from __future__ import annotations

import multiprocessing
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import BrokenExecutor, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlsched.core.errors import SpecError
from mlsched.perfmodel.profile import KINDS, Cell, Profile, kind_arch, load_profile
from mlsched.profiling.measure import Settings, device_info, machine_info, measure_cell
from mlsched.trainers.cpu_share import usable_cores

__all__ = [
    "MAX_CELLS",
    "CellList",
    "Grid",
    "ProfileRun",
    "cells_at_once",
    "cells_for_jobs",
    "run_grid",
]

#: A grid measures at most this many cells (each is two real runs of a job).
MAX_CELLS = 200
MAX_WORKERS = 16


@dataclass(frozen=True)
class Grid:
    models: tuple[str, ...] = ("resnet20", "vgg11-narrow", "mlp")
    kinds: tuple[str, ...] = KINDS
    workers: tuple[int, ...] = (1, 2)

    def __post_init__(self) -> None:
        from mlsched.trainers.models import model_names

        known = model_names()
        for i, m in enumerate(self.models):
            if m not in known:
                raise SpecError(f"models[{i}]", m, f"one of {', '.join(known)}")
        for i, k in enumerate(self.kinds):
            if k not in KINDS:
                raise SpecError(f"kinds[{i}]", k, f"one of {', '.join(KINDS)}")
        for i, w in enumerate(self.workers):
            if not isinstance(w, int) or isinstance(w, bool) or not 1 <= w <= MAX_WORKERS:
                raise SpecError(f"workers[{i}]", w, f"an integer in 1..{MAX_WORKERS}")
        for name in ("models", "kinds", "workers"):
            values = getattr(self, name)
            if not values or len(set(values)) != len(values):
                raise SpecError(name, list(values), "one or more values, each once")
        if self.size > MAX_CELLS:
            raise SpecError("grid", self.size, f"at most {MAX_CELLS} cells")

    @property
    def size(self) -> int:
        return len(self.models) * len(self.kinds) * len(self.workers)

    def cells(self) -> list[tuple[str, str, int]]:
        return [(m, k, w) for m in self.models for k in self.kinds for w in self.workers]


@dataclass(frozen=True)
class CellList:
    """Named cells rather than a product: what a known job mix needs."""

    entries: tuple[tuple[str, str, int], ...]

    def __post_init__(self) -> None:
        if not self.entries or len(set(self.entries)) != len(self.entries):
            raise SpecError("cells", list(self.entries), "one or more cells, each once")
        if len(self.entries) > MAX_CELLS:
            raise SpecError("cells", len(self.entries), f"at most {MAX_CELLS} cells")
        for i, (model, kind, workers) in enumerate(self.entries):  # as a grid of one
            try:
                Grid((model,), (kind,), (workers,))
            except SpecError as err:
                raise SpecError(f"cells[{i}]", f"{model}:{kind}:{workers}", err.expected) from None

    @property
    def size(self) -> int:
        return len(self.entries)

    def cells(self) -> list[tuple[str, str, int]]:
        return list(self.entries)


def cells_for_jobs(jobs: Sequence[Mapping[str, Any]]) -> CellList:
    """The cells a job mix needs, (model, kind, workers) each once in job order: the kind
    as the simulator matches it (``profile_kind``), the workers the job asks for."""
    from mlsched.core.job import JobSpec
    from mlsched.perfmodel.profiled import profile_kind

    seen: dict[tuple[str, str, int], None] = {}
    for i, raw in enumerate(jobs):
        spec = JobSpec.from_dict(raw, f"jobs[{i}]")
        workers = spec.requested_workers or spec.max_workers or 1
        seen[(spec.model, profile_kind(spec), workers)] = None
    return CellList(tuple(seen))


@dataclass
class ProfileRun:
    profile: Profile
    measured: list[tuple[str, str, int]]
    kept: int  # cells already in the file
    skipped: list[tuple[tuple[str, str, int], str]]  # (cell, why)
    failed: list[tuple[tuple[str, str, int], str]]


def cells_at_once(cells: Sequence[tuple[str, str, int]], settings: Settings) -> int:
    """How many of ``cells`` :func:`run_grid` may measure at once: all of them where each
    process runs in a device slice and the slices of all of them fit in the cores this
    process may use (with a fifth of a core to spare for this process), else one."""
    slices = settings.slices()
    if slices is None or len(cells) < 2:
        return 1
    demand = sum(
        slices.cores(ps=False, ranks=workers)
        + (slices.cores(ps=True, ranks=0) if kind_arch(kind)[0] == "ps" else 0.0)
        for _, kind, workers in cells
    )
    return len(cells) if demand + 0.2 <= usable_cores() else 1


def run_grid(
    grid: Grid | CellList,
    settings: Settings,
    out: Path,
    *,
    device_type: str | None = None,
    say: Callable[[str], None] = print,
    at_once: int = 1,
) -> ProfileRun:
    """Measure every cell of ``grid`` not yet in ``out`` and write ``out`` after each
    (``at_once`` cells at a time, :func:`cells_at_once`; reported in the grid's order)."""
    from mlsched.trainers.allreduce.horovod import horovod_available

    machine, device = machine_info(), device_info(settings.device)
    dtype = device_type or ("cpu" if device["type"] == "cpu" else _type_name(device["name"]))
    if out.exists():
        profile = load_profile(out)
        profile.check_matches(machine, device, settings.to_dict())
    else:
        profile = Profile(machine, device, settings.to_dict(), created_unix=time.time())
    todo = [c for c in grid.cells() if profile.cell(*c, dtype) is None]
    run = ProfileRun(profile, [], grid.size - len(todo), [], [])
    say(
        f"profile {out}: {grid.size} cells on {dtype}, {run.kept} already measured, {len(todo)} to go"
    )
    started = time.monotonic()
    runnable = []
    for i, (model, kind, workers) in enumerate(todo, 1):
        if kind == "horovod" and not horovod_available():
            run.skipped.append(((model, kind, workers), "Horovod not installed (make horovod)"))
            say(f"[{i}/{len(todo)}] {model} {kind} x{workers}: skipped, Horovod not installed")
        else:
            runnable.append((i, (model, kind, workers)))
    for i, cell, measured in _measured(runnable, dtype, settings, at_once):
        model, kind, workers = cell
        if isinstance(measured, str):
            run.failed.append((cell, measured))
            say(f"[{i}/{len(todo)}] {model} {kind} x{workers}: FAILED {measured[:200]}")
            continue
        run.profile = run.profile.with_cell(measured)
        run.profile.save(out)
        run.measured.append(cell)
        left = (time.monotonic() - started) / i * (len(todo) - i)
        say(
            f"[{i}/{len(todo)}] {model} {kind} x{workers}: {measured.iteration_s:.4f} s/it "
            f"(compute {measured.compute_s:.4f}, comm {measured.comm_s:.4f}), start-up "
            f"{measured.startup_s:.2f} s, restart {measured.restart_s:.2f} s; ~{left:.0f} s left"
        )
    if not run.measured and not out.exists():
        run.profile.save(out)  # an empty grid run still leaves a file that says where
    return run


def _measure_one(cell: tuple[str, str, int], dtype: str, settings: Settings) -> Cell | str:
    """One cell measured in a directory of its own; a failure's reason instead of a cell."""
    with tempfile.TemporaryDirectory(prefix="mlsched-profile-") as work:
        try:
            return measure_cell(*cell, dtype, settings, Path(work))
        except (RuntimeError, OSError, ValueError) as err:
            return str(err)[:300]


def _measured(
    runnable: Sequence[tuple[int, tuple[str, str, int]]], dtype: str, settings: Settings,
    at_once: int,
) -> Iterator[tuple[int, tuple[str, str, int], Cell | str]]:  # fmt: skip
    """Each cell's outcome, in order; ``at_once`` > 1: measured meanwhile in processes of
    their own (spawned: the cells' slice groups are named by process)."""
    if at_once <= 1 or len(runnable) < 2:
        for i, cell in runnable:
            yield i, cell, _measure_one(cell, dtype, settings)
        return
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(at_once, len(runnable)), mp_context=ctx) as pool:
        futures = [
            (i, cell, pool.submit(_measure_one, cell, dtype, settings)) for i, cell in runnable
        ]
        for i, cell, future in futures:
            try:
                got = future.result()
            except BrokenExecutor as err:  # a measuring process died: the cell failed
                got = f"its measuring process ended abruptly ({err})"
            yield i, cell, got


def _type_name(name: str) -> str:
    """A device type from a CUDA device's name: "NVIDIA H100 80GB HBM3" -> "h100"."""
    for word in name.lower().replace("nvidia", " ").split():
        if any(ch.isdigit() for ch in word) and any(ch.isalpha() for ch in word):
            return word
    return name.lower().replace(" ", "-")[:32] or "gpu"
