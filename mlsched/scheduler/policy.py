"""The one interface every scheduling/pricing policy implements.

Two required methods:

* :meth:`Policy.on_arrival` answers each arriving job with an :class:`Admission`: admit
  (optionally with a price :class:`Quote` the user may decline, and/or a committed
  :class:`Plan` over future slots, as OASiS, PD-ORS and DPS do) or reject (with the kind).
* :meth:`Policy.allocate` returns the slot's :class:`Allocation` (per job: workers and PSs
  per server, worker/PS type). Policies that re-plan every slot (GADGET, the baselines)
  compute it here; plan-committing ones read it off their plans; batch policies (the
  heterogeneous scheduler) decide their batches here when a round's time has come.

Optional hooks default to no-ops. :meth:`release` must be idempotent: it undoes a job's
reservations when the engine drops the job (a declined quote, a lost agent).

A policy whose model covers only some job kinds declares them in :attr:`Policy.archs`
(PD-ORS: parameter-server jobs only); :meth:`Policy.supports` reads it, the policy answers
other jobs ``infeasible``, and experiments and tests offer it only the jobs it supports.

An offline benchmark (spec 004's best fixed price) may derive options from the whole job
set, private valuations included: :meth:`Policy.oracle_options`, which the simulator's runner
calls before building the policy. Nothing on the testbed calls it (its future is unknown).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from mlsched.core.allocation import Admission, Allocation
from mlsched.core.job import Arch, JobSpec
from mlsched.scheduler.view import ClusterView, RunContext

__all__ = ["Policy"]


class Policy(ABC):
    """Base class of all policies; subclasses set :attr:`name` and :attr:`description`."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    #: The job architectures the policy's model covers.
    archs: ClassVar[frozenset[Arch]] = frozenset(Arch)
    #: Whether admitted jobs wait for the policy's next batch round before they may run
    #: (the heterogeneous scheduler), rather than running from their admission on.
    batch_rounds: ClassVar[bool] = False
    #: Runtime model family per job kind the policy's model assumes (the testbed's
    #: controller builds its runtime model with them; empty: the defaults per kind).
    runtime_families: ClassVar[Mapping[str, str]] = {}
    #: Options the testbed's controller gives the policy unless told otherwise (a setting
    #: the policy's spec recommends for real clusters rather than for its simulations).
    testbed_defaults: ClassVar[Mapping[str, Any]] = {}
    #: Whether it takes ``placement="ring"``: spec 003's ring placement, which reserves a
    #: ring-all-reduce job's bandwidth on every hop (``hop_gbps``) as its P0 places it.
    ring_placement: ClassVar[bool] = False

    @classmethod
    def supports(cls, job: JobSpec) -> bool:
        """Whether the policy's model covers ``job`` (else it answers ``infeasible``)."""
        return job.arch in cls.archs

    @classmethod
    def oracle_options(
        cls, jobs: Sequence[JobSpec], context: RunContext, options: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Options found offline from every job of a simulated run, valuations included
        (``options``: those given; what is returned fills in the rest). None by default."""
        return {}

    def __init__(self, **options: Any) -> None:
        if options:
            raise TypeError(f"unknown option(s) {sorted(options)}")
        self.context: RunContext | None = None

    def setup(self, context: RunContext) -> None:
        """Called once before the first slot."""
        self.context = context

    @abstractmethod
    def on_arrival(self, job: JobSpec, view: ClusterView) -> Admission:
        """Admit or reject a job arriving in ``view.slot``."""

    @abstractmethod
    def allocate(self, slot: int, view: ClusterView) -> Allocation:
        """The placement of every job that runs in ``slot``."""

    def on_quote_response(self, job_id: str, accepted: bool, view: ClusterView) -> None:  # noqa: B027
        """The user's answer to a quoted price (pricing policies learn from it)."""

    def on_completion(self, job_id: str, view: ClusterView) -> None:  # noqa: B027
        """A job finished its work in ``view.slot``."""

    def release(self, job_id: str) -> None:  # noqa: B027
        """Drop the job's reservations; safe to call twice or for an unknown job."""

    def __repr__(self) -> str:
        return f"<policy {self.name}>"
