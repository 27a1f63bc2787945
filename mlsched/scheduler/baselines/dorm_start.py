"""A feasible first point for Dorm's MILP (docs/algorithms/baselines.md, Dorm, "Start"):
HiGHS, handed one, skips the heuristics it otherwise spends most of a solve in."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mlsched.core.allocation import Placement
from mlsched.scheduler.baselines.taskfill import EPS, JobDemand

__all__ = ["DormStart"]


Tasks = tuple[dict[int, int], dict[int, int]]  # workers, PSs: server -> count


class DormStart:
    """A feasible first point for the MILP.

    Two constructions, each checked against every row of the program, so a start is never
    infeasible; when neither gives a point, HiGHS begins cold.

    * *From the previous allocation*: every running job keeps its placement (no change);
      a job whose own rows fail there (a newcomer, or one below its fair floor) takes its
      DRF counts on the servers its columns allow, first fit in the room left; if they do
      not fit, it takes its DRF placement, and every job in its way takes its own (the
      all-DRF allocation fits, so this ends). Few jobs change: the adjustment limit holds
      in the common case of one arrival or completion.
    * *From the DRF allocation*: it satisfies every row but the adjustment limit; changed
      jobs are put back at their previous placements while the limit is exceeded and every
      other row still holds (jobs DRF grew first: their way back frees room)."""

    def __init__(
        self,
        capacity: np.ndarray,
        jobs: list[JobDemand],
        cols: list[tuple[int, bool, int]],
        on_cols: list[int],
        ch_of: dict[int, int],
        kept: list[tuple[int, int, int]],
        a_ub: Any,
        b_ub: np.ndarray,
        upper: np.ndarray,
    ) -> None:
        self.capacity, self.jobs, self.on_cols = capacity, jobs, on_cols
        self.ch_of, self.kept = ch_of, kept
        self.a_ub, self.b_ub, self.upper = a_ub, b_ub, upper
        self.col_of = {key: c for c, key in enumerate(cols)}
        self.servers: list[tuple[list[int], list[int]]] = [([], []) for _ in jobs]
        for i, is_worker, s in cols:
            self.servers[i][0 if is_worker else 1].append(s)

    @staticmethod
    def _tasks(p: Placement | None) -> Tasks | None:
        return None if p is None else (dict(p.workers), dict(p.ps))

    @staticmethod
    def _counts(t: Tasks | None) -> tuple[int, int]:
        return (0, 0) if t is None else (sum(t[0].values()), sum(t[1].values()))

    def _point(self, choice: list[Tasks | None], previous: list[Tasks | None]) -> np.ndarray | None:
        x = np.zeros(len(self.upper))
        for i, t in enumerate(choice):
            if t is None:
                continue
            for is_worker, tasks in zip((True, False), t, strict=True):
                for s, k in tasks.items():
                    c = self.col_of.get((i, is_worker, s))
                    if c is None or k > self.upper[c]:
                        return None  # not a point of this program
                    x[c] += k
            x[self.on_cols[i]] = 1.0
        for i, ch in self.ch_of.items():
            x[ch] = float(self._counts(choice[i]) != self._counts(previous[i]))
        for k, c, n in self.kept:
            x[k] = min(float(n), x[c])
        return x

    def _slack(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(self.b_ub - self.a_ub @ x)

    def _holds(self, x: np.ndarray | None, skip_last: bool = False) -> bool:
        if x is None:
            return False
        slack = self._slack(x)
        if skip_last and self.ch_of:
            slack = slack[:-1]  # the adjustment limit, the last row
        return bool(np.all(slack >= -1e-7))

    def _used(self, choice: list[Tasks | None]) -> np.ndarray:
        used = np.zeros_like(self.capacity, dtype=float)
        for d, t in zip(self.jobs, choice, strict=True):
            if t is not None:
                for s, k in t[0].items():
                    used[s] += k * d.worker
                for s, k in t[1].items():
                    used[s] += k * d.ps
        return used

    def _fit(self, i: int, counts: tuple[int, int], free: np.ndarray) -> Tasks | None:
        """``counts`` tasks of job i first fit on its columns' servers, or None."""
        d = self.jobs[i]
        out: Tasks = ({}, {})
        for kind, (want, demand) in enumerate(zip(counts, (d.worker, d.ps), strict=True)):
            need = np.flatnonzero(demand > EPS)
            for s in self.servers[i][kind]:
                if want <= 0:
                    break
                c = self.col_of[(i, kind == 0, s)]
                room = (free[s, need] / demand[need]).min() if len(need) else want
                k = min(want, int(self.upper[c]), math.floor(room + 1e-9))
                if k > 0:
                    out[kind][s] = k
                    free[s] -= k * demand
                    want -= k
            if want > 0:
                return None
        return out

    def _from_previous(
        self, fair: list[Tasks | None], previous: list[Tasks | None]
    ) -> np.ndarray | None:
        choice = list(previous)
        x = self._point(choice, previous)
        if x is None:
            return None
        # Jobs whose own rows fail where they are: newcomers, jobs below their fair floor.
        short = [i for i, t in enumerate(previous) if not self._own_ok(i, self._counts(t), False)]
        budget = self.b_ub[-1] if self.ch_of else math.inf
        budget -= sum(1 for i in short if i in self.ch_of)
        shrunk: set[int] = set()
        for i in short:
            choice[i] = None
            want = self._floor(i, fair[i])
            mine = set(self.servers[i][0]) | set(self.servers[i][1])
            while True:
                free = np.array(self.capacity, dtype=float) - self._used(choice)
                placed = self._fit(i, want, free)
                if placed is not None:
                    choice[i] = placed
                    break
                # Room by shrinking a running job to its DRF counts, in place: one change.
                best: tuple[float, int, Tasks] | None = None
                for j in self.ch_of:
                    t = choice[j]
                    if j in shrunk or j in short or t is None or budget < 1:
                        continue
                    smaller = self._shrink(j, t, self._floor(j, fair[j]), mine)
                    if smaller is None:
                        continue
                    gained = self._used([t if k == j else None for k in range(len(choice))])
                    gained -= self._used([smaller if k == j else None for k in range(len(choice))])
                    room = float(
                        (gained[sorted(mine)] / np.maximum(self.capacity[sorted(mine)], EPS)).sum()
                    )
                    if room > EPS and (best is None or room > best[0]):
                        best = (room, j, smaller)
                if best is None:
                    return None
                _, j, smaller = best
                choice[j] = smaller
                shrunk.add(j)
                budget -= 1
        x = self._point(choice, previous)
        return x if self._holds(x) else None

    def _floor(self, i: int, fair: Tasks | None) -> tuple[int, int]:
        """The fewest (workers, PSs), at most its DRF counts, that satisfy job i's own rows
        (gang, PS cover, fairness floor); its DRF counts when none fewer do."""
        top = self._counts(fair)
        job = self.jobs[i].job
        for y in range(max(1, job.min_workers), top[0]):
            z = job.ps_needed(y) if job.uses_ps else 0
            if z > top[1]:
                break
            if self._own_ok(i, (y, z), True):
                return (y, z)
        return top

    def _own_ok(self, i: int, counts: tuple[int, int], changed: bool) -> bool:
        """Whether job i's own rows hold at these counts (running if any workers)."""
        y, z = counts
        on, ch = float(y > 0), float(changed)
        return all(
            cy * y + cz * z + con * on + cch * ch <= rhs + 1e-9
            for cy, cz, con, cch, rhs in self._own[i]
        )

    def _own_rows(self) -> list[list[tuple[float, float, float, float, float]]]:
        """Per job, its own rows (every entry in its columns) as coefficients of its
        worker count, PS count, ``on`` and ``ch`` with the right-hand side."""
        kind: dict[int, tuple[int, int]] = {}  # column -> (job, 0 worker 1 PS 2 on 3 ch)
        for (i, is_worker, _), c in self.col_of.items():
            kind[c] = (i, 0 if is_worker else 1)
        for i, c in enumerate(self.on_cols):
            kind[c] = (i, 2)
        for i, c in self.ch_of.items():
            kind[c] = (i, 3)
        own: list[list[tuple[float, float, float, float, float]]] = [[] for _ in self.jobs]
        a = self.a_ub
        for r in range(a.shape[0]):
            lo, hi = a.indptr[r], a.indptr[r + 1]
            tags = [kind.get(int(c)) for c in a.indices[lo:hi]]
            if not tags or any(t is None for t in tags):
                continue
            owners = {t[0] for t in tags if t is not None}
            if len(owners) != 1:
                continue
            co = [0.0, 0.0, 0.0, 0.0]
            for t, v in zip(tags, a.data[lo:hi], strict=True):
                if t is not None:
                    co[t[1]] = float(v)  # the same on every column of a kind
            own[owners.pop()].append((co[0], co[1], co[2], co[3], float(self.b_ub[r])))
        return own

    @staticmethod
    def _shrink(j: int, t: Tasks, to: tuple[int, int], prefer: set[int]) -> Tasks | None:
        """Job j's tasks ``t`` cut to the counts ``to``, from the ``prefer`` servers first;
        None unless that is fewer tasks of some kind and no more of any."""
        have = (sum(t[0].values()), sum(t[1].values()))
        if any(h < w for h, w in zip(have, to, strict=True)) or have == to or to[0] <= 0:
            return None
        out: Tasks = ({}, {})
        for kind in (0, 1):
            cut = have[kind] - to[kind]
            for s in sorted(t[kind], key=lambda s: (s not in prefer, s)):
                k = t[kind][s]
                drop = min(cut, k)
                cut -= drop
                if k - drop:
                    out[kind][s] = k - drop
        return out

    def _from_fair(
        self, fair: list[Tasks | None], previous: list[Tasks | None]
    ) -> np.ndarray | None:
        choice = list(fair)
        x = self._point(choice, previous)
        if not self._holds(x, skip_last=True):
            return None
        if self.ch_of:
            limit = self.b_ub[-1]

            def changed(c: list[Tasks | None]) -> list[int]:
                return [i for i in self.ch_of if self._counts(c[i]) != self._counts(previous[i])]

            def grown(i: int) -> tuple[int, int, int]:
                f, p = self._counts(fair[i]), self._counts(previous[i])
                return (0 if sum(f) >= sum(p) else 1, sum(p), i)

            for i in sorted(changed(choice), key=grown):
                if len(changed(choice)) <= limit:
                    break
                trial = list(choice)
                trial[i] = previous[i]
                y = self._point(trial, previous)
                if self._holds(y, skip_last=True):
                    choice, x = trial, y
        return x if self._holds(x) else None

    def find(
        self, fair: list[Placement | None], previous: list[Placement | None]
    ) -> np.ndarray | None:
        self._own = self._own_rows()
        f = [self._tasks(p) for p in fair]
        p = [self._tasks(q) for q in previous]
        x = self._from_previous(f, p)
        return x if x is not None else self._from_fair(f, p)
