"""The ``oasis`` policy: spec 001's Alg. 1 on top of the engine.

On each arrival (same-slot arrivals one by one, in submission order, spec A14):

1. the job's per-worker rate is read from the engine's runtime model (see
   :mod:`mlsched.scheduler.oasis.needs`), which the engine refines from measurements after
   every slot, so later arrivals are planned with what was learnt (committed plans are not
   re-optimized: OASiS commits irrevocably);
2. prices of every (server, resource, slot) of the planning window follow from what is
   already committed (:mod:`~mlsched.scheduler.oasis.prices`);
3. Alg. 2 finds the best schedule (:mod:`~mlsched.scheduler.oasis.schedule` over
   :mod:`~mlsched.scheduler.oasis.placement`'s COST_t);
4. the job is admitted iff the best payoff is > 0; its plan is committed (capacity and
   prices of its slots rise) and handed to the engine with the admission.

:meth:`allocate` reads the slot's placements off the committed plans. Capacity is enforced
by COST_t's hard caps against everything committed, so plans never over-allocate whatever
U and L are. Two run-time rules the paper does not have (spec §3.6): a job that finishes
early leaves its later reservations in place unless ``release_on_early_finish``; a job
still unfinished after its planned completion (the runtime model was optimistic) keeps
running best-effort on the capacity that the slot's plans leave free (``best_effort``).

Planning window: slots [arrival, horizon); without a horizon (the testbed),
[arrival, arrival + ``window``). ``window`` also caps the span with a horizon when given.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from mlsched.core.allocation import Admission, Placement, Plan, RejectKind
from mlsched.core.job import JobSpec
from mlsched.scheduler.committed import (
    ArrivalRecord,
    CommittedPlans,
    CommittingPolicy,
    completion_utility,
    count_changes,
    take_level,
)
from mlsched.scheduler.oasis.needs import JobNeeds, per_worker_rate
from mlsched.scheduler.oasis.placement import Layout, SlotOffer, largest_fit, place, slot_costs
from mlsched.scheduler.oasis.prices import U_DURATIONS, ConstantsEstimator, PriceConstants
from mlsched.scheduler.oasis.schedule import (
    DP_VARIANTS,
    FastDP,
    ReferenceDP,
    Schedule,
    Search,
    SlotDP,
    best_schedule,
)
from mlsched.scheduler.placement import eligible_ps_servers, eligible_worker_servers
from mlsched.scheduler.view import ClusterView, RunContext

__all__ = ["DEFAULT_WINDOW", "ArrivalRecord", "OasisPolicy"]

log = logging.getLogger(__name__)

#: Planning window in slots when the run has no horizon (the paper's Fig. 4 horizon; the
#: per-arrival cost grows linearly with it).
DEFAULT_WINDOW = 100

UL_ESTIMATES = ("catalogue", "history")

_OFFER_BLOCK = 16  # slots whose prices and offers are computed together


class OasisPolicy(CommittingPolicy):
    """OASiS (Bao et al., INFOCOM'18); options in ``docs/algorithms/oasis.md``."""

    name = "oasis"
    description = (
        "OASiS: online primal-dual admission with exponential per-slot prices and committed "
        "worker/PS plans (spec 001)"
    )

    def __init__(
        self,
        *,
        dp: str = "fast",
        u_duration: str = "dmin-1",
        ul_estimate: str = "catalogue",
        ul_ratio_scale: float = 1.0,
        utility_floor: float = 1.0,
        normalize: bool = False,
        window: int | None = None,
        chunk_group: int = 1,
        release_on_early_finish: bool = False,
        best_effort: bool = True,
        **options: Any,
    ) -> None:
        super().__init__(
            release_on_early_finish=release_on_early_finish, best_effort=best_effort, **options
        )
        _choice("dp", dp, DP_VARIANTS)
        _choice("u_duration", u_duration, U_DURATIONS)
        _choice("ul_estimate", ul_estimate, UL_ESTIMATES)
        _number("ul_ratio_scale", ul_ratio_scale, "> 0", lambda v: v > 0)
        _number("utility_floor", utility_floor, ">= 0", lambda v: v >= 0)
        if window is not None and not _is_count(window):
            raise ValueError(f"window must be an integer >= 1 (slots) or None, got {window!r}")
        if not _is_count(chunk_group):
            raise ValueError(f"chunk_group must be an integer >= 1, got {chunk_group!r}")
        if not isinstance(normalize, bool):
            raise ValueError(f"normalize must be true or false, got {normalize!r}")
        self.dp = dp
        self.u_duration = u_duration
        self.ul_estimate = ul_estimate
        self.ul_ratio_scale = float(ul_ratio_scale)
        self.utility_floor = float(utility_floor)
        self.normalize = normalize
        self.window = window
        self.chunk_group = chunk_group
        self._estimator: ConstantsEstimator | None = None
        self._servers: dict[str | None, tuple[list[int], list[int]]] = {}

    # Setup ------------------------------------------------------------------------------
    def setup(self, context: RunContext) -> None:
        super().setup(context)
        cluster = context.cluster
        self._estimator = ConstantsEstimator(
            cluster,
            horizon=context.horizon,
            window=self.window or DEFAULT_WINDOW,
            u_duration=self.u_duration,
            utility_floor=self.utility_floor,
            ul_ratio_scale=self.ul_ratio_scale,
            normalize=self.normalize,
        )
        self._committed = CommittedPlans(cluster)
        self._servers.clear()
        self._next_slot = 0
        if self.ul_estimate == "catalogue":
            for job in context.catalogue:
                needs = self._needs(job, context)
                if needs is not None:
                    self._estimator.add(job, needs)

    @property
    def constants(self) -> PriceConstants:
        """The price constants in force (they widen as jobs arrive)."""
        assert self._estimator is not None, "setup() first"
        return self._estimator.constants()

    def committed(self, slot: int) -> np.ndarray:
        """Capacity committed to plans in ``slot`` (servers x resources; a copy); slots
        already past may be forgotten (ValueError)."""
        assert self._committed is not None, "setup() first"
        return self._committed.usage.at(slot).copy()

    def _eligible(self, job: JobSpec) -> tuple[list[int], list[int]]:
        assert self.context is not None
        key = job.gpu_type
        hit = self._servers.get(key)
        if hit is None:
            cluster = self.context.cluster
            hit = (eligible_worker_servers(job, cluster), eligible_ps_servers(job, cluster))
            self._servers[key] = hit
        return hit

    def _needs(
        self, job: JobSpec, context: RunContext | ClusterView, done: float = 0.0
    ) -> JobNeeds | None:
        workers, ps = self._eligible(job)
        rate = per_worker_rate(job, context.runtime, context.slot_seconds, workers, ps)
        if not rate > 0 or not math.isfinite(rate):
            return None
        return JobNeeds.of(job, rate, done=done)

    # Arrivals ---------------------------------------------------------------------------
    def _decide(
        self, job: JobSpec, view: ClusterView
    ) -> tuple[Admission, tuple[float, float, int | None, int]]:
        assert self._estimator is not None and self._committed is not None
        none = (-math.inf, math.nan, None, 0)
        cluster = view.cluster
        workers, ps = self._eligible(job)
        if not cluster.offers(job.worker) or (job.uses_ps and not cluster.offers(job.ps)):
            return Admission.reject(RejectKind.INFEASIBLE, "needs GPUs the cluster lacks"), none
        if not workers or (job.uses_ps and not ps):
            what = "worker" if not workers else "PS"
            return Admission.reject(RejectKind.INFEASIBLE, f"no eligible {what} servers"), none
        # A job admitted again (reconfiguration, restart) plans only what it has left.
        needs = self._needs(job, view, done=view.done_work(job.job_id))
        if needs is None:
            return Admission.reject(RejectKind.INFEASIBLE, "the runtime model gives no rate"), none
        if not needs.workers_allowed().size:
            return Admission.reject(
                RejectKind.INFEASIBLE, "no worker count has enough PSs (needs b <= B, A5)"
            ), none
        layout = self._layout(job)
        capacity = np.asarray(cluster.capacity)
        empty = layout.offer(np.zeros_like(capacity), capacity, needs)
        if not np.isfinite(slot_costs(empty, needs)).any():
            return Admission.reject(
                RejectKind.INFEASIBLE, f"{needs.y_min} workers and their PSs never fit"
            ), none

        self._estimator.add(job, needs)
        first = view.slot
        end = self._window_end(first, view.horizon)
        if end <= first:
            return Admission.reject(RejectKind.CAPACITY, "arrived at the horizon"), none
        if needs.work > (end - first) * needs.y_max:
            return Admission.reject(
                RejectKind.CAPACITY,
                f"{needs.work} worker-slots do not fit slots {first}..{end - 1} even with "
                f"{needs.y_max} workers throughout",
            ), none

        constants = self.constants
        used = self._committed.usage.window(first, end)
        offers: dict[int, SlotOffer] = {}
        rows: dict[int, np.ndarray] = {}

        def offer(i: int) -> SlotOffer:
            hit = offers.get(i)
            if hit is None:  # a block of slots at once: most searches stop within one
                block = slice(i, min(i + _OFFER_BLOCK, len(used)))
                prices = constants.prices(used[block], capacity)
                fresh = layout.offers(prices, capacity - used[block], needs)
                offers.update(zip(range(i, i + len(fresh)), fresh, strict=True))
                hit = offers[i]
            return hit

        def costs(i: int) -> np.ndarray:
            row = rows.get(i)
            if row is None:
                row = rows[i] = slot_costs(offer(i), needs)
            return row

        utility = completion_utility(job, first)
        dp: SlotDP = FastDP(needs) if self.dp == "fast" else ReferenceDP(needs, self.chunk_group)
        search = best_schedule(dp, costs, utility, end - first)
        record = (search.best_payoff, math.nan, None, search.examined)
        if search.best is None:
            return self._reject(search, first, end), record
        best = self._level(needs, search.best, costs)
        plan = self._commit(job, needs, best, offer, first)
        completion = plan.completion_slot
        assert completion is not None
        reason = (
            f"payoff {best.payoff:.4g} = utility {best.utility:.4g} - cost {best.cost:.4g}; "
            f"slots {plan.first_slot}..{completion}"
        )
        return Admission.admit(plan=plan, reason=reason), (
            best.payoff,
            best.cost,
            completion,
            search.examined,
        )

    def _level(
        self, needs: JobNeeds, best: Schedule, costs: Callable[[int], np.ndarray]
    ) -> Schedule:
        """``best``, or the plan that runs the fewest allowed workers doing the work in
        every slot from its first to its completion, where :func:`take_level` prefers it."""
        start = next(i for i, y in enumerate(best.workers) if y > 0)
        if count_changes(best.workers[start:]) == 0:
            return best
        n = best.completion - start + 1
        allowed = needs.workers_allowed()
        ys = allowed[allowed * n >= needs.work]
        if not ys.size:
            return best
        y = int(ys[0])
        cost = sum(float(costs(i)[y]) for i in range(start, best.completion + 1))
        if not take_level(
            best_cost=best.cost, best_payoff=best.payoff, level_cost=cost, slack=self.steady_slack
        ):
            return best
        return Schedule((0,) * start + (y,) * n, best.completion, cost, best.utility)

    def _layout(self, job: JobSpec) -> Layout:
        assert self._estimator is not None and self.context is not None
        cluster = self.context.cluster
        workers, ps = self._eligible(job)
        w_raw = cluster.demand_array(job.worker)
        s_raw = cluster.demand_array(job.ps)
        return Layout.of(
            workers,
            ps if job.uses_ps else [],
            w_raw,
            s_raw,
            worker_priced=self._estimator.priced(w_raw),
            ps_priced=self._estimator.priced(s_raw),
        )

    def _window_end(self, first: int, horizon: int | None) -> int:
        if horizon is None:
            return first + (self.window or DEFAULT_WINDOW)
        return horizon if self.window is None else min(horizon, first + self.window)

    @staticmethod
    def _reject(search: Search, first: int, end: int) -> Admission:
        if not search.exhausted:  # stopped where utility could no longer pay any cost
            return Admission.reject(
                RejectKind.UNPROFITABLE,
                f"no completion in slots {first}..{end - 1} has a payoff > 0",
            )
        if not search.feasible:
            return Admission.reject(
                RejectKind.CAPACITY, f"no feasible schedule in slots {first}..{end - 1}"
            )
        return Admission.reject(
            RejectKind.UNPROFITABLE, f"best payoff {search.best_payoff:.4g} is not > 0"
        )

    def _commit(
        self,
        job: JobSpec,
        needs: JobNeeds,
        best: Schedule,
        offer: Callable[[int], SlotOffer],
        first: int,
    ) -> Plan:
        assert self._committed is not None
        slots: dict[int, Placement] = {}
        for i, y in enumerate(best.workers):
            if y <= 0:
                continue
            filled = place(offer(i), needs, y)
            if filled is None:  # the DP only picks counts COST_t priced as feasible
                raise RuntimeError(f"job {job.job_id}: {y} workers do not fit slot {first + i}")
            slots[first + i] = Placement.of(filled.workers, filled.ps)
        return self._committed.commit(job, slots, cost=best.cost, payoff=best.payoff)

    # Slots ------------------------------------------------------------------------------
    def _best_effort(
        self, slot: int, view: ClusterView, planned: dict[str, Placement]
    ) -> dict[str, Placement]:
        """Jobs past their planned completion and not done run on what the plans leave."""
        committed = self._committed
        assert committed is not None
        behind = committed.behind(slot, view, planned)
        if not behind:
            return {}
        cluster = committed.cluster
        free = committed.free_beside(planned)
        prices = self.constants.prices(committed.usage.at(slot), np.asarray(cluster.capacity))
        out: dict[str, Placement] = {}
        for job_id in behind:
            job = committed.specs[job_id]
            needs = self._needs(job, view)
            if needs is None:
                continue
            filled = largest_fit(self._layout(job).offer(prices, free, needs), needs)
            if filled is None:
                continue
            placement = Placement.of(filled.workers, filled.ps)
            for s, amount in placement.usage(job, cluster).items():
                free[s] -= amount
            out[job_id] = placement
        return out


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _choice(option: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{option} must be one of {', '.join(choices)}; got {value!r}")


def _number(option: str, value: object, bound: str, ok: Callable[[float], bool]) -> None:
    if not (_is_number(value) and math.isfinite(float(value)) and ok(float(value))):  # type: ignore[arg-type]
        raise ValueError(f"{option} must be a finite number {bound}, got {value!r}")
