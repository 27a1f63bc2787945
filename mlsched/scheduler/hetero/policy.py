"""The ``hetero`` policy: spec 002's A_online (Alg. 1) on top of the engine.

Every job is admitted on arrival (unless no worker type of it fits any server: infeasible)
and waits for the next round. Rounds are anchored to absolute slots: round i decides in
engine slot ``tau_i - 1`` (``tau_i = 2**(i-1)``: slots 0, 1, 3, 7, 15, ...), so a policy
re-created by ``Engine.reconfigure`` keeps the round times. A round takes every waiting job
(the batch J_i: arrived by tau_i and not yet scheduled, [AMB-7]), runs A_dual on an empty
cluster and commits the jobs it scheduled to slots from the round's offset on: ``alpha
tau_i - 1`` (the paper's window [alpha tau_i, alpha tau_{i+1}) in the spec's 1-based
slots), or with ``compact_offsets`` right after the latest committed completion of the
earlier rounds (never earlier than the round itself). Jobs left over wait for the next round.

A committed job runs its one placement (worker type, PS type, counts, servers) from its
start slot for its window, without preemption. Run-time rules the paper lacks
([AMB-16]): a job that finishes early frees its slots (the engine drops it; nothing moves);
one still unfinished at the end of its window keeps its placement where that fits beside
the committed jobs of the slot, else it waits a slot.

Options: ``alpha`` (A_maxweight calls per round, default 4, [AMB-2]), ``compact_offsets``,
``tie_break`` (``spec`` or ``paper``, [AMB-9]), ``order`` (``arrival``, ``weight`` or
``density``, [AMB-8]), ``f`` (F of lambda = 2THRF + 1, default 10), ``horizon`` (T of
lambda: given, it is the paper's nominal T whatever the run's length, which may be far
longer so that late jobs finish; not given, the run's horizon, else 150). Every round is recorded in :attr:`HeteroPolicy.decisions`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from mlsched.core.allocation import Admission, Allocation, Placement, RejectKind
from mlsched.core.job import JobSpec
from mlsched.scheduler.hetero.batch import round_inputs
from mlsched.scheduler.hetero.catalogue import worker_servers
from mlsched.scheduler.hetero.maxweight import ORDERS, dual
from mlsched.scheduler.hetero.mincost import TIE_BREAKS
from mlsched.scheduler.policy import Policy
from mlsched.scheduler.rate_memo import RateMemo
from mlsched.scheduler.view import CapacityLedger, ClusterView, RunContext

__all__ = ["DEFAULT_ALPHA", "DEFAULT_F", "HeteroPolicy", "RoundRecord", "round_slot"]

#: The paper's practical alpha ("close to 4 in simulations", [AMB-2]).
DEFAULT_ALPHA = 4
#: F of lambda = 2 T H R F + 1 (the policy's default).
DEFAULT_F = 10.0
#: T of lambda when the run has no horizon (the paper's default horizon).
DEFAULT_PRICE_HORIZON = 150


def round_slot(slot: int) -> int | None:
    """tau_i if engine slot ``slot`` is round i's decision slot (slot + 1 a power of 2)."""
    tau = slot + 1
    return tau if tau >= 1 and tau & (tau - 1) == 0 else None


@dataclass(frozen=True)
class RoundRecord:
    """One round: its decision slot, tau, batch size, jobs scheduled, their weight, the
    offset of its window and the seconds A_dual took."""

    slot: int
    tau: int
    batch: int
    scheduled: int
    weight: float
    offset: int
    seconds: float


@dataclass(frozen=True)
class _Committed:
    job: JobSpec
    start: int
    end: int  # exclusive
    placement: Placement


