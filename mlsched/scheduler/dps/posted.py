"""What spec 004's pricing schemes share: post a price, place on acceptance, run to the end.

On an arrival (spec §3.3): the job's types count it (line 1); a job that could never run is
rejected ``infeasible``; one whose workers or PSs exceed what its types have free
(``d + y > C``, line 8 and A8) or that PA cannot place now is rejected ``capacity``, with
no offer. Otherwise the subclass prices it (:meth:`PostedPricePolicy._price`), the placement
is held, and the admission carries a :class:`Quote` of ``price_scale x (p^W d^W + p^P d^P)``.
The engine puts the quote to the user (who accepts iff it is within the job's private
valuation; a job without one accepts any price) and tells the policy
(:meth:`on_quote_response`): accepted, the job runs where it was placed until it is done
(no preemption); declined, its resources go back and it leaves for good (U1).

Every arrival leaves an :class:`Offer` in :attr:`PostedPricePolicy.decisions` (spec §7
item 8: prices, index values and the active bound, phase, placement, predicted and actual
runtime, and the seconds the decision took).
"""

from __future__ import annotations

import math
import time
from abc import abstractmethod
from dataclasses import dataclass
from typing import Any

from mlsched.core.allocation import Admission, Allocation, Placement, Quote, RejectKind
from mlsched.core.job import JobSpec
from mlsched.scheduler.baselines.common import job_rng
from mlsched.scheduler.baselines.taskfill import TaskFiller
from mlsched.scheduler.dps.bandit import Choice
from mlsched.scheduler.dps.options import check_choice, check_count, check_number
from mlsched.scheduler.dps.placement import PLACEMENTS, place
from mlsched.scheduler.dps.types import Role, Shape, TypeBook, TypeState, shape_of
from mlsched.scheduler.policy import Policy
from mlsched.scheduler.view import ClusterView, RunContext

__all__ = ["DEFAULT_WINDOW", "Held", "Offer", "PostedPricePolicy", "Prices"]

#: T in slots where the run has no horizon (the testbed): μ = T - τ and Theorem 2's δ use it.
DEFAULT_WINDOW = 1000


@dataclass(frozen=True)
class Prices:
    """Unit prices in [0, 1] for one offer; ``phase`` names how they were set."""

    worker: float
    ps: float = 0.0
    phase: str = "priced"
    worker_choice: Choice | None = None
    ps_choice: Choice | None = None


@dataclass
class Offer:
    """One arrival's decision. ``phase``: ``explore`` (DPS's zero price), ``exploit``,
    ``priced`` (a baseline's price), ``full`` (no capacity: no offer), ``infeasible`` or
    ``readmit`` (a job admitted before a reconfiguration, at its agreed price). Prices are
    normalised; ``charge`` is the quote's total."""

    job_id: str
    slot: int
    phase: str
    worker_type: str | None = None
    ps_type: str | None = None
    n_workers: int = 0
    n_ps: int = 0
    worker_price: float = 0.0
    ps_price: float = 0.0
    charge: float = 0.0
    worker_index: float | None = None
    ps_index: float | None = None
    worker_term: str = ""
    ps_term: str = ""
    #: Jobs of the type from which the capacity bound would set the price (``Choice``).
    worker_threshold: float | None = None
    ps_threshold: float | None = None
    accepted: bool | None = None
    colocated: bool | None = None
    servers: int = 0
    predicted_slots: int | None = None
    runtime_slots: int | None = None
    seconds: float = 0.0


@dataclass
class Held:
    """A job whose placement is taken: waiting for its user's answer, or running."""

    shape: Shape
    worker: TypeState
    ps: TypeState | None
    placement: Placement
    offer: Offer
    prices: Prices | None = None


