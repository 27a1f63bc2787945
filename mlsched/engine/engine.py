"""The transport-free slot loop shared by the simulator and the real cluster.

Each slot ``t``:

1. arrivals of slot t, in submission order -> ``policy.on_arrival`` -> admit / reject; a
   quoted price goes to the user (the job's private valuation), whose answer the policy hears;
2. ``policy.allocate(t)`` -> validated (capacity, pools, bounds): a bad allocation is a
   :class:`PolicyError` naming the policy, never silently trimmed;
3. the executor runs the slot and reports progress and measurements;
4. progress is accounted (a job completes in the slot its work is done), measurements go
   to the runtime model with the prediction they are compared against, and it is refitted.

The engine advances one slot per :meth:`Engine.step`; :meth:`Engine.run` loops until every
job is final, the horizon is reached, or nothing can change any more (a stall).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, KeysView, Mapping
from functools import partial
from typing import Any

import numpy as np

from mlsched.core.allocation import Admission, Allocation, JobState, Placement, RejectKind
from mlsched.core.cluster import Cluster
from mlsched.core.errors import PolicyError, SpecError, shorten
from mlsched.core.job import JobSpec
from mlsched.core.type_hosts import type_problems
from mlsched.engine.charges import Charges
from mlsched.engine.coast import Coast, Coasting, Ending, Others
from mlsched.engine.executor import Executor, SlotReport
from mlsched.engine.model_errors import ModelErrors
from mlsched.engine.results import JobRecord, ModelError, RunResult, SlotOutcome, StateChange
from mlsched.engine.users import UserModel, valuation_user
from mlsched.perfmodel.base import Measurement
from mlsched.perfmodel.estimator import RuntimeEstimator
from mlsched.scheduler.policy import Policy
from mlsched.scheduler.view import ClusterView, RunContext

__all__ = [
    "AllocationHook",
    "Engine",
    "JobRecord",
    "ModelError",
    "RunResult",
    "SlotOutcome",
    "StateChange",
]

# Made without the named tuple's Python-level __new__: one per measurement.
_model_error = partial(tuple.__new__, ModelError)

log = logging.getLogger(__name__)

#: Called with (policy, its view, the allocation it returned) once per slot.
AllocationHook = Callable[[Policy, ClusterView, Allocation], None]


class Engine:
    """One engine; the executor (simulator or cluster) and clock are what differ."""

    def __init__(
        self,
        cluster: Cluster,
        policy: Policy,
        executor: Executor,
        runtime: RuntimeEstimator,
        *,
        slot_seconds: float,
        horizon: int | None = None,
        seed: int = 0,
        catalogue: Iterable[JobSpec] = (),
        user: UserModel = valuation_user,
        stall_slots: int = 200,
        reject_on_policy_error: bool = False,
        check_types: bool = True,
    ) -> None:
        if slot_seconds <= 0:
            raise SpecError("slot_seconds", slot_seconds, "a number > 0")
        # A simulated cluster is fixed: a type it cannot host is an error in its
        # description. A live one grows as agents join (the controller warns instead).
        if check_types:
            problems = type_problems(cluster)
            if problems:
                raise problems[0]
        self.cluster = cluster
        self.policy = policy
        self.executor = executor
        self.runtime = runtime
        self.slot_seconds = float(slot_seconds)
        #: Called with (policy call, seconds) after each call into the policy (metrics).
        self.observe: Callable[[str, float], None] | None = None
        #: Called with (policy, its view, the allocation it returned) each slot, before
        #: the allocation is checked: what an experiment replays or reads of a policy.
        self.on_allocate: AllocationHook | None = None
        self.horizon = horizon
        self.user = user
        self.stall_slots = stall_slots
        # A live cluster rejects the one job a policy cannot take (its error as the reason)
        # rather than failing the slot for everyone; a simulation surfaces the policy bug.
        self.reject_on_policy_error = reject_on_policy_error
        self.slot = 0
        self.records: dict[str, JobRecord] = {}
        self._changes: list[StateChange] = []  # this step's, returned by step()
        self._active: dict[str, JobRecord] = {}
        self._arrivals: deque[JobSpec] = deque()
        self._pending_ids: set[str] = set()  # ids in _arrivals (O(1) duplicate check)
        self._charges = Charges(cluster)
        self._was_running: KeysView[str] | None = None  # the last allocation's jobs
        self._util_rows: list[np.ndarray] = []
        self.model_errors = ModelErrors()
        self._idle = 0
        self._stuck = 0  # slots in a row with jobs allocated and none progressing
        self._seed = seed
        self._catalogue = tuple(j.public() for j in catalogue)
        self._parked: dict[str, JobRecord] = {}  # admitted, but the policy could not re-admit
        self._coasting: Coasting | None = None  # steady jobs, while run() loops
        #: Job-slots run() accounted without the executor (:mod:`.coast`).
        self.coasted_slots = 0
        self._setup_policy()

    def _setup_policy(self) -> None:
        self._call(
            "setup",
            self.policy.setup,
            RunContext(
                cluster=self.cluster,
                slot_seconds=self.slot_seconds,
                horizon=self.horizon,
                seed=self._seed,
                runtime=self.runtime,
                catalogue=self._catalogue,
            ),
        )

    # Submission -------------------------------------------------------------------------
    def submit(self, job: JobSpec) -> None:
        """Queue a job; it arrives at ``max(job.arrival_slot, current slot)``."""
        if job.job_id in self.records or job.job_id in self._pending_ids:
            raise SpecError("job_id", job.job_id, "a job id not used before")
        self._pending_ids.add(job.job_id)
        if self._arrivals and job.arrival_slot < self._arrivals[-1].arrival_slot:
            ordered = sorted([*self._arrivals, job], key=lambda j: j.arrival_slot)
            self._arrivals = deque(ordered)
        else:
            self._arrivals.append(job)

    def submit_all(self, jobs: Iterable[JobSpec]) -> None:
        for job in sorted(jobs, key=lambda j: j.arrival_slot):
            self.submit(job)

    # Changes from outside the slot loop (the testbed controller) -------------------------
    def cancel(self, job_id: str, reason: str = "cancelled by its user") -> JobRecord:
        """End a pending or active job now; its resources are free from the next slot."""
        return self._end(job_id, JobState.CANCELLED, reason)

    def fail(self, job_id: str, reason: str) -> JobRecord:
        """End an active job that cannot run (e.g. its training keeps crashing)."""
        return self._end(job_id, JobState.FAILED, reason)

    def _end(self, job_id: str, state: JobState, reason: str) -> JobRecord:
        if job_id in self._pending_ids:
            job = next(j for j in self._arrivals if j.job_id == job_id)
            self._arrivals.remove(job)
            self._pending_ids.discard(job_id)
            self.records[job_id] = JobRecord(job)
        record = self.records.get(job_id)
        if record is None:
            raise SpecError("job_id", job_id, "the id of a submitted job")
        if record.state.is_final:
            raise SpecError(
                "job_id", job_id, f"a job that is not final (it is {record.state.value})"
            )
        self._move(record, state)
        record.reason = reason
        self._parked.pop(job_id, None)
        if self._coasting is not None:
            self._coasting.drop(job_id)
        if self._active.pop(job_id, None) is not None:
            self._charges.release(record.spec)
            self.policy.release(job_id)
        return record

    def reconfigure(self, cluster: Cluster, policy: Policy) -> list[str]:
        """Continue on another cluster (agents joined or were lost) with a fresh policy.

        The runtime model, records and slot clock carry over. Every admitted job is admitted
        again by the new policy in its original admission order, whatever the policy answers:
        an admission stands (the price was agreed). A job the new policy will not take (it no
        longer fits) waits, paused, and is offered again at the next reconfiguration.
        Returns those waiting jobs' ids.
        """
        self.cluster = cluster
        self.runtime.set_cluster(cluster)
        self.policy = policy
        self._charges = Charges(cluster)
        self._was_running = None
        if self._coasting is not None:
            self._coasting.drop()
        self._setup_policy()
        return self._readmit()

    def restore(self, records: Iterable[JobRecord], *, slot: int) -> list[str]:
        """Resume from saved records (a restarted controller): final ones are kept as
        history, pending ones queue again, admitted ones are re-admitted as in
        :meth:`reconfigure`. Returns the ids of admitted jobs left waiting."""
        self.slot = slot
        for record in records:
            if record.state is JobState.PENDING:
                self.submit(record.spec)
                continue
            self.records[record.job_id] = record
            if record.state.is_active:
                self._active[record.job_id] = record
        return self._readmit()

    def _readmit(self) -> list[str]:
        waiting = {**self._parked}
        self._parked.clear()
        candidates = sorted(
            {**self._active, **waiting}.values(),
            key=lambda r: r.admitted_slot if r.admitted_slot is not None else 0,
        )
        self._active.clear()
        for record in candidates:
            record.last_placement = None  # server indices may have changed
            view = self.view(done={record.job_id: record.progress})
            adm = self._call("on_arrival", self.policy.on_arrival, record.spec.public(), view)
            if isinstance(adm, Admission) and adm.is_admitted():
                record.plan = adm.plan
                if record.state is JobState.PAUSED and record.job_id in waiting:
                    record.reason = ""
                self._active[record.job_id] = record
            else:
                why = adm.reason if isinstance(adm, Admission) else "no admission"
                self._move(record, JobState.PAUSED)
                record.reason = f"waiting for capacity: {why}"
                self._parked[record.job_id] = record
                log.warning("[engine] job %s waits for capacity: %s", record.job_id, why)
        return sorted(self._parked)

    @property
    def placements(self) -> dict[str, Placement]:
        """Where each job runs in the current slot."""
        return self._charges.placements

    @property
    def used(self) -> np.ndarray:
        """Resources in use per server (servers x resources), as allocated this slot."""
        return self._charges.used.copy()

    @property
    def link_used(self) -> np.ndarray:
        """Gbit/s reserved per link (``cluster.links`` order), as allocated this slot."""
        return self._charges.links.used.copy()

    @property
    def waiting(self) -> tuple[str, ...]:
        """Admitted jobs the current policy could not take back (see :meth:`reconfigure`)."""
        return tuple(self._parked)

    # The slot loop ----------------------------------------------------------------------
    def view(self, done: Mapping[str, float] | None = None) -> ClusterView:
        return ClusterView(
            slot=self.slot,
            slot_seconds=self.slot_seconds,
            horizon=self.horizon,
            cluster=self.cluster,
            runtime=self.runtime,
            jobs=self._active,
            used=self._charges.used,
            done=done,
        )

    def step(self) -> SlotOutcome:
        """Run one slot: arrivals, allocation, execution, accounting. Returns the slot's
        report with every state change and model error it brought."""
        errors_before = len(self.model_errors)
        report = self._step()
        return SlotOutcome(report, tuple(self._changes), tuple(self.model_errors[errors_before:]))

    def _step(self) -> SlotReport:
        """:meth:`step`, returning the executor's report only (what :meth:`run` needs)."""
        t = self.slot
        self._changes = []
        arrived = self._admit_arrivals(t)
        view = self.view()
        allocation = self._call("allocate", self.policy.allocate, t, view)
        if not isinstance(allocation, Allocation):
            raise PolicyError(
                self.policy.name,
                f"allocate() returned {type(allocation)!r}, expected an Allocation",
            )
        if self.on_allocate is not None:
            self.on_allocate(self.policy, view, allocation)
        self._check_and_account(t, allocation)
        active = self._active
        now: dict[str, Coast] = {}
        others: Others | None = None
        ending: list[Ending] = []
        if self._coasting is not None:
            now, others, specs, remaining, ending = self._coasting.select(t, allocation, active)
        else:
            specs, remaining = {}, {}
            for j in allocation:
                record = active[j]
                spec = specs[j] = record.spec
                remaining[j] = spec.total_work - record.progress
        if now:
            self.executor.apply_except(t, allocation, specs, remaining, now)
        else:
            self.executor.apply(t, allocation, specs, remaining)
        report = self.executor.collect(t)
        self._account(t, allocation, report, now, others, ending)
        self._idle = 0 if (allocation or arrived) else self._idle + 1
        # A policy that moves every job before its start-up is paid (a preemptive LAS whose
        # restart outlasts a slot) allocates each slot and finishes nothing, for ever.
        moved = bool(now) or arrived > 0 or any(p.units > 0 for p in report.progress.values())
        self._stuck = 0 if (moved or not allocation) else self._stuck + 1
        self.slot += 1
        return report

    def _move(self, record: JobRecord, state: JobState) -> None:
        """Move a job along the state machine (:data:`TRANSITIONS`); a move it does not
        allow is an engine bug."""
        old = record.state
        if old is state:
            return
        if not old.can_become(state):
            raise RuntimeError(f"job {record.job_id}: {old.value} -> {state.value} is not a move")
        record.state = state
        self._changes.append(StateChange(record.job_id, old, state))

    def done(self) -> bool:
        if self.horizon is not None and self.slot >= self.horizon:
            return True
        return not self._arrivals and not self._active and not self._parked

    def stalled(self) -> bool:
        """Active jobs, no pending arrivals, and for ``stall_slots`` slots nothing allocated,
        or jobs allocated and none of them progressing (a livelock)."""
        return (
            self.horizon is None
            and not self._arrivals
            and bool(self._active)
            and max(self._idle, self._stuck) >= self.stall_slots
        )

    def run(
        self,
        *,
        until: int | None = None,
        progress: Callable[[int], None] | None = None,
        coast: bool = True,
    ) -> RunResult:
        """Step until every job is final, the horizon, ``until`` or a stall. ``coast``:
        steady jobs are accounted by the engine where the executor can tell their slots
        in advance (:mod:`.coast`; the same result, faster); False steps every job
        through the executor."""
        start = time.perf_counter()
        runtime = self.runtime
        if coast and self.executor.coasts() and isinstance(runtime, RuntimeEstimator):
            self._coasting = Coasting(self.executor, runtime, self.model_errors)
        try:
            stalled = self._loop(until, progress)
        finally:
            if self._coasting is not None:
                self.coasted_slots += self._coasting.slots
            self._coasting = None
        return self.result(wall_seconds=time.perf_counter() - start, stalled=stalled)

    def _loop(self, until: int | None, progress: Callable[[int], None] | None) -> bool:
        """Step until done, ``until`` or a stall (returned)."""
        stalled = False
        while not self.done() and (until is None or self.slot < until):
            self._step()
            if progress is not None:
                progress(self.slot)
            if self.stalled():
                stalled = True
                log.warning(
                    "[engine] stalled at slot %d with %d active jobs: %s for %d slots",
                    self.slot,
                    len(self._active),
                    "none allocated" if self._idle else "allocated, none progressing",
                    self.stall_slots,
                )
                break
        return stalled

    def result(self, *, wall_seconds: float = 0.0, stalled: bool = False) -> RunResult:
        util = (
            np.vstack(self._util_rows)
            if self._util_rows
            else np.zeros((0, len(self.cluster.resource_names)))
        )
        return RunResult(
            policy=self.policy.name,
            records=dict(self.records),
            slots=self.slot,
            slot_seconds=self.slot_seconds,
            resource_names=self.cluster.resource_names,
            utilization=util,
            model_errors=self.model_errors.copy(),
            wall_seconds=wall_seconds,
            stalled=stalled,
            horizon=self.horizon,
        )

    # Arrivals ---------------------------------------------------------------------------
    def _call(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        observe = self.observe
        started = time.perf_counter() if observe is not None else 0.0
        try:
            return fn(*args)
        except (PolicyError, KeyboardInterrupt):
            raise
        except Exception as err:  # wrap with the policy's name: a policy bug, not bad input
            raise PolicyError(self.policy.name, f"{what} failed: {err!r}") from err
        finally:
            if observe is not None:
                observe(what, time.perf_counter() - started)

    def _admit_arrivals(self, t: int) -> int:
        n = 0
        view = None  # one serves the slot's arrivals: it reads the live jobs and use
        while self._arrivals and self._arrivals[0].arrival_slot <= t:
            job = self._arrivals.popleft()
            self._pending_ids.discard(job.job_id)
            n += 1
            record = JobRecord(job)
            self.records[job.job_id] = record
            problem = self.cluster.types.job_problem(job)
            if problem is not None:  # a type the cluster's catalogue does not have
                self._move(record, JobState.REJECTED)
                record.reject_kind = RejectKind.INFEASIBLE
                record.reason = shorten(f"not a type of this cluster: {problem}", 300)
                continue
            public = job.public()
            if view is None:
                view = self.view()
            try:
                adm = self._call("on_arrival", self.policy.on_arrival, public, view)
                if not isinstance(adm, Admission):
                    raise PolicyError(
                        self.policy.name,
                        f"on_arrival() returned {type(adm)!r}, expected an Admission",
                    )
            except PolicyError as err:
                if not self.reject_on_policy_error:
                    raise
                log.error("[engine] job %s rejected: %s", job.job_id, err)
                self._move(record, JobState.REJECTED)
                record.reason = shorten(str(err), 300)
                self.policy.release(job.job_id)
                continue
            record.quote = adm.quote
            if adm.is_admitted() and adm.quote is not None:
                accepted = self.user(job, adm.quote)
                self._call(
                    "on_quote_response",
                    self.policy.on_quote_response,
                    job.job_id,
                    accepted,
                    view,
                )
                if not accepted:
                    self.policy.release(job.job_id)
                    adm = Admission.reject(
                        RejectKind.DECLINED, "user declined the price", quote=adm.quote
                    )
            if adm.is_admitted():
                self._move(record, JobState.ADMITTED)
                record.admitted_slot = t
                record.plan = adm.plan
                record.reason = adm.reason
                self._active[job.job_id] = record
            else:
                self._move(record, JobState.REJECTED)
                record.reject_kind = adm.reject_kind
                record.reason = adm.reason
        return n

    # Allocation checks ------------------------------------------------------------------
    def _check_and_account(self, t: int, allocation: Allocation) -> None:
        # Every allocated job active (a C-level look over the keys), else the first not.
        for job_id in () if self._active.keys() >= allocation.keys() else allocation:
            if job_id not in self._active:
                state = self.records[job_id].state.value if job_id in self.records else "unknown"
                raise PolicyError(
                    self.policy.name,
                    f"slot {t}: allocated to job {job_id!r} which is {state}, not active",
                )
        self._charges.charge(self.policy.name, t, allocation, self.records)
        self._util_rows.append(self._charges.utilization())

    # Accounting -------------------------------------------------------------------------
    def _account(
        self,
        t: int,
        allocation: Allocation,
        report: SlotReport,
        now: Mapping[str, Coast] | None = None,
        others: Others | None = None,
        ending: Iterable[Ending] = (),
    ) -> None:
        """Slot ``t``'s progress, failures, pauses and measurements; ``now``: the coasting
        jobs (:mod:`.coast`), ``others``: the rest of the allocation, ``ending``: the
        coasting jobs this slot finishes."""
        records_of, progress, running = self._active, report.progress, JobState.RUNNING
        finished: list[str] = []  # each by _finish, the one road to DONE
        for job_id, p in allocation.items() if others is None else others:
            record = records_of[job_id]
            prog = progress.get(job_id)
            last = record.last_placement
            if last is not p:
                if last is not None and last != p:
                    record.restarts += 1
                record.last_placement = p
                if record.started_slot is None:
                    record.started_slot = t
            record.slots_run += 1
            record.worker_slots += p.n_workers
            if record.state is not running:
                self._move(record, running)
            if prog is None:
                continue
            units = record.progress + prog.units
            total = record.spec.total_work
            record.progress = units if units < total else total
            if prog.restart_s:
                record.restart_s += prog.restart_s
            if prog.startup_s:
                record.startup_s += prog.startup_s
            if prog.finished:
                offset = prog.finish_offset_s
                self._finish(record, t, self.slot_seconds if offset is None else offset)
                finished.append(job_id)
        fatal: list[tuple[str, str]] = []
        for job_id, failure in report.failures.items():
            failed = self.records.get(job_id)
            if failed is not None and failed.state.is_active:
                log.warning("[engine] job %s failed in slot %d: %s", job_id, t, failure.reason)
                failed.reason = failure.reason
                if failure.fatal:
                    if failure.checkpoint_units is not None:  # only checkpointed work survives
                        failed.progress = min(failed.progress, failure.checkpoint_units)
                    fatal.append((job_id, failure.reason))
        # Only jobs of the previous slot's allocation can be running (not the whole queue);
        # after a start or a reconfiguration, any active job may be.
        allocated, was = allocation.keys(), self._was_running
        if was is None:
            stopped: Iterable[str] = self._active
        else:  # set operations over the keys (C-level); the order is the last allocation's
            gone = (was - allocated) & self._active.keys()
            stopped = [j for j in was if j in gone] if gone else ()
        for job_id in stopped:
            active = self._active.get(job_id)
            if active is not None and job_id not in allocated and active.state is JobState.RUNNING:
                self._move(active, JobState.PAUSED)
        self._was_running = allocated  # an allocation's jobs do not change
        if now:
            assert self._coasting is not None and others is not None
            self._coasting.account(t, now, others, report.measurements, self._observe)
            for c, offset in ending:  # after account(), which adds their slot's progress
                self._finish(c.record, t, offset)
                finished.append(c.job_id)
                self._coasting.drop(c.job_id)
        else:
            for m in report.measurements:
                self._observe(t, m)
        self.runtime.refit()
        for job_id, reason in fatal:  # the one road a failure ends a job by
            if not self.records[job_id].state.is_final:
                self._end(job_id, JobState.FAILED, reason)
        if len(finished) > 1:  # released and reported in the active jobs' order
            done = set(finished)
            finished = [j for j in self._active if j in done]
        for job_id in finished:
            self._charges.release(self._active.pop(job_id).spec)
        if finished:
            view = self.view()
            for job_id in finished:
                self._call("on_completion", self.policy.on_completion, job_id, view)
        if self._coasting is not None and others is not None:
            self._coasting.register(t, others, self._active)

    def _finish(self, record: JobRecord, t: int, offset: float) -> None:
        """The one road to DONE: ``record``'s job ended ``offset`` seconds into slot ``t``."""
        record.progress = record.spec.total_work
        self._move(record, JobState.DONE)
        record.completion_slot = t
        record.completion_time_s = t * self.slot_seconds + offset

    def _observe(self, t: int, m: Measurement) -> None:
        """One measurement to the runtime model, and its error against the prediction."""
        measured = self.records.get(m.job_id)
        if measured is None:
            return
        predicted = m.predicted_iteration_time_s
        if predicted is None:
            predicted = self.runtime.observe_predicted(m, measured.spec)
        else:
            self.runtime.observe(m, measured.spec)
        if m.iterations > 0:
            self.model_errors.append(_model_error((m.job_id, t, predicted, m.iteration_time_s)))
