"""The testbed controller: the engine on wall-clock slots, agents over gRPC, state in SQLite.

One thread runs the slot loop (membership changes -> submissions and cancellations ->
``engine.step()``, which blocks for the slot while the agents train -> persist); gRPC
handler threads serve agents' registrations and heartbeats and clients' job calls. Clients
read a snapshot the loop publishes (plus the live progress of running jobs), so a slow
query never holds the loop.

Restart: everything the engine knows (jobs and their progress, the slot clock, the
current generation of each job's processes, measurements) is in the state file; a new
controller on the same file re-admits every admitted job, adopts the processes still
running on the agents, replays the measurements into the runtime model, and continues.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mlsched.controller.agents import AgentInfo, AgentRegistry
from mlsched.controller.cluster_executor import ClusterExecutor
from mlsched.controller.cluster_report import cluster_status
from mlsched.controller.config import ControllerConfig
from mlsched.controller.intake import parse_jobs
from mlsched.controller.measurement_rows import measurement_row, replay
from mlsched.controller.metrics import ControllerMetrics
from mlsched.controller.parsing import DocumentParser
from mlsched.controller.pricing import market, quote_fields
from mlsched.controller.probes import LoopHold, ProbeRequest, Probes, ProbeStatus
from mlsched.controller.records import load_rows, record_state, write_slot
from mlsched.controller.runs import TaskSettings, checkpoint_interval, launch_name
from mlsched.controller.services import Endpoint
from mlsched.controller.status import (
    FINAL_STATES,
    ClusterStatus,
    JobStatus,
    placement_entries,
    refined_status,
)
from mlsched.controller.store import Store
from mlsched.controller.tenancy import Tenancy
from mlsched.core.allocation import JobState
from mlsched.core.errors import MlschedError, SpecError, shorten
from mlsched.core.job import JobSpec
from mlsched.core.reports import Heartbeat
from mlsched.core.type_hosts import type_problems
from mlsched.engine.builder import build_engine
from mlsched.engine.engine import Engine, JobRecord, SlotOutcome
from mlsched.net.users import ADMIN, User
from mlsched.perfmodel.estimator import RuntimeEstimator
from mlsched.perfmodel.profile import load_profile
from mlsched.scheduler.registry import create

__all__ = ["LIST_REUSE_S", "Controller", "ControllerConfig"]

#: Seconds a job list may be answered again: made anew, a thousand jobs' list polled twice a
#: second cost more than all the agents' heartbeats. A submission or cancel remakes it.
LIST_REUSE_S = 1.0

log = logging.getLogger(__name__)


@dataclass
class _Served:
    """What the controller serves about one job between slot boundaries."""

    status: JobStatus  # as of the last slot boundary (or its submission)
    iterations: float = 0.0  # trainer steps, as the executor last counted them
    predicted_s: float = 0.0  # the runtime model's last prediction of an iteration's time
    measured_s: float = 0.0  # ... and the time it was compared with
    spec: JobSpec | None = None  # what was submitted (the quotas count it)


class Controller:
    def __init__(self, cfg: ControllerConfig) -> None:
        cfg.validate()
        self.policy_options = cfg.policy_settings()  # fails now on a bad policy or option
        # A bad profile fails now, its field named, before anything is served.
        self.profile = load_profile(Path(cfg.profile)) if cfg.profile else None
        self.cfg = cfg
        self.store = Store(cfg.db)
        self.tenancy = Tenancy(self.store)
        self.agents = AgentRegistry(timeout_s=cfg.agent_timeout_s)
        self.executor = ClusterExecutor(
            self.agents,
            slot_seconds=cfg.slot_seconds,
            settings=TaskSettings(
                checkpoint_root=str(Path(cfg.checkpoint_root).resolve()),
                data_root=str(Path(cfg.data_root).resolve()) if cfg.data_root else "",
                checkpoint_every_s=checkpoint_interval(cfg.slot_seconds),
                timeout_s=cfg.task_timeout_s,
            ),
            lease_s=cfg.lease_s,
            max_failures=cfg.max_failures,
            on_change=self._save_run,
            batch=self.store.transaction,
        )
        self.engine: Engine | None = None
        self._parser = DocumentParser()
        self._submissions: queue.Queue[JobSpec] = queue.Queue()
        self._cancels: queue.Queue[str] = queue.Queue()
        self._stop = threading.Event()
        self._lock = threading.RLock()  # guards the set of jobs and their statuses
        self._jobs: dict[str, _Served] = {}  # every job ever submitted, in that order
        self._layouts: tuple[Any, dict[Any, tuple[tuple[str, int, int], ...]]] = (None, {})
        # The last job list (when, at which epoch: a submission or cancel moves it on).
        self._list: tuple[float, int, list[JobStatus]] | None = None
        self._list_epoch = 0
        self._model_error = (0.0, 0)  # sum of |relative error| and count, this run's slots
        self._thread: threading.Thread | None = None
        # A probe (profiling through the agents) holds the slot loop at a boundary.
        self.loop_hold = LoopHold(wait_s=2 * cfg.slot_seconds + 30.0)
        self.probes = Probes(
            self.executor, self.agents, hold=self.loop_hold.take, busy=self.unfinished
        )
        self.endpoint: Endpoint | None = None
        self.port = 0
        self.metrics = ControllerMetrics(self) if cfg.metrics_listen is not None else None
        self.agents.load(
            [  # known names keep their order
                AgentInfo.from_dict(a["agent_id"], a["seq"], a["info"], a["alive"])
                for a in self.store.agents()
            ]
        )
        # A restart: clients see every stored job at once, and the agents' heartbeats are
        # answered with the adopted generations (not an empty list, which would stop them)
        # while the engine waits for its agents.
        # --min-agents is for a fresh start: a restarted controller resumes with the agents
        # that come back (the others are declared lost after the timeout), however few.
        self._min_agents = 1 if int(self.store.get_meta("slot", 0)) > 0 else cfg.min_agents
        rows, runs = load_rows(self.store)
        self._restore_records = [record for record, _ in rows]
        self._restored = not rows
        self.executor.load(
            runs, {r.job_id: r.spec for r in self._restore_records if not r.state.is_final}
        )
        for record, iterations in rows:
            served = _Served(JobStatus(record.job_id, record.state.value), iterations,
                             spec=record.spec)  # fmt: skip
            served.status = self._status((), record, served)
            self._jobs[record.job_id] = served

    # Lifecycle --------------------------------------------------------------------------
    def start(self) -> Controller:
        self.endpoint = Endpoint(self)
        self.port = self.endpoint.port
        self._thread = threading.Thread(target=self._loop, name="slot-loop", daemon=True)
        self._thread.start()
        threading.Thread(target=self._watch_agents, name="agent-watch", daemon=True).start()
        if self.metrics is not None and self.cfg.metrics_listen is not None:
            port = self.metrics.serve(self.cfg.metrics_listen)
            log.info(
                "[controller] metrics on http://%s:%d/metrics",
                self.cfg.metrics_listen.rpartition(":")[0],
                port,
            )
        host = self.cfg.listen.rpartition(":")[0]
        log.info(
            "[controller] listening on %s:%d (policy %s, %gs slots, state %s%s)",
            host,
            self.port,
            self.cfg.policy,
            self.cfg.slot_seconds,
            self.cfg.db,
            ", token" if self.cfg.token else "",
        )
        return self

    @property
    def address(self) -> str:
        return f"{self.cfg.listen.rpartition(':')[0]}:{self.port}"

    def stop(self, *, stop_tasks: bool = False) -> None:
        """Stop serving. The agents' tasks keep running (their leases let a restarted
        controller adopt them) unless ``stop_tasks``."""
        self._stop.set()
        if stop_tasks:
            self.executor.close()
        self.executor.poke()
        if self._thread is not None:
            self._thread.join(timeout=self.cfg.slot_seconds + 10)
        if self.endpoint is not None:
            self.endpoint.stop()
        if self.metrics is not None:
            self.metrics.stop()
        self._parser.close()
        self.store.close()

    def wait(self) -> None:
        while not self._stop.is_set():
            self._stop.wait(1.0)

    # The slot loop ----------------------------------------------------------------------
    def _loop(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                self._membership()
                if self.loop_hold.holding():
                    self._stop.wait(0.2)
                    continue
                if self.engine is None:
                    self._stop.wait(0.2)
                    continue
                self._take_requests(self.engine)
                started = time.perf_counter()
                outcome = self.engine.step()
                if self.metrics is not None:
                    self.metrics.slot_seconds.observe(time.perf_counter() - started)
                self._after_slot(self.engine, outcome)
                failures = 0
            except Exception:
                # The service stays up (status, cancel, agents' leases) whatever one slot
                # hit; the failure is logged with its traceback and the slot tried again.
                failures += 1
                log.exception("[controller] slot failed (%d in a row); retrying", failures)
                self._stop.wait(min(self.cfg.slot_seconds, 5.0 * failures))

    def _watch_agents(self) -> None:
        """Declare silent agents lost as soon as their timeout passes, not at the next slot
        boundary: their generations fail (and the survivors stop and checkpoint) within
        ``agent_timeout_s`` + one heartbeat; the jobs are re-placed at the next boundary."""
        every = min(self.cfg.heartbeat_s, self.cfg.agent_timeout_s / 4)
        while not self._stop.wait(every):
            try:
                for agent_id in self.agents.expire():
                    self._lost(agent_id)
            except Exception:
                log.exception("[controller] agent watch failed")

    def _lost(self, agent_id: str) -> None:
        agent = self.agents.get(agent_id)
        if agent is not None and agent.alive:
            return
        log.warning("[controller] agent %s lost (no heartbeat)", agent_id)
        self.store.set_agent_alive(agent_id, False)
        self.executor.poke()

    def _membership(self) -> None:
        for agent_id in self.agents.expire():
            self._lost(agent_id)
        if not self.agents.take_changed():
            return
        cluster = self.agents.cluster(self.cfg.topology, self.cfg.types)
        alive = len(self.agents.alive())
        # At a restart, the first plan waits for the agents that ran tasks to come back (or
        # be declared lost), so that their processes are adopted rather than moved.
        if cluster is None or (
            self.engine is None and (alive < self._min_agents or self.agents.returning())
        ):
            self.agents.mark_changed()
            return
        self.executor.set_cluster(cluster)
        for problem in type_problems(cluster):
            # Agents may still be joining: a type no agent hosts yet is not offered.
            log.warning("[controller] type catalogue: %s", problem)
        policy = create(self.cfg.policy, **self.policy_options)
        if self.engine is None:
            runtime = RuntimeEstimator(
                cluster, dict(policy.runtime_families) or None, profile=self.profile
            )
            self.engine = build_engine(
                cluster,
                policy,
                executor=self.executor,
                runtime=runtime,
                slot_seconds=self.cfg.slot_seconds,
                seed=self.cfg.seed,
                stall_slots=10**9,
                reject_on_policy_error=True,
                check_types=False,
            )
            if self.metrics is not None:
                self.engine.observe = self.metrics.observe_decision
            self._record_setup(cluster)
            self._restore(self.engine)
        else:
            self.store.set_meta("cluster_changes", self.store.get_meta("cluster_changes", 0) + 1)
            waiting = self.engine.reconfigure(cluster, policy)
            if waiting:
                log.warning("[controller] jobs waiting for capacity: %s", ", ".join(waiting))
            self._publish(self.engine)  # readmitted or waiting: clients see it now
        log.info("[controller] cluster: %s", ", ".join(s.name for s in cluster.servers))

    def _restore(self, engine: Engine) -> None:
        if self._restored:
            return
        self._restored = True
        records: list[JobRecord] = self._restore_records
        specs = {r.job_id: r.spec for r in records}
        slot = int(self.store.get_meta("slot", 0))
        waiting = engine.restore(records, slot=slot)
        replayed, skipped = replay(
            self.store.measurements(), specs, self.executor.placement_of, engine.runtime
        )
        engine.runtime.refit()
        active = sum(1 for r in records if r.state.is_active)
        log.info(
            "[controller] resumed at slot %d: %d jobs (%d active, %d waiting), %d measurements"
            " (%d damaged)",
            slot,
            len(records),
            active,
            len(waiting),
            replayed,
            skipped,
        )
        self._publish(engine)

    def _record_setup(self, cluster: Any) -> None:
        """What a replay of this run needs beside its history (``simulate --replay``): the
        policy and its settings, the seed, the slot length, the profile and the cluster as
        the engine numbered it. A resumed controller keeps the first run's."""
        if self.store.get_meta("engine") is not None:
            self.store.set_meta("resumed", True)
            return
        self.store.set_meta(
            "engine",
            {
                "policy": self.cfg.policy,
                "policy_options": self.policy_options,
                "seed": self.cfg.seed,
                "slot_seconds": self.cfg.slot_seconds,
                "profile": str(Path(self.cfg.profile).resolve()) if self.cfg.profile else None,
                "cluster": cluster.to_dict(),
            },
        )

    def _take_requests(self, engine: Engine) -> None:
        """Submissions and cancels into the engine; published when there were any."""
        taken = False
        while True:
            try:
                job = self._submissions.get_nowait()
            except queue.Empty:
                break
            taken = True
            engine.submit(replace(job, arrival_slot=max(job.arrival_slot, engine.slot)))
        while True:
            try:
                job_id = self._cancels.get_nowait()
            except queue.Empty:
                break
            try:
                record = engine.cancel(job_id)
            except SpecError as err:
                log.info("[controller] cancel %s: %s", job_id, err)
                continue
            taken = True
            self.executor.forget(job_id)
            self.store.update_job(job_id, record_state(record, self._extra(job_id)))
        if taken:
            self._publish(engine)

    def _after_slot(self, engine: Engine, outcome: SlotOutcome) -> None:
        report, t = outcome.report, outcome.slot
        total, count = self._model_error
        errs = outcome.model_errors
        self._model_error = (total + sum(abs(e.relative) for e in errs), count + len(errs))
        errors = {(e.job_id, e.slot): e for e in outcome.model_errors}
        changed = {c.job_id for c in outcome.changes}
        for c in outcome.changes:
            if c.new is JobState.FAILED:  # ended by the engine (a fatal failure): stop it
                self.executor.forget(c.job_id)
        # The executor's view is read before the store's lock is taken: the executor writes
        # runs to the store under its own lock, so the two are never taken in the other order.
        live = {job_id: self.executor.live(job_id) for job_id in report.progress}
        # The rows first, then one statement per table (write_slot): thousands at scale.
        measured: list[tuple[str, dict[str, Any]]] = []
        for i, m in enumerate(report.measurements):
            if i % 100 == 99:
                time.sleep(0)  # let waiting heartbeats run (the interpreter lock)
            err = errors.get((m.job_id, t))
            predicted = err.predicted_s if err else None
            served = self._jobs.get(m.job_id)
            if err is not None and served is not None:
                served.predicted_s, served.measured_s = err.predicted_s, err.measured_s
            layout = self._layout_by_index(engine, m.placement)
            measured.append((m.job_id, measurement_row(m, layout, predicted)))
        progress = []
        for job_id, prog in report.progress.items():
            progress.append((job_id, prog.units, prog.finished, prog.restart_s))
            done, served = live.get(job_id), self._jobs.get(job_id)
            if done is not None and served is not None:
                served.iterations = float(done[1])  # trainer steps
        allocations = [
            (j, {"layout": [list(e) for e in self._layout_by_index(engine, p)]})
            for j, p in engine.placements.items()
        ]
        states = [
            (job_id, record_state(record, self._extra(job_id)))
            for job_id, record in engine.records.items()
            if job_id in changed or job_id in report.progress
        ]
        write_slot(self.store, engine, outcome, measured, progress, allocations, states)
        self._publish(engine)

    def _layout_by_index(self, engine: Engine, p: Any) -> tuple[tuple[str, int, int], ...]:
        """The layout of placement ``p`` (by agent name), kept per placement object."""
        if self._layouts[0] is not engine.cluster or len(self._layouts[1]) > 100_000:
            self._layouts = (engine.cluster, {})
        layouts = self._layouts[1]
        layout = layouts.get(p)
        if layout is None:
            layout = layouts[p] = self.executor.layout_of(p, engine.cluster)
        return layout

    def _extra(self, job_id: str) -> dict[str, Any]:
        served = self._jobs.get(job_id)
        return {"iterations": served.iterations if served is not None else 0.0}

    def _save_run(self, job_id: str, run: dict[str, Any] | None) -> None:
        if run is None:
            self.store.delete_run(job_id)
        else:
            self.store.save_run(job_id, run)

    # Agents -----------------------------------------------------------------------------
    def register_agent(self, info: AgentInfo) -> AgentInfo:
        """A (re-)registration, already validated: the agent joins at the next boundary."""
        info = self.agents.register(info)
        self.store.upsert_agent(info.agent_id, info.to_dict(), alive=True)
        log.info(
            "[controller] agent %s registered (%s, %s)",
            info.agent_id,
            info.host,
            " ".join(f"{k}={v:g}" for k, v in sorted(info.capacity.items())),
        )
        return info

    def heartbeat(self, beat: Heartbeat) -> AgentInfo | None:
        """Record what an agent reports; None: it must register again."""
        started = time.perf_counter()
        agent = self.agents.heartbeat(beat)
        # No poke of the slot loop: the reply's desired_for reconciles this agent's jobs,
        # and the loop reconciles the rest every second. A poke per heartbeat made a full
        # reconcile, O(jobs), per heartbeat: with 1,000 agents, hundreds a second.
        if self.metrics is not None:
            self.metrics.heartbeat_seconds.observe(time.perf_counter() - started)
        return agent

    def revenue(self) -> float:
        """What the jobs priced so far were charged."""
        engine = self.engine
        return 0.0 if engine is None else float(market(list(engine.records.values()))["revenue"])

    # Client-facing state ----------------------------------------------------------------
    def _publish(self, engine: Engine) -> None:
        """Each job the engine knows, as of this slot boundary (jobs still queued for the
        engine keep their submitted status)."""
        placements = engine.placements
        statuses: dict[str, JobStatus] = {}
        for i, (job_id, record) in enumerate(engine.records.items()):
            if i % 100 == 99:
                time.sleep(0)  # let waiting heartbeats run (the interpreter lock)
            p = placements.get(job_id)
            layout = self._layout_by_index(engine, p) if p is not None else ()
            statuses[job_id] = self._status(layout, record, self._jobs.get(job_id))
        with self._lock:
            for job_id, status in statuses.items():
                served = self._jobs.get(job_id)
                if served is None:
                    self._jobs[job_id] = _Served(status, spec=engine.records[job_id].spec)
                else:
                    served.status = status

    def _status(
        self, layout: tuple[tuple[str, int, int], ...], record: JobRecord, served: _Served | None
    ) -> JobStatus:
        predicted, measured = (served.predicted_s, served.measured_s) if served else (0.0, 0.0)
        return JobStatus(
            job_id=record.job_id,
            state=record.state.value,
            reason=record.reason,
            arrival_slot=record.spec.arrival_slot,
            progress=record.progress,
            total_work=record.spec.total_work,
            completion_slot=record.completion_slot if record.completion_slot is not None else -1,
            utility=record.utility(),
            placement=placement_entries(layout),
            restarts=record.restarts,
            predicted_iteration_s=predicted,
            measured_iteration_s=measured,
            slots_run=record.slots_run,
            iterations=int(served.iterations) if served else 0,
            admitted=record.admitted_slot is not None,
            admitted_slot=record.admitted_slot if record.admitted_slot is not None else -1,
            launch=launch_name(record.spec),
            owner=self.tenancy.owner(record.job_id) or "",
            **quote_fields(record),
        )

    def submit(self, document: str, user: User = ADMIN, *, dry_run: bool = False) -> list[str]:
        """Admit the jobs of ``document`` for ``user``: validated whole, within the user's
        quotas, stored with their owner. A refusal is audited and raised. ``dry_run``: the
        same checks, nothing stored or audited."""
        try:
            jobs = parse_jobs(
                document, data_root=self.executor.settings.data_root, parser=self._parser
            )
            with self._lock:
                for i, job in enumerate(jobs):
                    if job.job_id in self._jobs:
                        raise SpecError(f"jobs[{i}].job_id", job.job_id, "a job id not used before")
                unfinished = [
                    (s.spec, s.status.state) for s in self._jobs.values()
                    if s.spec is not None and s.status.state not in FINAL_STATES
                ]  # fmt: skip
                self.tenancy.check_quota(user, jobs, unfinished)
                if dry_run:
                    return [j.job_id for j in jobs]
                now = time.time()
                with self.store.transaction():
                    for job in jobs:
                        self.store.add_job(job.job_id, job.to_dict(), submitted_at=now)
                    self.tenancy.record_submission(user, jobs, now)
                for job in jobs:
                    status = JobStatus(job.job_id, JobState.PENDING.value, total_work=job.total_work,
                                       completion_slot=-1, launch=launch_name(job), owner=user.name)  # fmt: skip
                    self._jobs[job.job_id] = _Served(status, spec=job)
                    self._submissions.put(job)
                self._list_epoch += 1
        except (MlschedError, ValueError) as err:
            if not dry_run:
                self.tenancy.record(user, "submit", "", "refused", str(err))
            raise
        log.info("[controller] %s submitted %s", user.name,
                 shorten(", ".join(j.job_id for j in jobs), 500))  # fmt: skip
        return [j.job_id for j in jobs]

    def cancel(self, job_id: str, user: User = ADMIN) -> JobStatus:
        status = self.job(job_id)
        self.tenancy.authorize(user, "cancel", job_id)
        if status.state in FINAL_STATES:
            raise SpecError("job_id", job_id, f"a job that is not final (it is {status.state})")
        self.executor.forget(job_id)  # stop its processes now; the engine hears at the boundary
        self._cancels.put(job_id)
        with self._lock:
            self._list_epoch += 1
        self.tenancy.record(user, "cancel", job_id, "ok", "")
        return replace(status, state=JobState.CANCELLING.value, reason="cancel requested")

    def job(self, job_id: str) -> JobStatus:
        with self._lock:
            served = self._jobs.get(job_id)
            if served is None:
                raise KeyError(job_id)
            out = served.status
        return refined_status(out, self.executor.views([job_id])[job_id])

    def jobs(self) -> list[JobStatus]:
        """Every job, in submission order; a list made in the last :data:`LIST_REUSE_S`
        seconds is answered again, unless a job was submitted or cancelled since."""
        with self._lock:
            made, epoch = self._list, self._list_epoch
            if made is not None and made[1] == epoch and time.monotonic() - made[0] < LIST_REUSE_S:
                return list(made[2])
            statuses = [s.status for s in self._jobs.values()]
        views = self.executor.views([s.job_id for s in statuses])
        out = [refined_status(s, views[s.job_id]) for s in statuses]
        with self._lock:
            self._list = (time.monotonic(), epoch, out)
        return list(out)

    def cluster_status(self) -> ClusterStatus:
        return cluster_status(self.engine, self.agents, self.cfg, self._model_error)

    # Probes -----------------------------------------------------------------------------
    def unfinished(self) -> list[str]:
        """Jobs submitted and not in a final state."""
        with self._lock:
            return [j for j, s in self._jobs.items() if s.status.state not in FINAL_STATES]

    def probe(self, document: str, placement: str, steps: int, warmup: int,
              timeout_s: float, seconds: float = 10.0) -> ProbeStatus:  # fmt: skip
        """Start a probe of the one job in ``document`` (checked as a submission is)."""
        jobs = parse_jobs(document, data_root=self.executor.settings.data_root, parser=self._parser)
        if len(jobs) != 1:
            raise SpecError("job", f"{len(jobs)} jobs", "exactly one job to profile")
        request = ProbeRequest(jobs[0], placement, steps, warmup, timeout_s, seconds)
        return self.probes.start(request)