class HeteroPolicy(Policy):
    """Zhou et al. (IEEE TCC 2023); options in ``docs/algorithms/hetero.md``."""

    name = "hetero"
    batch_rounds = True
    # Spec 002's M1/M2 (:mod:`mlsched.perfmodel.hetero`), refined by measurements.
    runtime_families = MappingProxyType({"ps_sync": "hetero", "allreduce": "hetero"})
    # Spec 002 §7: on a testbed, windows right after the committed jobs and few rounds
    # (faithful offsets leave a short-slot cluster idle for most of a run).
    testbed_defaults = MappingProxyType({"compact_offsets": True, "alpha": 2})
    description = (
        "A_online/A_maxweight: doubling-interval batches, price-based primal-dual greedy over "
        "worker and PS types, minimising weighted completion time (spec 002)"
    )

    def __init__(
        self,
        *,
        alpha: int = DEFAULT_ALPHA,
        compact_offsets: bool = False,
        tie_break: str = "spec",
        order: str = "arrival",
        f: float = DEFAULT_F,
        horizon: int | None = None,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        if not _is_count(alpha):
            raise ValueError(f"alpha must be an integer >= 1, got {alpha!r}")
        if not isinstance(compact_offsets, bool):
            raise ValueError(f"compact_offsets must be true or false, got {compact_offsets!r}")
        if tie_break not in TIE_BREAKS:
            raise ValueError(f"tie_break must be one of {', '.join(TIE_BREAKS)}; got {tie_break!r}")
        if order not in ORDERS:
            raise ValueError(f"order must be one of {', '.join(ORDERS)}; got {order!r}")
        if not (
            isinstance(f, (int, float)) and not isinstance(f, bool) and math.isfinite(f) and f >= 1
        ):
            raise ValueError(f"f must be a finite number >= 1, got {f!r}")
        if horizon is not None and not _is_count(horizon):
            raise ValueError(f"horizon must be an integer >= 1 (slots), got {horizon!r}")
        self.alpha = alpha
        self.compact_offsets = compact_offsets
        self.tie_break = tie_break
        self.order = order
        self.f = float(f)
        self.price_horizon = horizon
        #: Every round, in order.
        self.decisions: list[RoundRecord] = []
        self._pending: dict[str, tuple[JobSpec, float]] = {}
        self._committed: dict[str, _Committed] = {}
        self._last_end = 0
        # Waiting jobs' rates per shape from earlier rounds, while the model's predictions
        # for each stay the same.
        self._rates = RateMemo()

    def setup(self, context: RunContext) -> None:
        super().setup(context)
        self._pending.clear()
        self._committed.clear()
        self._last_end = 0
        self._rates.clear()

    # Arrivals ---------------------------------------------------------------------------
    def on_arrival(self, job: JobSpec, view: ClusterView) -> Admission:
        if not self.supports(job):
            return Admission.reject(RejectKind.INFEASIBLE, f"{job.arch.value} jobs unsupported")
        if not self._can_ever_run(job, view):
            return Admission.reject(
                RejectKind.INFEASIBLE, "no worker type (and PS type) of the job fits any server"
            )
        self._pending[job.job_id] = (job, view.done_work(job.job_id))
        nxt = _next_round(view.slot)
        return Admission.admit(reason=f"waits for the round in slot {nxt}")

    def _can_ever_run(self, job: JobSpec, view: ClusterView) -> bool:
        cluster = view.cluster
        ledger = CapacityLedger(cluster)
        ps_ok = not job.uses_ps or any(
            ledger.max_count(s, cluster.demand_array(job.ps_demand(p))) >= 1
            for p in _names(job.ps_types)
            for s in cluster.ps_servers
        )
        return ps_ok and any(
            ledger.max_count(s, cluster.demand_array(job.worker_demand(m))) >= 1
            for m in _names(job.worker_types)
            for s in worker_servers(job, m, cluster, cluster.types)
        )

    # Rounds -----------------------------------------------------------------------------
    def _round(self, slot: int, tau: int, view: ClusterView) -> None:
        start = time.perf_counter()
        horizon = self.price_horizon or view.horizon or DEFAULT_PRICE_HORIZON
        rates = {j.job_id: self._rates.of(j, view) for j, _ in self._pending.values()}
        inputs = round_inputs(
            self._pending.values(), view, view.cluster.types, tau, horizon, self.f, rates
        )
        batch = inputs.batch
        chosen = (
            dual(batch, inputs.grid, tau, self.alpha, self.tie_break, self.order) if batch else []
        )
        offset = self.alpha * tau - 1
        if self.compact_offsets:
            offset = max(slot, self._last_end)
        weight = 0.0
        by_id = {b.job.job_id: b for b in batch}
        for s in chosen:
            job, _ = self._pending.pop(s.job_id)
            self._rates.drop(s.job_id)
            js = by_id[s.job_id]
            shape = s.candidate.shape
            placement = Placement.of(
                s.candidate.workers,
                s.candidate.ps,
                worker_type=js.worker_types[shape.m],
                ps_type=js.ps_types[shape.p] if job.uses_ps else None,
            )
            begin = offset + s.start
            self._committed[s.job_id] = _Committed(job, begin, begin + shape.length, placement)
            weight += job.weight
        if self.compact_offsets or chosen:
            ends = [c.end for c in self._committed.values()]
            self._last_end = max([self._last_end, *ends])
        self.decisions.append(
            RoundRecord(
                slot, tau, len(batch), len(chosen), weight, offset, time.perf_counter() - start
            )
        )

    # Slots ------------------------------------------------------------------------------
    def allocate(self, slot: int, view: ClusterView) -> Allocation:
        tau = round_slot(slot)
        if tau is not None and self._pending:
            self._round(slot, tau, view)
        out: dict[str, Placement] = {}
        late: list[_Committed] = []
        for job_id, c in self._committed.items():
            if job_id not in view:
                continue
            if c.start <= slot < c.end:
                out[job_id] = c.placement
            elif slot >= c.end:
                late.append(c)
        if late:  # behind their windows: their placement where it still fits
            ledger = CapacityLedger(view.cluster)
            for job_id, p in out.items():
                ledger.place(self._committed[job_id].job, p)
            for c in sorted(late, key=lambda c: (c.start, c.job.job_id)):
                if ledger.place(c.job, c.placement):
                    out[c.job.job_id] = c.placement
        return Allocation(slot, out)

    def on_completion(self, job_id: str, view: ClusterView) -> None:
        self.release(job_id)

    def release(self, job_id: str) -> None:
        self._pending.pop(job_id, None)
        self._committed.pop(job_id, None)
        self._rates.drop(job_id)

    def committed(self) -> dict[str, tuple[int, int, Placement]]:
        """Job id -> (first slot, end slot exclusive, placement) of the committed jobs."""
        return {j: (c.start, c.end, c.placement) for j, c in self._committed.items()}


def _next_round(slot: int) -> int:
    return (1 << max(0, (slot).bit_length())) - 1 if round_slot(slot) is None else slot


def _names(types: Mapping[str, object]) -> list[str | None]:
    return list(types) if types else [None]


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1
