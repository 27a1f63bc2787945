"""Spec 004's best fixed price (BFP, §3.7 and A21), found by replaying its model.

The replay is the DPS model of §2, not the engine: jobs arrive in order (same-slot ones in
submission order); a job runs iff its types have room (``d + y <= C``) and its user accepts
the fixed prices (``price_scale (p^W d^W + p^P d^P) <= v``; a job without a valuation
accepts any); PA places it on the typed slots (X[s, k], Z[s, m]); it holds them for its
runtime in slots, τ co-located or τ spread as the engine's runtime model predicts them, and
frees them at the slot it would complete in the engine (A30: the engine's convention). The
charge is paid at admission. On the ``dps-paper`` workload (each type a resource of its
own, the ``dps`` runtime family) this is the engine's run of ``bfp`` with the same prices,
job for job; where types share resources it treats each type's slots as its own (an
approximation).

A replay runs many price vectors at once (numpy over a leading candidate axis), so a
coordinate-ascent step over the 100 prices of a grid costs one pass over the jobs.
:func:`best_fixed_prices` starts at the best single price for every type, then improves
one type at a time over the grid (step 0.01 in [0.01, 1]) until a sweep changes nothing;
with one worker type and at most one PS type it searches the grid exhaustively.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mlsched.core.allocation import Placement
from mlsched.core.job import JobSpec
from mlsched.scheduler.dps.types import Shape, fit_counts, shape_of
from mlsched.scheduler.view import RunContext

__all__ = ["FixedPrices", "ReplayModel", "best_fixed_prices", "build_model", "replay"]


@dataclass(frozen=True)
class ReplayModel:
    """A job set on a cluster in the DPS model's terms. Columns are the types, named
    ``worker:<type>`` and ``ps:<type>``; ``slots`` holds X⁰/Z⁰ (servers x columns)."""

    columns: tuple[str, ...]
    slots: np.ndarray
    arrival: np.ndarray
    worker_col: np.ndarray
    ps_col: np.ndarray  # -1: no PS
    n_workers: np.ndarray
    n_ps: np.ndarray
    value: np.ndarray  # inf: accepts any price
    together: np.ndarray  # runtime in slots when co-located
    apart: np.ndarray  # when spread
    job_ids: tuple[str, ...]
    price_scale: float = 1.0

    @property
    def capacity(self) -> np.ndarray:
        return self.slots.sum(axis=0)


def _runtimes(job: JobSpec, shape: Shape, context: RunContext) -> tuple[int, int]:
    """(τ co-located, τ spread) in slots by the runtime model, on two representative
    placements (under the ``dps`` family only co-location matters, R3)."""
    ps_servers = set(shape.ps_servers.tolist())
    both = [int(s) for s in shape.worker_servers if s in ps_servers]
    s0 = both[0] if both else int(shape.worker_servers[0])
    dw, dp = shape.n_workers, shape.n_ps
    together = Placement(((s0, dw),), ((s0, dp),) if dp else ())
    others = [int(s) for s in (shape.ps_servers if dp else shape.worker_servers) if s != s0]
    if dp and others:
        apart = Placement(((s0, dw),), ((others[0], dp),))
    elif not dp and others and dw > 1:
        apart = Placement(((s0, dw - 1), (others[0], 1)))
    else:
        apart = together

    def slots(p: Placement) -> int:
        rate = context.runtime.throughput(job, p) * context.slot_seconds
        return 1 << 30 if rate <= 0 else max(1, math.ceil(job.total_work / rate - 1e-9))

    return slots(together), slots(apart)


def build_model(
    jobs: Sequence[JobSpec], context: RunContext, *, price_scale: float = 1.0
) -> ReplayModel:
    """The replay model of ``jobs`` (those that could ever run, arriving before the
    horizon) on ``context``'s cluster."""
    cluster = context.cluster
    horizon = context.horizon
    columns: dict[str, int] = {}
    slot_rows: list[np.ndarray] = []
    rows: list[tuple[JobSpec, Shape, int, int]] = []
    for job in sorted(jobs, key=lambda j: j.arrival_slot):
        if horizon is not None and job.arrival_slot >= horizon:
            continue
        shape = shape_of(job, cluster, context.seed)
        if isinstance(shape, str):
            continue
        cols = []
        for role in ("worker", "ps"):
            name = shape.type_of(role)
            if name is None:
                cols.append(-1)
                continue
            key = f"{role}:{name}"
            if key not in columns:
                column = np.zeros(len(cluster), dtype=np.int64)
                servers = shape.servers(role)
                column[servers] = fit_counts(cluster.capacity, servers, shape.demand(role))
                columns[key] = len(columns)
                slot_rows.append(column)
            cols.append(columns[key])
        rows.append((job, shape, cols[0], cols[1]))
    slots = np.stack(slot_rows, axis=1) if slot_rows else np.zeros((len(cluster), 0), np.int64)
    cap = slots.sum(axis=0)
    kept = [r for r in rows if r[1].n_workers <= cap[r[2]] and (r[3] < 0 or r[1].n_ps <= cap[r[3]])]
    times = [_runtimes(job, shape, context) for job, shape, _, _ in kept]
    return ReplayModel(
        columns=tuple(columns),
        slots=slots,
        arrival=np.array([j.arrival_slot for j, *_ in kept], dtype=np.int64),
        worker_col=np.array([w for *_, w, _ in kept], dtype=np.int64),
        ps_col=np.array([p for *_, p in kept], dtype=np.int64),
        n_workers=np.array([s.n_workers for _, s, *_ in kept], dtype=np.int64),
        n_ps=np.array([s.n_ps for _, s, *_ in kept], dtype=np.int64),
        value=np.array(
            [math.inf if j.valuation is None else j.valuation for j, *_ in kept], dtype=float
        ),
        together=np.array([t[0] for t in times], dtype=np.int64),
        apart=np.array([t[1] for t in times], dtype=np.int64),
        job_ids=tuple(j.job_id for j, *_ in kept),
        price_scale=price_scale,
    )


