"""A profile's grid, and the run that fills a profile file cell by cell.

The run writes the file after every cell (atomically), so an interrupted run keeps what it
measured; run again with the same file and settings, it measures only the cells missing.
A file measured elsewhere (another machine, device or settings) is refused, the differing
field named: one file holds the numbers of one machine.

Cells in stand-in device slices may be measured at once (each cell in a process of its own,
so each has slice groups of its own): as many at a time as their slices fit in the
machine's cores (``budget``, :func:`measure_budget`), so that each process still gets its
share, as the jobs of a real run on that machine share it. A cell's start-ups (two Python
processes importing torch, 10-20 s each in a quarter core) are most of its time, and they
overlap.
"""

from __future__ import annotations

import multiprocessing
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import (
    FIRST_COMPLETED,
    BrokenExecutor,
    Future,
    ProcessPoolExecutor,
    wait,
)
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
    "cell_cores",
    "cells_for_jobs",
    "fitting",
    "measure_budget",
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
    """The cells a job mix needs (``profiled.job_cell``: the kind as the simulator matches
    it, the workers the job asks for), each once in job order."""
    from mlsched.core.job import JobSpec
    from mlsched.perfmodel.profiled import job_cell

    seen = {job_cell(JobSpec.from_dict(raw, f"jobs[{i}]")): None for i, raw in enumerate(jobs)}
    return CellList(tuple(seen))


@dataclass
class ProfileRun:
    profile: Profile
    measured: list[tuple[str, str, int]]
    kept: int  # cells already in the file
    skipped: list[tuple[tuple[str, str, int], str]]  # (cell, why)
    failed: list[tuple[tuple[str, str, int], str]]


#: Cores kept free of the cells' slices when they are measured together: the measuring
#: processes' own, and the kernel's.
SPARE_CORES = 0.2


def cell_cores(cell: tuple[str, str, int], settings: Settings) -> float | None:
    """The cores a cell's processes hold in their device slices (its ranks', its PS's);
    None where they run unsliced (a whole machine, or a GPU each)."""
    slices = settings.slices()
    if slices is None:
        return None
    _, kind, workers = cell
    ps = slices.cores(ps=True, ranks=0) if kind_arch(kind)[0] == "ps" else 0.0
    return slices.cores(ps=False, ranks=workers) + ps


def measure_budget(settings: Settings) -> float | None:
    """The cores the slices of cells measured together may hold (:func:`run_grid`'s
    ``budget``): this process's cores less :data:`SPARE_CORES`; None without slices,
    where each cell wants the whole machine."""
    if settings.slices() is None:
        return None
    return usable_cores() - SPARE_CORES


def run_grid(
    grid: Grid | CellList,
    settings: Settings,
    out: Path,
    *,
    device_type: str | None = None,
    say: Callable[[str], None] = print,
    at_once: int = 1,
    budget: float | None = None,
) -> ProfileRun:
    """Measure every cell of ``grid`` not yet in ``out`` and write ``out`` after each,
    reported in the grid's order: ``at_once`` cells at a time, or, with ``budget``
    (:func:`measure_budget`), as many at a time as their slices' cores fit in it, a cell
    starting as soon as the cells before it leave it room (:func:`cell_cores`)."""
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
    for i, cell, measured in _measured(runnable, dtype, settings, at_once, budget):
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


def fitting(
    waiting: Sequence[int], cores: Sequence[float], held: float, room: float, *, idle: bool
) -> list[int]:
    """The waiting cells (indices into ``cores``) that start now, in order: each whose
    cores fit in what ``held`` leaves of ``room``; with nothing running (``idle``), the
    first whatever it holds, so that a cell larger than the room still runs, alone."""
    out: list[int] = []
    for k in waiting:
        if (idle and not out) or held + cores[k] <= room + 1e-9:
            out.append(k)
            held += cores[k]
    return out


def _measured(
    runnable: Sequence[tuple[int, tuple[str, str, int]]], dtype: str, settings: Settings,
    at_once: int, budget: float | None,
) -> Iterator[tuple[int, tuple[str, str, int], Cell | str]]:  # fmt: skip
    """Each cell's outcome, in order. Cells measured together run in processes of their
    own (spawned: the cells' slice groups are named by process): ``at_once`` of them, or
    those whose :func:`cell_cores` fit in ``budget`` together, the first waiting cell that
    fits starting whenever one ends (one that fits nowhere runs alone)."""
    if (budget is None and at_once <= 1) or len(runnable) < 2:
        for i, cell in runnable:
            yield i, cell, _measure_one(cell, dtype, settings)
        return
    cores = [1.0 if budget is None else cell_cores(cell, settings) or 0.0 for _, cell in runnable]
    room = float(at_once) if budget is None else budget
    waiting = list(range(len(runnable)))
    running: dict[Future[Cell | str], int] = {}
    done: dict[int, Cell | str] = {}
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=len(runnable), mp_context=ctx) as pool:
        following = 0  # the next cell to report, in order
        while following < len(runnable):
            held = sum(cores[k] for k in running.values())
            for k in fitting(waiting, cores, held, room, idle=not running):
                running[pool.submit(_measure_one, runnable[k][1], dtype, settings)] = k
                waiting.remove(k)
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                k = running.pop(future)
                try:
                    done[k] = future.result()
                except BrokenExecutor as err:  # a measuring process died: the cell failed
                    done[k] = f"its measuring process ended abruptly ({err})"
            while following in done:
                i, cell = runnable[following]
                yield i, cell, done.pop(following)
                following += 1


def _type_name(name: str) -> str:
    """A device type from a CUDA device's name: "NVIDIA H100 80GB HBM3" -> "h100"."""
    for word in name.lower().replace("nvidia", " ").split():
        if any(ch.isdigit() for ch in word) and any(ch.isalpha() for ch in word):
            return word
    return name.lower().replace(" ", "-")[:32] or "gpu"
