"""A job's measured costs, read from a profile: the simulator's truth and the model's prior.

A profile (:mod:`mlsched.perfmodel.profile`) has a cell per (model, kind, workers, device
type), measured with one batch and image size. A job is matched to the cell of its model,
kind (:func:`profile_kind`), worker count and device type; where the profile lacks that
worker count, the nearest measured one stands in, its communication scaled as the job's
kind scales with workers (a ring moves ``2(n-1)/n`` of the gradient per worker; the
workers of a parameter server share its links, so ``n`` over the measured count).
Compute scales with the samples a worker processes per iteration: the batch size, times
the image's pixels (``image_size`` squared) for every model the trainers have (their
first layer and all convolutions run per pixel).

What a one-machine cell cannot say: the network between servers. A profile measured on
one machine moves its bytes over loopback, so a placement across servers adds the wire time
of the job's gradient over its links (the runtime family's nominal communication time for
that placement); the simulator does that (:mod:`mlsched.engine.simulator`). A cell measured
through a cluster's agents (``placement`` set) moved its bytes over that cluster's links:
a job placed in the same shape (:func:`placement_shape`) takes it as it is, links included.
Cells are chosen by shape first (the placement's own, then a one-machine cell, then any
other shape), then by the nearest worker count.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mlsched.core.allocation import Placement
from mlsched.core.cluster import Cluster
from mlsched.core.job import Arch, JobSpec, SyncMode
from mlsched.perfmodel.profile import PLACEMENTS, Cell, Profile

__all__ = ["CellMatch", "ProfileLookup", "job_cell", "placement_shape", "profile_kind"]

_DEFAULT_IMAGE = 32  # the trainers' default image side (TrainConfig.image_size)


def profile_kind(job: JobSpec) -> str:
    """The profile kind a job's processes train as: ``ps_async``, ``ps_sync``, ``ring``
    (torchrun DDP) or ``horovod`` (an all-reduce job with ``training.backend: horovod``)."""
    if job.arch is Arch.ALLREDUCE:
        return "horovod" if str(job.training.get("backend", "ddp")) == "horovod" else "ring"
    return "ps_async" if job.sync is SyncMode.ASYNC else "ps_sync"


def job_cell(job: JobSpec) -> tuple[str, str, int]:
    """The cell a job is measured in, (model, kind, workers): the kind as it is matched
    (:func:`profile_kind`), the workers the job asks for."""
    return (job.model, profile_kind(job), job.requested_workers or job.max_workers or 1)


@dataclass(frozen=True)
class CellMatch:
    """The cell a job's iteration comes from, and how to scale it to the job: compute
    by ``compute_factor`` (batch and image), communication by ``comm_factor`` (workers)."""

    cell: Cell
    workers: int  # the job's
    compute_factor: float
    comm_factor: float

    @property
    def exact(self) -> bool:
        return self.cell.workers == self.workers

    @property
    def links_measured(self) -> bool:
        """Its communication crossed a cluster's links (no wire time is to be added)."""
        return self.cell.placement is not None

    @property
    def compute_s(self) -> float:
        c = self.cell
        base = c.compute_s if c.compute_s is not None else c.iteration_s
        return base * self.compute_factor

    @property
    def comm_s(self) -> float:
        c = self.cell
        return (c.comm_s or 0.0) * self.comm_factor


class ProfileLookup:
    """Cells of one profile by (model, kind, device type), ordered by worker count."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        settings = profile.settings
        self._batch = _positive(settings.get("batch_size"))
        self._image = _positive(settings.get("image_size"))
        self._default_device = str(profile.device.get("type") or "cpu")
        self._cells: dict[tuple[str, str, str], dict[str | None, list[Cell]]] = {}
        for cell in sorted(profile.cells, key=lambda c: c.workers):
            shapes = self._cells.setdefault((cell.model, cell.kind, cell.device_type), {})
            shapes.setdefault(cell.placement, []).append(cell)
        self._devices = {c.device_type for c in profile.cells}

    def device(self, device_type: str | None) -> str:
        """The profile's device type for servers of ``device_type`` (None: no GPU type
        declared, the profile's own device)."""
        return device_type if device_type is not None else self._default_device

    def covers(self, job: JobSpec, device_type: str | None = None) -> bool:
        key = (job.model, profile_kind(job), self.device(device_type))
        return key in self._cells

    def match(
        self,
        job: JobSpec,
        workers: int,
        device_type: str | None = None,
        placement: str | None = None,
    ) -> CellMatch | None:
        """The job's cell at ``workers`` workers on ``device_type`` in the shape
        ``placement`` (None: unknown); None where the profile has no cell of the job's
        model, kind and device type."""
        kind = profile_kind(job)
        shapes = self._cells.get((job.model, kind, self.device(device_type)))
        if not shapes or workers < 1:
            return None
        order = [placement, None, *(p for p in PLACEMENTS if p != placement)]
        cells = next(shapes[p] for p in order if p in shapes)
        # The nearest worker count; a tie goes to the larger (it communicates like the job).
        cell = min(cells, key=lambda c: (abs(c.workers - workers), -c.workers))
        if workers > 1 and cell.workers == 1:
            multi = [c for c in cells if c.workers > 1]  # one worker says nothing of comm
            if multi:
                cell = min(multi, key=lambda c: abs(c.workers - workers))
        return CellMatch(
            cell,
            workers,
            self._compute_factor(job, cell),
            _comm_factor(kind, cell.workers, workers),
        )

    def _compute_factor(self, job: JobSpec, cell: Cell) -> float:
        batch = cell.batch_size or self._batch or job.batch_size
        image = cell.image_size or self._image or _DEFAULT_IMAGE
        job_image = _positive(job.training.get("image_size")) or _DEFAULT_IMAGE
        return (job.batch_size / batch) * (job_image / image) ** 2

    def coverage(self, jobs: Mapping[str, JobSpec]) -> tuple[int, list[str]]:
        """How many of ``jobs`` the profile has cells for, and the (model, kind) pairs it
        lacks, each once."""
        covered, missing = 0, set()
        for job in jobs.values():
            if any(self.covers(job, d) for d in self._devices) or self.covers(job):
                covered += 1
            else:
                missing.add(f"{job.model}/{profile_kind(job)}")
        return covered, sorted(missing)


def placement_shape(p: Placement, cluster: Cluster) -> str:
    """``host``, ``rack`` or ``racks``: where ``p``'s processes (workers and PSs) are."""
    servers = {s for s, _ in (*p.workers, *p.ps)}
    if len(servers) <= 1:
        return "host"
    racks = {cluster.servers[s].rack for s in servers}
    return "rack" if len(racks) == 1 else "racks"


def _comm_factor(kind: str, measured: int, workers: int) -> float:
    if measured == workers:
        return 1.0
    if kind in ("ring", "horovod"):
        if workers <= 1:
            return 0.0
        if measured <= 1:
            return 1.0
        return ((workers - 1) / workers) / ((measured - 1) / measured)
    return workers / measured  # the PS's links are shared by its workers


def _positive(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return None