@dataclass(frozen=True)
class ReplayResult:
    """Per candidate price vector: total profit; with ``keep``, which jobs ran and which
    of them were co-located (candidates x jobs)."""

    profit: np.ndarray
    accepted: np.ndarray | None = None
    colocated: np.ndarray | None = None


def replay(
    model: ReplayModel, prices: np.ndarray, *, best_fit: bool = False, keep: bool = False
) -> ReplayResult:
    """Replay ``model`` under each row of ``prices`` (candidates x columns, normalised)."""
    prices = np.atleast_2d(np.asarray(prices, dtype=float))
    g_n, n_servers = len(prices), len(model.slots)
    free = np.ascontiguousarray(
        np.broadcast_to(model.slots.T[:, None, :], (len(model.columns), g_n, n_servers))
    ).copy()
    used = np.zeros((g_n, len(model.columns)), dtype=np.int64)
    cap = model.capacity
    profit = np.zeros(g_n)
    n_jobs = len(model.arrival)
    accepted = np.zeros((g_n, n_jobs), dtype=bool) if keep else None
    colocated = np.zeros((g_n, n_jobs), dtype=bool) if keep else None
    tiebreak = np.arange(n_servers - 1, -1, -1, dtype=np.int64)  # lower index first
    zmax = int(model.slots.max(initial=0)) + 1
    events: list[tuple[int, int, int, np.ndarray, np.ndarray, np.ndarray | None]] = []
    seq = 0
    for i in range(n_jobs):
        t = int(model.arrival[i])
        while events and events[0][0] <= t:
            _, _, j, rows, w_take, p_take = heapq.heappop(events)
            wc, pc = int(model.worker_col[j]), int(model.ps_col[j])
            free[wc, rows] += w_take
            used[rows, wc] -= model.n_workers[j]
            if p_take is not None:
                free[pc, rows] += p_take
                used[rows, pc] -= model.n_ps[j]
        wc, pc = int(model.worker_col[i]), int(model.ps_col[i])
        dw, dp = int(model.n_workers[i]), int(model.n_ps[i])
        ok = used[:, wc] + dw <= cap[wc]
        charge = prices[:, wc] * dw
        if pc >= 0:
            ok &= used[:, pc] + dp <= cap[pc]
            charge = charge + prices[:, pc] * dp
        charge = model.price_scale * charge
        ok &= charge <= model.value[i] + 1e-12
        rows = np.flatnonzero(ok)
        if not len(rows):
            continue
        x = free[wc, rows]
        z = free[pc, rows] if pc >= 0 else np.zeros_like(x)
        key = (x * zmax + z) * n_servers + tiebreak  # PA's order, descending
        fits = (x >= dw) & (z >= dp)
        single = fits.any(axis=1)
        pick = (
            np.argmin(np.where(fits, key, np.iinfo(np.int64).max), axis=1)
            if best_fit
            else np.argmax(np.where(fits, key, -1), axis=1)
        )
        order = np.argsort(-key, axis=1)
        w_take = _spread(x, order, dw)
        p_take = _spread(z, order, dp) if pc >= 0 else None
        s_rows = np.flatnonzero(single)
        w_take[s_rows] = 0
        w_take[s_rows, pick[s_rows]] = dw
        if p_take is not None:
            p_take[s_rows] = 0
            p_take[s_rows, pick[s_rows]] = dp
        free[wc, rows] -= w_take
        used[rows, wc] += dw
        if p_take is not None:
            free[pc, rows] -= p_take
            used[rows, pc] += dp
        profit[rows] += charge[rows]
        if keep:
            assert accepted is not None and colocated is not None
            accepted[rows, i] = True
            colocated[rows, i] = single
        for together in (True, False):
            sel = np.flatnonzero(single == together)
            if len(sel):
                end = t + int(model.together[i] if together else model.apart[i])
                heapq.heappush(
                    events,
                    (end, seq, i, rows[sel], w_take[sel], None if p_take is None else p_take[sel]),
                )
                seq += 1
    return ReplayResult(profit, accepted, colocated)


