"""The exact optimum of one GADGET slot (spec 003 §3.3's G-VNE (12)-(19)) as a compact MILP.

Spec 003 §3.7 asks for (12)-(19) solved as a MILP: ring-size binaries chi_{i,k}, node
mappings and one unsplittable unit of flow per ring arc. This module solves the same
problem with a much smaller model that is exact on our substrate, which is always the
two-tier tree of :class:`~mlsched.core.links.Links` (servers -> rack switch -> core; A18,
A19). This is our departure from §3.7, and why it loses nothing:

* **Lower bound for any ring.** Take any embedding of a ring of job i, in any order, with
  any (integral) flow paths, and let S_i be the servers that host its workers. If
  ``|S_i| >= 2``, every server of S_i hosts some ring node whose successor lies on another
  server (follow the ring from a node on that server: it must leave it), and some node
  whose predecessor lies on another server. In a tree every path out of a server starts on
  its up link and every path into it ends on its down link, so each such server's up and
  down link carry at least b_i. Likewise, if S_i spans ``>= 2`` racks, some hop leaves and
  some hop enters each used rack, so each used rack's up and down link to the core carry
  at least b_i. Hops between workers on one server are free (A30).
* **The bound is met.** The ring that visits S_i contiguously, racks one after the other
  and servers grouped by rack (§3.4.4's post-processing), routed on the tree's unique
  paths, makes exactly one hop out of and one into each used server, and, with several
  racks, exactly one hop out of and one into each used rack; no other link is touched.
  So it loads every link exactly as much as the bound above and no more.

Hence the link loads of the best ring over a set of servers depend only on *which* servers
and racks are used, and a placement (workers per server) fits with some ring iff it fits
with the grouped ring. The flow MILP (12)-(19) and the model below have the same optimum.
The flow model at 50 servers has O(kappa * arcs) flow variables per ring arc and job; this
one has O(servers) variables per job.

The model, per job i with hosts H_i (its ``hosts`` that fit at least one worker on their
own), q_i = ``len(gains)`` and b_i = ``hop_gbps``; every variable is binary unless said:

* ``chi[i, k]``, k = 1..min(q_i, sum_s cap_is): ring size k; ``sum_k chi[i, k] <= 1``;
  objective ``max sum_{i, k} gain_i(k) chi[i, k]`` (12), (13);
* ``y[i, s]`` integer in [0, cap_is], the workers on s in H_i (cap_is: the most workers of
  i that fit on s alone, at most q_i; (5)); ``sum_s y[i, s] = sum_k k chi[i, k]`` (14);
* server capacity ``sum_i demand_ir y[i, s] <= capacity[s, r]`` (16), (18).

Jobs with b_i > 0 that could use two servers choose one *mode*: all workers on one server
s (``one[i, s]``), on several servers of one rack r (``within[i, r]``, only for racks with
two hosts), or across racks (``across[i]``, only if two racks host); ``sum of modes <= 1``.
``used[i, s]`` marks a server that holds workers in a multi-server mode and
``rack_used[i, r]`` a rack that holds workers in the multi-rack mode:

* ``y[i, s] <= cap_is (one[i, s] + used[i, s])``;
* ``used[i, s] <= within[i, rack(s)] + rack_used[i, rack(s)]``, ``rack_used[i, r] <= across[i]``;
* link loads (19): server s's up and down link ``sum_i b_i used[i, s] <= link_capacity``,
  rack r's up and down link to the core ``sum_i b_i rack_used[i, r] <= link_capacity``
  (a negative free capacity counts as 0).

So a job on >= 2 servers has ``used = 1`` on each (one mode only, and ``one`` covers a
single server), and a job on >= 2 racks is in the across mode with ``rack_used = 1`` on
each: the model charges at least the bound above, and the grouped ring no more than it.
Extra ``used``/``rack_used`` ones only add load, so the optimum is unchanged.

This differs from the textbook linearisation (binaries x_is "server used", m_i
"multi-server", z_ir, M_i, and continuous w_is >= x_is + m_i - 1, v_ir >= z_ir + M_i - 1
carrying the loads) only in strength: there the LP relaxation can set w = 0 whenever
x + m <= 1 fractionally, here a server's share of a job's link load is at least
b_i y_is / cap_is. On a random 50-server, 5-rack, 30-job instance with binding links
HiGHS took 84 s with the textbook model and 23 s with this one (same optimum, on a busy
2-core machine); adding ``used <= y`` rows made it 3-4 times slower again.

Jobs with ``hop_gbps`` 0, or that can use one server (one rack) only, get no link (rack)
variables. The solution is read back as a ring grouped by rack (racks in
``cluster.racks`` order, servers by index within a rack), which
:meth:`~mlsched.scheduler.gadget.problem.SlotProblem.check` accepts.

Solved by HiGHS under a required wall-clock limit. :func:`slot_relaxation` gives the LP
relaxation of the same model (every integrality dropped), an upper bound on the optimum;
it is *not* the relaxation of the flow model (12)-(19), which LP-RS-MDE solves.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from mlsched.core.allocation import Placement
from mlsched.scheduler.gadget.problem import RingJob, SlotProblem
from mlsched.scheduler.offline.optimum import solve_offline
from mlsched.scheduler.solvers.highs import SolveStatus, solve_lp
from mlsched.scheduler.solvers.model import MilpModel

__all__ = ["SlotOptimum", "slot_optimum", "slot_relaxation"]

log = logging.getLogger(__name__)

_EPS = 1e-9


@dataclass(frozen=True)
class SlotOptimum:
    """The outcome of :func:`slot_optimum`.

    ``value`` is what ``placements`` are worth (:meth:`SlotProblem.value`), ``objective``
    the MILP objective HiGHS reports for them (equal up to rounding), ``bound`` an upper
    bound on the optimum (HiGHS' dual bound, else the trivial sum of the best gains;
    never below ``value``), ``proven`` whether HiGHS proved ``value`` optimal (within
    ``mip_rel_gap`` when one is given), ``status`` a :class:`SolveStatus` value.
    ``placements`` are always valid (the empty schedule when the solve found nothing) and
    leave out rings that earn nothing.
    """

    value: float
    bound: float
    proven: bool
    placements: Mapping[str, Placement]
    status: str
    objective: float = 0.0
    variables: int = 0
    rows: int = 0
    seconds: float = 0.0
    message: str = ""
    #: Jobs that cannot run at all this slot (no host fits one worker, or no ring size).
    unplaceable: tuple[str, ...] = field(default=())

    @property
    def gap(self) -> float:
        """Relative gap between ``bound`` and ``value`` (0 when both are 0)."""
        return (self.bound - self.value) / max(abs(self.bound), _EPS) if self.bound else 0.0


@dataclass
class _JobCols:
    """One job's columns: (column, ring size) per chi, and server -> y column."""

    job: RingJob
    chi: list[tuple[int, int]]
    y: dict[int, int]


