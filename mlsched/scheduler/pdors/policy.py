"""The ``pd_ors`` policy: spec 000's Alg. 1 on top of the engine.

On each arrival (same-slot arrivals one by one, in submission order, A18):

1. the job's internal and external per-worker rates are read from the engine's runtime
   model (:mod:`~mlsched.scheduler.pdors.needs`), refined from measurements after every
   slot, so later arrivals plan with what was learnt; a job offered again after a
   reconfiguration or a restart plans only its remaining work (``view.done_work``, A21);
2. every (server, resource, slot) of the planning window is priced from what is already
   committed ((E19), :mod:`~mlsched.scheduler.pdors.constants`);
3. Alg. 2-3 find the best schedule (:mod:`~mlsched.scheduler.pdors.schedule`) over Alg. 4's
   per-slot costs (:mod:`~mlsched.scheduler.pdors.slot`);
4. the job is admitted iff the best payoff is > 0; its schedule is committed.

Per-slot costs are shared by the slots of one arrival whose committed usage is the same
(most future slots are empty), and rounding draws come from a generator seeded by the run's
seed and the job id, so a run is reproducible (A12). Capacity is enforced by Alg. 4's
residual capacity, so plans never over-allocate. The run-time rules OASiS has (spec 001
§3.6) apply here too: early finishers keep their reservations unless
``release_on_early_finish``; a job behind its plan runs best-effort on what the slot's plans
leave (``best_effort``).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

from mlsched.core.allocation import Admission, Placement, RejectKind
from mlsched.core.job import Arch, JobSpec
from mlsched.scheduler.committed import (
    CommittedPlans,
    CommittingPolicy,
    completion_utility,
    count_changes,
    take_level,
)
from mlsched.scheduler.oasis.policy import DEFAULT_WINDOW
from mlsched.scheduler.pdors.constants import ConstantsEstimator, PdorsConstants
from mlsched.scheduler.pdors.needs import PdorsNeeds, per_worker_rates
from mlsched.scheduler.pdors.schedule import DEFAULT_LEVELS, Schedule, best_schedule
from mlsched.scheduler.pdors.slot import Rounding, SlotChoice, SlotPricer
from mlsched.scheduler.placement import eligible_ps_servers, eligible_worker_servers
from mlsched.scheduler.view import ClusterView, RunContext

__all__ = ["PdorsPolicy"]


class PdorsPolicy(CommittingPolicy):
    """PD-ORS (Yu et al.); options in ``docs/algorithms/pd_ors.md``."""

    name = "pd_ors"
    archs = frozenset({Arch.PS})  # spec A29
    description = (
        "PD-ORS: online primal-dual admission of synchronous PS jobs with locality-aware "
        "per-slot placement by LP relaxation and randomised rounding (spec 000)"
    )

    def __init__(
        self,
        *,
        levels: int = DEFAULT_LEVELS,
        g_delta: float = 1.0,
        rounds: int = 10,
        max_attempts: int = 5000,
        exact: bool = False,
        cover: str = "redraw",
        separated: bool = False,
        l_floor_ratio: float = 0.0,
        utility_floor: float = 1.0,
        window: int | None = None,
        release_on_early_finish: bool = False,
        best_effort: bool = True,
        **options: Any,
    ) -> None:
        super().__init__(
            release_on_early_finish=release_on_early_finish, best_effort=best_effort, **options
        )
        for flag, value in (("exact", exact), ("separated", separated)):
            if not isinstance(value, bool):
                raise ValueError(f"{flag} must be true or false, got {value!r}")
        if not _is_count(levels):
            raise ValueError(f"levels must be an integer >= 1, got {levels!r}")
        if window is not None and not _is_count(window):
            raise ValueError(f"window must be an integer >= 1 (slots) or None, got {window!r}")
        if not (_is_number(l_floor_ratio) and 0 <= l_floor_ratio < 1):
            raise ValueError(f"l_floor_ratio must be a number in [0, 1), got {l_floor_ratio!r}")
        if not (_is_number(utility_floor) and utility_floor >= 0):
            raise ValueError(f"utility_floor must be a finite number >= 0, got {utility_floor!r}")
        if not _is_number(g_delta):
            raise ValueError(f"g_delta must be a finite number > 0, got {g_delta!r}")
        self.rounding = Rounding(
            gain=float(g_delta),
            rounds=rounds,
            max_attempts=max_attempts,
            exact=exact,
            cover=cover,
        )
        self.levels = levels
        self.separated = separated
        self.l_floor_ratio = float(l_floor_ratio)
        self.utility_floor = float(utility_floor)
        self.window = window
        self._estimator: ConstantsEstimator | None = None

    # Setup ------------------------------------------------------------------------------
    def setup(self, context: RunContext) -> None:
        super().setup(context)
        cluster = context.cluster
        self._estimator = ConstantsEstimator(
            len(cluster.resource_names),
            slots=context.horizon or self.window or DEFAULT_WINDOW,
            total_capacity=float(np.asarray(cluster.capacity).sum()),
            l_floor_ratio=self.l_floor_ratio,
            utility_floor=self.utility_floor,
        )
        self._committed = CommittedPlans(cluster)
        self._next_slot = 0
        for job in context.catalogue:  # A4: the job population, as an oracle
            needs = self._needs(job, context)
            if needs is not None:
                self._learn(job, needs, job.arrival_slot, context.horizon)

    @property
    def constants(self) -> PdorsConstants:
        """The price constants in force (they widen as jobs arrive)."""
        assert self._estimator is not None, "setup() first"
        c = self._estimator.constants()
        if c is None:
            raise RuntimeError("no job with a positive utility seen yet")
        return c

    def _servers(self, job: JobSpec) -> tuple[np.ndarray, np.ndarray]:
        assert self.context is not None
        cluster = self.context.cluster
        return (
            np.array(eligible_worker_servers(job, cluster), dtype=np.int64),
            np.array(eligible_ps_servers(job, cluster), dtype=np.int64),
        )

    def _needs(
        self, job: JobSpec, context: RunContext | ClusterView, done: float = 0.0
    ) -> PdorsNeeds | None:
        if not job.uses_ps:
            return None
        cluster = context.cluster
        rates = per_worker_rates(job, context.runtime, context.slot_seconds, len(cluster))
        if not all(r > 0 and math.isfinite(r) for r in rates):
            return None
        return PdorsNeeds.of(job, cluster, rates, done=done)

    def _learn(self, job: JobSpec, needs: PdorsNeeds, first: int, horizon: int | None) -> None:
        assert self._estimator is not None
        end = self._window_end(first, horizon)
        utility = completion_utility(job, first)
        self._estimator.add(
            needs.alpha + needs.beta,
            needs.external_worker_slots,
            utility(needs.min_duration - 1),
            utility(max(0, end - 1 - first)),
        )

    def _window_end(self, first: int, horizon: int | None) -> int:
        if horizon is None:
            return first + (self.window or DEFAULT_WINDOW)
        return horizon if self.window is None else min(horizon, first + self.window)

    # Arrivals ---------------------------------------------------------------------------
    def _decide(
        self, job: JobSpec, view: ClusterView
    ) -> tuple[Admission, tuple[float, float, int | None, int]]:
        assert self._committed is not None and self.context is not None
        none = (-math.inf, math.nan, None, 0)
        if not self.supports(job):
            return Admission.reject(
                RejectKind.INFEASIBLE, "PD-ORS schedules parameter-server jobs (spec A29)"
            ), none
        workers, ps = self._servers(job)
        if not len(workers) or not len(ps):
            what = "worker" if not len(workers) else "PS"
            return Admission.reject(RejectKind.INFEASIBLE, f"no eligible {what} servers"), none
        needs = self._needs(job, view, done=view.done_work(job.job_id))
        if needs is None:
            return Admission.reject(RejectKind.INFEASIBLE, "the runtime model gives no rate"), none
        first = view.slot
        self._learn(job, needs, first, view.horizon)
        end = self._window_end(first, view.horizon)
        if end <= first:
            return Admission.reject(RejectKind.CAPACITY, "arrived at the horizon"), none
        if needs.min_duration > end - first:
            return Admission.reject(
                RejectKind.CAPACITY,
                f"needs {needs.min_duration} slots even with {needs.cap} co-located workers; "
                f"slots {first}..{end - 1} are left",
            ), none

        constants = self.constants
        capacity = np.asarray(view.cluster.capacity, dtype=float)
        used = self._committed.usage.window(first, end)
        rng = np.random.default_rng([self.context.seed, zlib.crc32(job.job_id.encode())])
        pricers: dict[bytes, SlotPricer] = {}

        def pricer_at(i: int) -> SlotPricer:
            key = used[i].tobytes()
            hit = pricers.get(key)
            if hit is None:
                hit = pricers[key] = SlotPricer(
                    needs,
                    constants.log_prices(used[i], capacity),
                    capacity - used[i],
                    workers,
                    ps,
                    rng,
                    self.rounding,
                    internal=not self.separated,
                )
            return hit

        utility = completion_utility(job, first)
        search = best_schedule(needs, pricer_at, utility, end - first, self.levels)
        record = (search.best_payoff, math.nan, None, search.examined)
        if search.best is None:
            if not search.exhausted:
                why = f"no completion in slots {first}..{end - 1} has a payoff > 0"
                return Admission.reject(RejectKind.UNPROFITABLE, why), record
            if search.best_payoff == -math.inf:
                why = f"no feasible schedule in slots {first}..{end - 1}"
                return Admission.reject(RejectKind.CAPACITY, why), record
            why = f"best payoff {search.best_payoff:.4g} is not > 0"
            return Admission.reject(RejectKind.UNPROFITABLE, why), record
        best = self._level(needs, search.best, pricer_at)
        slots = {first + i: Placement.of(c.workers, c.ps) for i, c in enumerate(best.slots) if c}
        plan = self._committed.commit(job, slots, cost=best.cost, payoff=best.payoff)
        completion = first + best.completion
        modes = sum(c.internal for c in best.slots if c)
        reason = (
            f"payoff {best.payoff:.4g} = utility {best.utility:.4g} - cost {best.cost:.4g}; "
            f"slots {plan.first_slot}..{completion}, {modes} of {len(slots)} co-located"
        )
        return Admission.admit(plan=plan, reason=reason), (
            best.payoff,
            best.cost,
            completion,
            search.examined,
        )

    def _level(
        self, needs: PdorsNeeds, best: Schedule, pricer_at: Callable[[int], SlotPricer]
    ) -> Schedule:
        """``best``, or the plan doing an equal share of the work in every slot from its
        first to its completion (Alg. 4's cheapest choice for that share), where it has
        fewer count changes and :func:`take_level` prefers it."""
        shapes = [_shape(c) for c in best.slots]
        start = next(i for i, c in enumerate(best.slots) if c is not None)
        changes = count_changes(shapes[start:])
        if changes == 0:
            return best
        share = needs.work / (best.completion - start + 1)
        level: list[SlotChoice | None] = [None] * start
        for i in range(start, best.completion + 1):
            choice = pricer_at(i).theta(share)
            if choice is None:
                return best
            level.append(choice)
        cost = sum(c.cost for c in level if c is not None)
        if count_changes([_shape(c) for c in level[start:]]) >= changes or not take_level(
            best_cost=best.cost, best_payoff=best.payoff, level_cost=cost, slack=self.steady_slack
        ):
            return best
        return Schedule(best.completion, best.utility, cost, tuple(level))

    # Slots ------------------------------------------------------------------------------
    def _best_effort(
        self, slot: int, view: ClusterView, planned: dict[str, Placement]
    ) -> dict[str, Placement]:
        """Jobs past their planned completion and not done run on what the plans leave:
        the most workers Alg. 4 can place there, at the slot's prices."""
        committed = self._committed
        assert committed is not None and self.context is not None
        behind = committed.behind(slot, view, planned)
        if not behind:
            return {}
        capacity = np.asarray(view.cluster.capacity, dtype=float)
        free = committed.free_beside(planned)
        ln_prices = self.constants.log_prices(committed.usage.at(slot), capacity)
        out: dict[str, Placement] = {}
        for job_id in behind:
            job = committed.specs[job_id]
            needs = self._needs(job, view)
            if needs is None:
                continue
            workers, ps = self._servers(job)
            rng = np.random.default_rng([self.context.seed, slot, zlib.crc32(job_id.encode())])
            pricer = SlotPricer(
                needs, ln_prices, free, workers, ps, rng, self.rounding, not self.separated
            )
            rate = min(needs.rate_int, needs.rate_ext)
            lo, hi, found = 1, needs.cap, None  # the most workers that fit: bisect
            while lo <= hi:
                mid = (lo + hi) // 2
                choice = pricer.theta(mid * rate)
                if choice is None:
                    hi = mid - 1
                else:
                    found, lo = choice, mid + 1
            if found is None:
                continue
            placement = Placement.of(found.workers, found.ps)
            for s, amount in placement.usage(job, view.cluster).items():
                free[s] -= amount
            out[job_id] = placement
        return out


def _shape(choice: SlotChoice | None) -> tuple[int, int, bool] | None:
    """What a restart depends on: worker and PS counts and the mode (None: idle)."""
    if choice is None:
        return None
    return choice.n_workers, sum(choice.ps.values()), choice.internal


def _is_number(value: object) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    )


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1