def _spread(room: np.ndarray, order: np.ndarray, need: int) -> np.ndarray:
    """Fill ``need`` tasks over each row's servers in ``order`` (Alg. 2 lines 6-9)."""
    sorted_room = np.take_along_axis(room, order, axis=1)
    before = np.cumsum(sorted_room, axis=1) - sorted_room
    take_sorted = np.clip(need - before, 0, sorted_room)
    out = np.zeros_like(room)
    np.put_along_axis(out, order, take_sorted, axis=1)
    return out


@dataclass(frozen=True)
class FixedPrices:
    """The best fixed prices found: column -> price, the replay's profit, replays run."""

    prices: dict[str, float]
    profit: float
    evaluations: int


def best_fixed_prices(
    model: ReplayModel, *, step: float = 0.01, sweeps: int = 5, best_fit: bool = False
) -> FixedPrices:
    """Coordinate ascent over the grid ``step, 2 step, .., 1`` (exhaustive for <= 2 columns
    with one worker column)."""
    grid = np.round(np.arange(1, round(1.0 / step) + 1) * step, 10)
    grid = grid[grid <= 1.0 + 1e-12]
    n_cols = len(model.columns)
    if n_cols == 0:
        return FixedPrices({}, 0.0, 0)
    runs = 0

    def profits(candidates: np.ndarray) -> np.ndarray:
        nonlocal runs
        runs += 1
        out = [
            replay(model, chunk, best_fit=best_fit).profit
            for chunk in np.array_split(candidates, max(1, len(candidates) // 2500))
        ]
        return np.concatenate(out)

    if n_cols <= 2 and sum(c.startswith("worker:") for c in model.columns) == 1:
        mesh = np.stack(np.meshgrid(*([grid] * n_cols), indexing="ij"), axis=-1).reshape(-1, n_cols)
        values = profits(mesh)
        best = int(np.argmax(values))
        return FixedPrices(
            dict(zip(model.columns, map(float, mesh[best]), strict=True)), float(values[best]), runs
        )
    common = profits(np.repeat(grid[:, None], n_cols, axis=1))
    current = np.full(n_cols, grid[int(np.argmax(common))])
    best_profit = float(common.max())
    for _ in range(sweeps):
        moved = False
        for c in range(n_cols):
            candidates = np.repeat(current[None, :], len(grid), axis=0)
            candidates[:, c] = grid
            values = profits(candidates)
            k = int(np.argmax(values))
            if values[k] > best_profit + 1e-9 * max(1.0, abs(best_profit)):
                current[c], best_profit, moved = grid[k], float(values[k]), True
        if not moved:
            break
    return FixedPrices(
        dict(zip(model.columns, map(float, current), strict=True)), best_profit, runs
    )