@dataclass
class _Model:
    milp: MilpModel
    jobs: list[_JobCols]
    unplaceable: list[str]


def _check_limit(value: object, what: str, *, strict: bool) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
        or (strict and value <= 0)
    ):
        need = "> 0" if strict else ">= 0"
        raise ValueError(f"{what} must be a finite number {need}, got {value!r}")
    return float(value)


def _fits(capacity: np.ndarray, demand: np.ndarray, most: int) -> int:
    """The most workers of ``demand`` that fit in ``capacity`` on their own, at most ``most``."""
    need = demand > _EPS
    if not need.any():
        return most
    fit = math.floor(float(np.min(capacity[need] / demand[need])) + 1e-9)
    return max(0, min(most, fit))


def _build(problem: SlotProblem) -> _Model:
    cluster = problem.cluster
    n_servers = len(cluster.servers)
    capacity = np.asarray(problem.capacity, dtype=float)
    link_cap = np.maximum(np.asarray(problem.link_capacity, dtype=float), 0.0)
    if capacity.shape != (n_servers, len(cluster.resource_names)):
        raise ValueError(
            f"capacity: expected shape {(n_servers, len(cluster.resource_names))}, "
            f"got {capacity.shape}"
        )
    if link_cap.shape != (len(problem.links),):
        raise ValueError(
            f"link_capacity: expected {len(problem.links)} links, got {link_cap.shape}"
        )
    rack_of = problem.links.rack_of
    seen: set[str] = set()
    m = MilpModel()
    layout: list[_JobCols] = []
    unplaceable: list[str] = []
    cap_rows: dict[tuple[int, int], list[tuple[int, float]]] = {}
    link_rows: dict[int, list[tuple[int, float]]] = {}
    for job in problem.jobs:
        if job.job_id in seen:
            raise ValueError(f"job {job.job_id!r} appears twice in the slot problem")
        seen.add(job.job_id)
        demand = np.asarray(job.demand, dtype=float)
        if demand.shape != (capacity.shape[1],):
            raise ValueError(
                f"{job.job_id}: demand has shape {demand.shape}, not {capacity.shape[1:]}"
            )
        q = job.max_ring
        hosts: dict[int, int] = {}
        for s in sorted(set(job.hosts)):
            if not 0 <= s < n_servers:
                raise ValueError(f"{job.job_id}: host {s} is not a server index 0..{n_servers - 1}")
            if (cap := _fits(capacity[s], demand, q)) > 0:
                hosts[s] = cap
        top = min(q, sum(hosts.values()))
        if top < 1:
            unplaceable.append(job.job_id)
            continue
        chi = [(m.var(0.0, 1.0, float(job.gain(k))), k) for k in range(1, top + 1)]
        y = {s: m.var(0.0, float(cap)) for s, cap in hosts.items()}
        layout.append(_JobCols(job, chi, y))
        m.row([(c, 1.0) for c, _ in chi], 1.0)
        # sum_s y = sum_k k chi, as two rows.
        total = [(c, 1.0) for c in y.values()] + [(c, -float(k)) for c, k in chi]
        m.row(total, 0.0)
        m.row([(c, -v) for c, v in total], 0.0)
        for s in hosts:
            for r in np.flatnonzero(demand > _EPS).tolist():
                cap_rows.setdefault((s, r), []).append((y[s], float(demand[r])))
        b = float(job.hop_gbps)
        if b <= 0 or min(top, len(hosts)) < 2:
            continue  # no hop ever loads a link
        # Modes: on one server s (one[s]), on several servers of rack r (within[r]), or
        # across racks (across); used[s] / rack_used[r]: s / r hosts workers in a
        # multi-server / multi-rack mode, and so loads its links.
        racks: dict[int, list[int]] = {}
        for s in hosts:
            racks.setdefault(rack_of[s], []).append(s)
        one = {s: m.var(0.0, 1.0) for s in hosts}
        used = {s: m.var(0.0, 1.0) for s in hosts}
        within = {r: m.var(0.0, 1.0) for r, members in racks.items() if len(members) > 1}
        across = m.var(0.0, 1.0) if min(top, len(racks)) >= 2 else None
        rack_used = {r: m.var(0.0, 1.0) for r in racks} if across is not None else {}
        modes = [*one.values(), *within.values(), *([across] if across is not None else [])]
        m.row([(c, 1.0) for c in modes], 1.0)
        for s, cap in hosts.items():
            r = rack_of[s]
            m.row([(y[s], 1.0), (one[s], -float(cap)), (used[s], -float(cap))], 0.0)
            gates = [(within[r], -1.0)] if r in within else []
            gates += [(rack_used[r], -1.0)] if r in rack_used else []
            m.row([(used[s], 1.0), *gates], 0.0)
            for link in (2 * s, 2 * s + 1):
                link_rows.setdefault(link, []).append((used[s], b))
        for r, c in rack_used.items():
            assert across is not None
            m.row([(c, 1.0), (across, -1.0)], 0.0)
            for link in (2 * n_servers + 2 * r, 2 * n_servers + 2 * r + 1):
                link_rows.setdefault(link, []).append((c, b))
    for (s, r), entries in sorted(cap_rows.items()):
        m.row(entries, float(capacity[s, r]))
    for link, entries in sorted(link_rows.items()):
        m.row(entries, float(link_cap[link]))
    return _Model(m, layout, unplaceable)