class PostedPricePolicy(Policy):
    """Posted prices with PA placement; subclasses set the prices (:meth:`_price`) and may
    learn from the answers (:meth:`_heard`) and the completions (:meth:`_finished`)."""

    def __init__(
        self,
        *,
        placement: str = "pa",
        price_scale: float = 1.0,
        window: int = DEFAULT_WINDOW,
        expected_jobs: int = 100,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self.placement = check_choice("placement", placement, PLACEMENTS)
        self.price_scale = check_number("price_scale", price_scale, low=0.0, low_open=True)
        self.window = check_count("window", window)
        self.expected_jobs = check_count("expected_jobs", expected_jobs)
        #: Every arrival's decision, in arrival order.
        self.decisions: list[Offer] = []
        self._book: TypeBook | None = None
        self._filler: TaskFiller | None = None
        self._pending: dict[str, Held] = {}
        self._running: dict[str, Held] = {}
        self._shapes: dict[str, Shape] = {}

    # Setup ------------------------------------------------------------------------------
    def setup(self, context: RunContext) -> None:
        super().setup(context)
        self._filler = TaskFiller(context.cluster)
        self._book = TypeBook(context.cluster, self.expected_jobs)
        # Shapes of the catalogue's jobs are kept for their arrivals (a shape costs more
        # than the rest of a decision).
        self._shapes = {
            j.job_id: s for j in context.catalogue if isinstance(s := self._shape(j), Shape)
        }
        self._book.count_catalogue(list(self._shapes.values()))
        self.decisions = []
        self._pending.clear()
        self._running.clear()

    @property
    def horizon(self) -> int:
        """T in slots: the run's horizon, else ``window``."""
        assert self.context is not None, "setup() first"
        return self.context.horizon or self.window

    @property
    def types(self) -> dict[tuple[Role, str], TypeState]:
        """(role, type name) -> the type's capacity, occupancy and counters."""
        assert self._book is not None, "setup() first"
        return dict(self._book.types)

    def _shape(self, job: JobSpec) -> Shape | str:
        assert self.context is not None
        return shape_of(job, self.context.cluster, self.context.seed)

    # Pricing (subclasses) ---------------------------------------------------------------
    @abstractmethod
    def _price(
        self, shape: Shape, worker: TypeState, ps: TypeState | None, view: ClusterView
    ) -> Prices:
        """The unit prices offered to a job that fits now."""

    def _heard(self, held: Held, accepted: bool) -> None:
        """The user's answer to a priced offer."""

    def _finished(self, held: Held, runtime_slots: int) -> None:
        """A job completed after ``runtime_slots`` slots."""

    # Arrivals ---------------------------------------------------------------------------
    def on_arrival(self, job: JobSpec, view: ClusterView) -> Admission:
        start = time.perf_counter()
        offer = Offer(job.job_id, view.slot, "infeasible")
        self.decisions.append(offer)
        try:
            return self._arrive(job, view, offer)
        finally:
            offer.seconds = time.perf_counter() - start

    def _arrive(self, job: JobSpec, view: ClusterView, offer: Offer) -> Admission:
        assert self._book is not None and self._filler is not None
        if not self.supports(job):
            return Admission.reject(
                RejectKind.INFEASIBLE, f"{self.name} does not run {job.arch.value} jobs"
            )
        shape = self._shapes.pop(job.job_id, None) or self._shape(job)
        if isinstance(shape, str):
            return Admission.reject(RejectKind.INFEASIBLE, shape)
        worker, ps = self._book.of(shape)
        offer.worker_type, offer.ps_type = shape.worker_type, shape.ps_type
        offer.n_workers, offer.n_ps = shape.n_workers, shape.n_ps
        short = [t.name for t in (worker, ps) if t is not None and shape.count(t.role) > t.capacity]
        if short:
            return Admission.reject(
                RejectKind.INFEASIBLE,
                f"asks for more than the cluster's {', '.join(short)} capacity",
            )
        readmit = view.readmitted(job.job_id)
        if not readmit:
            worker.arrivals += 1  # line 1: the job counts whatever comes of it
            if ps is not None:
                ps.arrivals += 1
        offer.phase = "full"
        full = [t for t in (worker, ps) if t is not None and not t.fits(shape.count(t.role))]
        if full:  # no offer: the job leaves (spec line 20)
            return Admission.reject(
                RejectKind.CAPACITY,
                "; ".join(
                    f"{t.role} type {t.name}: {shape.count(t.role)} asked, "
                    f"{t.capacity - t.occupied} of {t.capacity} free"
                    for t in full
                ),
            )
        placement = self._place(shape)
        if placement is None:
            return Admission.reject(RejectKind.CAPACITY, "PA finds no room for it now")
        held = Held(shape, worker, ps, placement, offer)
        offer.colocated, offer.servers = placement.colocated, len(placement.servers)
        offer.predicted_slots = view.slots_needed(job, placement)
        if readmit:  # its price was agreed when it was first admitted
            offer.phase, offer.accepted = "readmit", True
            self._start(held)
            return Admission.admit(reason="admitted again at its agreed price")
        self._pending[job.job_id] = held  # held before pricing: release() can give it back
        prices = self._price(shape, worker, ps, view)
        held.prices = prices
        self._record(offer, shape, prices)
        quote = Quote(
            offer.charge,
            {"worker": self.price_scale * prices.worker, "ps": self.price_scale * prices.ps},
        )
        return Admission.admit(
            quote=quote,
            reason=f"{prices.phase}: {shape.n_workers} x {shape.worker_type} at "
            f"{prices.worker:.3g}"
            + (f", {shape.n_ps} x {shape.ps_type} at {prices.ps:.3g}" if shape.n_ps else "")
            + f"; {placement.describe()}",
        )

    def _record(self, offer: Offer, shape: Shape, prices: Prices) -> None:
        offer.phase = prices.phase
        offer.worker_price, offer.ps_price = prices.worker, prices.ps
        offer.charge = self.price_scale * (prices.worker * shape.n_workers + prices.ps * shape.n_ps)
        for role, choice in (("worker", prices.worker_choice), ("ps", prices.ps_choice)):
            if choice is not None:
                setattr(offer, f"{role}_index", choice.index)
                setattr(offer, f"{role}_term", choice.term)
                finite = choice.threshold if math.isfinite(choice.threshold) else None
                setattr(offer, f"{role}_threshold", finite)

    def _place(self, shape: Shape) -> Placement | None:
        assert self._filler is not None and self.context is not None
        rng = job_rng(self.context.seed, shape.job_id, "rs") if self.placement == "random" else None
        return place(self._filler, shape, self.placement, rng)

    def _start(self, held: Held) -> None:
        held.worker.occupied += held.shape.n_workers
        if held.ps is not None:
            held.ps.occupied += held.shape.n_ps
        self._running[held.shape.job_id] = held

    def on_quote_response(self, job_id: str, accepted: bool, view: ClusterView) -> None:
        start = time.perf_counter()
        held = self._pending.pop(job_id, None)
        if held is None:
            return
        held.offer.accepted = accepted
        self._heard(held, accepted)
        if accepted:
            self._start(held)
        else:
            self._give_back(held)
        held.offer.seconds += time.perf_counter() - start

    # Slots ------------------------------------------------------------------------------
    def allocate(self, slot: int, view: ClusterView) -> Allocation:
        return Allocation(slot, {j: h.placement for j, h in self._running.items()})

    def on_completion(self, job_id: str, view: ClusterView) -> None:
        held = self._running.get(job_id)
        if held is None:
            return
        runtime = view.slot - held.offer.slot + 1
        held.offer.runtime_slots = runtime
        self.release(job_id)
        self._finished(held, runtime)

    def release(self, job_id: str) -> None:
        held = self._pending.pop(job_id, None)
        if held is not None:
            self._give_back(held)
        held = self._running.pop(job_id, None)
        if held is not None:
            self._give_back(held)
            held.worker.occupied -= held.shape.n_workers
            if held.ps is not None:
                held.ps.occupied -= held.shape.n_ps

    def _give_back(self, held: Held) -> None:
        assert self._filler is not None
        for s, c in held.placement.workers:
            self._filler.give(s, held.shape.worker, c)
        for s, c in held.placement.ps:
            self._filler.give(s, held.shape.ps, c)
