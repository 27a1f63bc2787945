"""Growing one job's placement a step at a time on a :class:`TaskFiller`, undoably.

A *step* is a few tasks (a first step of ``min_workers`` workers and their PSs, or one more
worker or PS) that a policy grants all or none. Each task goes first to a server the job
used in its previous placement, while that server's previous count lasts (its *sticky
quota*, reserved on the filler at the start of a pass so that jobs placed earlier leave it
alone), else where the policy's fallback says (round-robin for DRF, packed for Optimus).
:func:`undo` reverses a step exactly, so Optimus can evaluate a candidate in place.
:func:`pack_whole` places a first step the per-task strategies miss on an empty cluster with
:func:`mlsched.scheduler.placement.pack`, the search admission used, so an admitted job can
always start once it comes first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from mlsched.core.allocation import Placement
from mlsched.scheduler.baselines.taskfill import JobDemand, TaskFiller, to_placement
from mlsched.scheduler.placement import pack
from mlsched.scheduler.view import CapacityLedger

__all__ = ["Fallback", "JobTasks", "Step", "grow", "pack_placement", "pack_whole", "undo"]


class JobTasks:
    """One job's tasks as a pass grants them: counts per server and the sticky quotas.

    ``sticky_w``/``sticky_p`` start as the job's previous per-server counts; a task goes
    there first while the quota lasts, so unchanged counts give back the same placement.
    """

    __slots__ = ("dem", "p", "sticky_p", "sticky_w", "w", "y", "z")

    def __init__(self, dem: JobDemand, previous: Placement | None) -> None:
        self.dem = dem
        self.w: dict[int, int] = {}
        self.p: dict[int, int] = {}
        self.y = 0
        self.z = 0
        self.sticky_w = dict(previous.workers) if previous is not None else {}
        self.sticky_p = dict(previous.ps) if previous is not None else {}

    def placement(self, previous: Placement | None) -> Placement:
        return to_placement(self.w, self.p, previous)

    @staticmethod
    def reserve_all(filler: TaskFiller, jobs: Iterable[JobTasks]) -> None:
        """Reserve the jobs' sticky quotas (see :meth:`TaskFiller.reserve`) in one array
        operation (a re-plan reserves every running job's placement); the same sums as
        ``TaskFiller.reserve`` one at a time, added in the same order."""
        rows: list[int] = []
        amounts: list[np.ndarray] = []
        for t in jobs:
            for sticky, demand in ((t.sticky_w, t.dem.worker), (t.sticky_p, t.dem.ps)):
                for s, c in sticky.items():
                    rows.append(s)
                    amounts.append(demand if c == 1 else demand * c)
        if rows:
            np.add.at(filler.reserved, rows, np.array(amounts))
            filler.has_reserved = True

    def release(self, filler: TaskFiller) -> None:
        """Drop the sticky quotas left and their reservations (the job stops growing)."""
        for s, c in self.sticky_w.items():
            filler.unreserve(s, self.dem.worker, c)
        for s, c in self.sticky_p.items():
            filler.unreserve(s, self.dem.ps, c)
        self.sticky_w, self.sticky_p = {}, {}


#: Where a task goes when no sticky quota takes it: (filler, job, is_worker) -> server or -1.
Fallback = Callable[[TaskFiller, JobTasks, bool], int]


@dataclass
class Step:
    """What one :func:`grow` did, for :func:`undo`: the tasks taken (is worker, server),
    the reservations given up (is worker, server, count) and the sticky quotas as they were
    before it (restored as they were, order included)."""

    taken: list[tuple[bool, int]]
    sticky_w: dict[int, int]
    sticky_p: dict[int, int]
    unreserved: list[tuple[bool, int, int]] = field(default_factory=list)


def grow(filler: TaskFiller, tasks: JobTasks, dy: int, dz: int, fallback: Fallback) -> Step | None:
    """Give ``tasks`` ``dy`` more workers and ``dz`` more PSs, each on a sticky server with
    room or else where ``fallback`` says; all of them (returns the step, which
    :func:`undo` reverses) or, when one does not fit, none (returns None)."""
    dem = tasks.dem
    done = Step([], dict(tasks.sticky_w), dict(tasks.sticky_p))
    for is_worker, n in ((True, dy), (False, dz)):
        demand = dem.worker if is_worker else dem.ps
        sticky = tasks.sticky_w if is_worker else tasks.sticky_p
        counts = tasks.w if is_worker else tasks.p
        for _ in range(n):
            s = -1
            if not is_worker and dem.one_ps_host and counts:
                # Pinned to the job's PS host: there or nowhere.
                s = next(iter(counts))
                if not filler.fits(s, demand):
                    undo(filler, tasks, done)
                    return None
                if sticky.get(s):
                    sticky[s] -= 1
                    if not sticky[s]:
                        del sticky[s]
                    filler.unreserve(s, demand)
                    done.unreserved.append((is_worker, s, 1))
            for cand in list(sticky) if s < 0 else []:
                if filler.fits(cand, demand):
                    s = cand
                    sticky[cand] -= 1
                    if not sticky[cand]:
                        del sticky[cand]
                    filler.unreserve(s, demand)
                    done.unreserved.append((is_worker, s, 1))
                    break
                # Full: capacity only shrinks during a pass, so drop the quota.
                done.unreserved.append((is_worker, cand, sticky[cand]))
                filler.unreserve(cand, demand, sticky.pop(cand))
            if s < 0:
                s = fallback(filler, tasks, is_worker)
            if s < 0:
                undo(filler, tasks, done)
                return None
            filler.take(s, demand)
            counts[s] = counts.get(s, 0) + 1
            done.taken.append((is_worker, s))
            if is_worker:
                tasks.y += 1
            else:
                tasks.z += 1
    return done


def undo(filler: TaskFiller, tasks: JobTasks, step: Step) -> None:
    """Reverse a step of :func:`grow`: capacity, counts and sticky quotas."""
    for is_worker, s in reversed(step.taken):
        counts = tasks.w if is_worker else tasks.p
        filler.give(s, tasks.dem.worker if is_worker else tasks.dem.ps)
        counts[s] -= 1
        if not counts[s]:
            del counts[s]
        if is_worker:
            tasks.y -= 1
        else:
            tasks.z -= 1
    for is_worker, s, c in step.unreserved:
        filler.reserve(s, tasks.dem.worker if is_worker else tasks.dem.ps, c)
    tasks.sticky_w, tasks.sticky_p = step.sticky_w, step.sticky_p


def pack_placement(
    filler: TaskFiller, dem: JobDemand, n_workers: int, n_ps: int
) -> Placement | None:
    """The whole job placed by :func:`~mlsched.scheduler.placement.pack` (the search
    admission used) on the current free capacity and taken from ``filler``; None if it does
    not fit. Slow next to the per-task strategies: a fallback for a job those cannot start
    on an empty filler, so that an admitted job can always start."""
    ledger = CapacityLedger(filler.cluster, filler.free)
    placement = pack(dem.job, n_workers, n_ps, ledger, one_ps_host=dem.one_ps_host)
    if placement is not None:
        filler.take_placement(dem, placement)
    return placement


def pack_whole(filler: TaskFiller, tasks: JobTasks, n_workers: int, n_ps: int) -> bool:
    """:func:`pack_placement` as a job's first step; its sticky quotas are dropped."""
    tasks.release(filler)
    placement = pack_placement(filler, tasks.dem, n_workers, n_ps)
    if placement is None:
        return False
    tasks.w.update(placement.workers)
    tasks.p.update(placement.ps)
    tasks.y += n_workers
    tasks.z += n_ps
    return True