def _trivial_bound(problem: SlotProblem) -> float:
    return float(sum(max(0.0, *j.gains) for j in problem.jobs if j.gains))


def _read(problem: SlotProblem, x: np.ndarray, layout: list[_JobCols]) -> dict[str, Placement]:
    rack_of = problem.links.rack_of
    out: dict[str, Placement] = {}
    for cols in layout:
        size = sum(k for c, k in cols.chi if x[c] > 0.5)
        workers = {s: n for s, c in cols.y.items() if (n := round(float(x[c]))) > 0}
        if sum(workers.values()) != size:  # pragma: no cover - the equality rows forbid it
            raise RuntimeError(
                f"{cols.job.job_id}: MILP solution places {workers} for a ring of {size}"
            )
        if not workers or cols.job.gain(size) <= 0:
            continue  # a ring that earns nothing only takes room
        ring = tuple(sorted(workers, key=lambda s: (rack_of[s], s)))
        out[cols.job.job_id] = Placement(tuple(workers.items()), ring=ring)
    return out


def slot_optimum(
    problem: SlotProblem,
    *,
    time_limit_s: float = 30.0,
    mip_rel_gap: float | None = None,
) -> SlotOptimum:
    """The best schedule of one slot: which jobs run, with how many workers where, and
    their rings (grouped by rack). ``time_limit_s`` bounds HiGHS' wall clock (> 0);
    ``mip_rel_gap`` (>= 0) stops it earlier at that relative gap."""
    limit = _check_limit(time_limit_s, "time_limit_s", strict=True)
    if mip_rel_gap is not None:
        _check_limit(mip_rel_gap, "mip_rel_gap", strict=False)
    start = time.perf_counter()
    model = _build(problem)
    m = model.milp
    n = len(m.lo)
    unplaceable = tuple(model.unplaceable)
    if not model.jobs:
        return SlotOptimum(
            0.0,
            0.0,
            True,
            {},
            SolveStatus.OPTIMAL.value,
            seconds=time.perf_counter() - start,
            message="no job can be placed",
            unplaceable=unplaceable,
        )
    res = solve_offline(m, n, time_limit_s=limit, mip_rel_gap=mip_rel_gap)
    bound = _trivial_bound(problem)
    if res.dual_bound is not None and math.isfinite(res.dual_bound):
        bound = min(bound, res.dual_bound)
    if not res.ok or res.x is None:
        # The empty schedule is always feasible: report it, with whatever bound is known.
        log.debug("[gadget_optimum] no solution: %s (%s)", res.status.value, res.message)
        return SlotOptimum(
            0.0,
            max(bound, 0.0),
            False,
            {},
            res.status.value,
            variables=n,
            rows=len(m.b),
            seconds=time.perf_counter() - start,
            message=res.message,
            unplaceable=unplaceable,
        )
    placements = _read(problem, res.x, model.jobs)
    value = problem.value(placements)
    objective = float(res.objective if res.objective is not None else value)
    bound = max(bound, value)
    seconds = time.perf_counter() - start
    log.debug(
        "[gadget_optimum] %d jobs, %d columns, %d rows: %s value %.6g bound %.6g in %.2fs",
        len(problem.jobs),
        n,
        len(m.b),
        res.status.value,
        value,
        bound,
        seconds,
    )
    return SlotOptimum(
        value,
        bound,
        res.is_optimal,
        placements,
        res.status.value,
        objective,
        n,
        len(m.b),
        seconds,
        res.message,
        unplaceable,
    )


def slot_relaxation(problem: SlotProblem, *, time_limit_s: float = 30.0) -> float:
    """An upper bound on :func:`slot_optimum`'s value: the optimum of the same model's LP
    relaxation (every integrality dropped), or, should the LP not solve within
    ``time_limit_s``, the trivial bound (every job at its best gain)."""
    limit = _check_limit(time_limit_s, "time_limit_s", strict=True)
    model = _build(problem)
    m = model.milp
    if not model.jobs:
        return 0.0
    res = solve_lp(
        np.array(m.obj),
        m.a_ub(),
        np.array(m.b),
        bounds=list(zip(m.lo, m.hi, strict=True)),
        maximize=True,
        time_limit_s=limit,
    )
    if res.is_optimal and res.objective is not None:
        return float(res.objective)
    log.debug("[gadget_optimum] LP relaxation %s: trivial bound", res.status.value)
    return _trivial_bound(problem)
