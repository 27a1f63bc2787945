"""The executor of the real cluster: slots of wall-clock time, tasks run by node agents.

``apply`` turns the slot's allocation into the *wanted* layout of each job. A job whose
layout is unchanged keeps its processes (the agents' leases are renewed by every
heartbeat); a changed, paused or failed job's generation is drained (its tasks leave the
agents' desired state, so they get SIGTERM, stop at a common step and checkpoint) and,
once every task has exited, the next generation starts from that checkpoint with the new
layout. ``collect`` waits for the slot's end and turns what the agents reported into the
engine's progress and measurements (per-iteration compute and communication times, bytes)
— the closed loop. What becomes of a generation is decided by ``decisions.decide``, a pure
function of the facts gathered here; this class applies its answers.

Everything here is driven by two threads: the slot loop (``apply``/``collect``) and the
gRPC handlers (``desired_for`` on each heartbeat); one lock guards the state.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from mlsched.controller.agents import AgentRegistry
from mlsched.controller.decisions import Drain, Fail, Finish, Keep, Launch, Wait, decide
from mlsched.controller.executor_jobs import (
    ExecutorJob,
    JobView,
    LiveAgents,
    LiveState,
    RunFacts,
)
from mlsched.controller.generation_measure import slot_progress
from mlsched.controller.launch_resources import gpu_indices, take_port
from mlsched.controller.logs import TaskIndex
from mlsched.controller.runs import (
    Generation,
    JobRun,
    Layout,
    TaskSettings,
    placement_layout,
    render_tasks,
    store_host,
)
from mlsched.controller.throughput import NicMeter
from mlsched.core.allocation import Allocation, JobState, Placement
from mlsched.core.cluster import Cluster
from mlsched.core.job import JobSpec
from mlsched.core.reports import TaskReport
from mlsched.core.tasks import TaskPlan
from mlsched.engine.executor import Executor, JobFailure, SlotReport

__all__ = ["ClusterExecutor", "ExecutorJob"]

log = logging.getLogger(__name__)

#: Jobs reconciled per hold of the executor's lock (see :meth:`ClusterExecutor.reconcile`).
RECONCILE_CHUNK = 25
#: Seconds between the slot loop's sweeps over every job (see :meth:`ClusterExecutor.collect`).
SWEEP_S = 1.0


class ClusterExecutor(Executor):
    def __init__(
        self,
        agents: AgentRegistry,
        *,
        slot_seconds: float,
        settings: TaskSettings,
        lease_s: float = 120.0,
        max_failures: int = 3,
        on_change: Callable[[str, dict[str, Any] | None], None] | None = None,
        batch: Callable[[], AbstractContextManager[Any]] = nullcontext,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.agents = agents
        self.slot_seconds = float(slot_seconds)
        self.settings = settings
        self.lease_s = lease_s
        self.max_failures = max_failures
        self.on_change = on_change  # persists a run (job id, run dict or None)
        self.batch = batch  # groups the persists of a slot boundary into one store commit
        self._stored: dict[str, dict[str, Any]] = {}  # the run each job last persisted
        self.clock = clock
        self._lock = threading.RLock()
        self._wake = threading.Event()
        self._stopping = False
        self.jobs: dict[str, ExecutorJob] = {}
        self._index: dict[str, int] = {}  # agent id -> server index in the engine's cluster
        self._slot = -1
        self._slot_start = 0.0
        self._deadline = 0.0
        self._next_port: dict[str, int] = {}  # by host: where the next port search starts
        self._nic = NicMeter()
        self._live = LiveAgents(agents)
        self.task_index = TaskIndex()  # where each task ran, after its generation ended too
        # agent id -> jobs whose generation placed tasks on it (cleaned as they are read):
        # what one agent's heartbeat may change, and all it must be told of.
        self._agent_jobs: dict[str, set[str]] = {}

    # Cluster ----------------------------------------------------------------------------
    def set_cluster(self, cluster: Cluster) -> None:
        with self._lock:
            self._index = {s.name: i for i, s in enumerate(cluster.servers)}

    def load(self, runs: Mapping[str, dict[str, Any]], specs: Mapping[str, JobSpec]) -> None:
        """Adopt the runs of a previous controller (their tasks may still be running).

        A running generation stays wanted with its layout until the first allocation says
        otherwise, so the agents coming back keep its processes."""
        with self._lock:
            for job_id, raw in runs.items():
                if job_id in specs:
                    run = JobRun.from_dict(job_id, raw)
                    job = self.jobs[job_id] = ExecutorJob(specs[job_id], run)
                    if run.gen is not None and not run.gen.draining and not run.finished:
                        job.want = run.gen.layout
                    if run.gen is not None:
                        self.task_index.record(job_id, run.gen.tasks, run.gen.agent_of)
                        self._index_agents(job_id, run.gen)

    def layout_of(self, p: Placement, cluster: Cluster) -> Layout:
        return placement_layout(p, lambda s: cluster.servers[s].name)

    def placement_of(self, layout: Layout) -> Placement | None:
        try:
            return Placement(
                tuple((self._index[a], w) for a, w, _ in layout if w),
                tuple((self._index[a], p) for a, _, p in layout if p),
            )
        except KeyError:
            return None

    # Executor ---------------------------------------------------------------------------
    def apply(
        self,
        slot: int,
        allocation: Allocation,
        jobs: Mapping[str, JobSpec],
        remaining: Mapping[str, float],
    ) -> None:
        now = self.clock()
        with self._lock:
            # Slots follow each other without gaps; a late start (a long plan) shortens it.
            start = self._deadline if self._slot >= 0 and self._deadline > now - 5 else now
            self._slot, self._slot_start = slot, start
            self._deadline = start + self.slot_seconds
            names = {i: n for n, i in self._index.items()}
            for job in self.jobs.values():
                job.want = None
            for job_id, p in allocation.items():
                entry = self.jobs.get(job_id)
                if entry is None:
                    entry = self.jobs[job_id] = ExecutorJob(jobs[job_id], JobRun(job_id))
                entry.want = placement_layout(p, names.__getitem__)
        self.reconcile()

    def collect(self, slot: int) -> SlotReport:
        """Wait for the slot's end, reconciling every job every :data:`SWEEP_S` seconds and
        when poked (an agent lost or back), then report the slot. Heartbeats reconcile
        their own agents' jobs as they come, which is how a running job moves on: the sweep
        is for what no heartbeat reports (a lost agent, a timeout), so it need not be
        frequent, and at a thousand jobs it is the loop's largest cost between boundaries."""
        while True:
            with self._lock:
                left = self._deadline - self.clock()
                if left <= 0 or self._stopping:
                    break
            self.reconcile()
            self._wake.wait(min(SWEEP_S, max(0.0, left)))
            self._wake.clear()
        self.reconcile()
        return self._report(slot)

    def close(self) -> None:
        with self._lock:
            self._stopping = True
            for job in self.jobs.values():
                job.want = None
            self._reconcile_locked()
        self._wake.set()

    def forget(self, job_id: str) -> None:
        """A cancelled or failed job: stop its tasks and never start it again."""
        with self._lock:
            job = self.jobs.get(job_id)
            if job is not None:
                job.want = None
                job.run.finished = True
            self._reconcile_locked()

    # Probes: a job run outside the engine (mlsched.controller.probes) ------------------
    def pin(self, job: JobSpec, layout: Layout | None) -> None:
        """Run ``job`` with ``layout`` (None: stop it at a checkpoint) whatever allocations
        say; for a profile's probe, while the engine is held (no allocation comes)."""
        with self._lock:
            entry = self.jobs.get(job.job_id)
            if entry is None:
                entry = self.jobs[job.job_id] = ExecutorJob(job, JobRun(job.job_id))
            entry.want = layout
            self._reconcile_locked()

    @contextmanager
    def viewing(
        self, job_id: str
    ) -> Iterator[tuple[JobRun, Generation | None, dict[str, TaskReport | None]]]:
        """The job's run, its current generation and that generation's latest task
        reports, brought up to date and held still (under the lock) while in use."""
        with self._lock:
            self._reconcile_locked()
            run = self.jobs[job_id].run
            gen = run.gen
            yield run, gen, (self._statuses(gen) if gen is not None else {})

    def drop(self, job_id: str) -> None:
        """Forget a pinned job entirely, its stored run too (its tasks have ended)."""
        with self._lock:
            entry = self.jobs.pop(job_id, None)
            if entry is not None and entry.run.gen is not None:
                self._release_ports(entry.run.gen)
            self._stored.pop(job_id, None)
        if self.on_change is not None:
            self.on_change(job_id, None)

    def views(self, job_ids: Sequence[str]) -> dict[str, JobView]:
        """:meth:`live`, :meth:`failures_of` and :meth:`live_state` of many jobs (a job
        list), :data:`RECONCILE_CHUNK` jobs per hold of the lock."""
        out: dict[str, JobView] = {}
        for k in range(0, len(job_ids), RECONCILE_CHUNK):
            with self._lock:
                for job_id in job_ids[k : k + RECONCILE_CHUNK]:
                    out[job_id] = JobView(
                        self.live(job_id), self.failures_of(job_id), self.live_state(job_id)
                    )
            time.sleep(0)  # let waiting heartbeats run between chunks
        return out

    def live(self, job_id: str) -> tuple[float, int] | None:
        """(work units done, trainer steps done) by the job's processes as last reported:
        fresher than the engine's per-slot accounting."""
        with self._lock:
            job = self.jobs.get(job_id)
            if job is None:
                return None
            run = job.run
            units, step = float(max(run.cursor, run.reported_units)), run.step
            gen = run.gen
            if gen is not None:
                steps = [
                    s.measurement.last_step
                    for s in self._statuses(gen).values()
                    if s is not None and s.measurement.iterations
                ]
                if steps:
                    step = max(step, max(steps) + 1)
                    units = max(units, gen.start_cursor + max(0, step - gen.start_step) * gen.ups)
            return units, step

    def live_state(self, job_id: str) -> LiveState | None:
        """What the job's processes are doing now, between the engine's slot reports:
        ``running`` (a generation is up, with its layout), ``re-placing`` (it failed or
        waits for a lost agent), ``stopping`` (draining for a new layout) or ``paused``;
        with a reason. None when the executor has nothing to add."""
        with self._lock:
            job = self.jobs.get(job_id)
            if job is None or job.run.finished or job.fatal:
                return None
            run = job.run
            gen, want = run.gen, job.want
            if gen is not None and gen.failed:
                return LiveState(JobState.REPLACING, gen.failed, gen.layout)
            if gen is not None and gen.draining:
                if want:
                    return LiveState(JobState.STOPPING, "moving to a new layout", gen.layout)
                return LiveState(JobState.PAUSED, "not allocated this slot", ())
            if gen is not None:
                return LiveState(JobState.RUNNING, "", gen.layout)
            if want is not None:
                lost = [a for a, _, _ in want if not self._alive(a)]
                if lost:
                    why = f"agent {', '.join(lost)} lost; re-placed at the next slot boundary"
                    return LiveState(JobState.REPLACING, why, ())
                if run.last_failure:
                    return LiveState(JobState.REPLACING, run.last_failure, ())
            return None

    def failures_of(self, job_id: str) -> RunFacts | None:
        """Failures of the job's generations, the steps they lost, and its checkpoint."""
        with self._lock:
            job = self.jobs.get(job_id)
            if job is None:
                return None
            run = job.run
            return RunFacts(run.failed_generations, run.lost_steps, run.step, float(run.cursor))

    # Heartbeats -------------------------------------------------------------------------
    def desired_for(self, agent_id: str) -> list[TaskPlan]:
        """The tasks ``agent_id`` must run now (their leases run to :meth:`lease_expiry`).

        Only the jobs with tasks on this agent are brought up to date first: its heartbeat
        can change nothing else. Every other job is reconciled by :meth:`apply` and by the
        slot loop (:meth:`collect`, every SWEEP_S seconds and when poked); reconciling every job on
        every heartbeat made each one cost O(jobs) under the lock."""
        with self._lock:
            ids = self._agent_jobs.get(agent_id)
            if not ids:
                return []
            out: list[TaskPlan] = []
            for job_id in sorted(ids):  # a fixed order, whatever the set's
                job = self.jobs.get(job_id)
                if job is None:
                    ids.discard(job_id)
                    continue
                self._reconcile_one(job_id, job)
                gen = job.run.gen
                mine = (
                    [p for t, p in gen.tasks.items() if gen.agent_of[t] == agent_id]
                    if gen is not None
                    else []
                )
                if not mine:
                    ids.discard(job_id)  # its generation ended, or the next runs elsewhere
                elif gen is not None and not gen.draining:
                    out.extend(mine)
            return out

    def lease_expiry(self) -> float:
        """When a lease renewed now runs out: the agent stops a task not renewed by then."""
        return self.clock() + self.lease_s

    def reconcile(self) -> None:
        """Bring every job up to date, :data:`RECONCILE_CHUNK` jobs per hold of the lock:
        a heartbeat (which needs the lock for its own agent's jobs) waits for one chunk,
        not for a thousand jobs. Jobs are independent, so a heartbeat between chunks sees
        each job either before or after its turn, both consistent."""
        with self._lock:
            ids = list(self.jobs)
        for k in range(0, len(ids), RECONCILE_CHUNK):
            with self._lock:
                for job_id in ids[k : k + RECONCILE_CHUNK]:
                    job = self.jobs.get(job_id)
                    if job is not None:
                        self._reconcile_one(job_id, job)
            time.sleep(0)  # let a waiting heartbeat run between chunks (the interpreter lock)

    def poke(self) -> None:
        """Something changed (a heartbeat): let ``collect`` reconcile now."""
        self._wake.set()

    # Internals --------------------------------------------------------------------------
    def _statuses(self, gen: Generation) -> dict[str, TaskReport | None]:
        """The latest status of each task; None: its agent is gone (the task is lost).

        The tasks of an agent not yet back after a controller restart are not lost: their
        status is unknown (not exited) until it registers again or is declared lost."""
        out: dict[str, TaskReport | None] = {}
        for task_id, agent_id in gen.agent_of.items():
            final = gen.final.get(task_id)
            if final is not None:
                # An exit is reported once (the agent forgets it when acknowledged).
                out[task_id] = final
                continue
            agent = self.agents.get(agent_id)
            if agent is not None and agent.returning:
                out[task_id] = TaskReport(task_id)
            elif agent is None or not agent.alive:
                out[task_id] = None
            else:
                status = agent.tasks.get(task_id) or TaskReport(task_id)
                if status.exited:
                    gen.final[task_id] = status
                gen.seen_status[task_id] = status
                out[task_id] = status
        return out

    def _reconcile_locked(self) -> None:
        for job_id, job in self.jobs.items():
            self._reconcile_one(job_id, job)

    def _reconcile_one(self, job_id: str, job: ExecutorJob) -> None:
        try:
            self._reconcile_job(job)
        except Exception as err:
            # One job's trouble (a spec no check anticipated, no free port) ends that
            # job, through the controller, never the slot loop or a heartbeat.
            log.exception("[controller] job %s cannot run", job_id)
            job.fatal = job.fatal or f"cannot run: {type(err).__name__}: {err}"[:300]
            job.want = None

    def _index_agents(self, job_id: str, gen: Generation) -> None:
        for agent_id in set(gen.agent_of.values()):
            self._agent_jobs.setdefault(agent_id, set()).add(job_id)

    def _reconcile_job(self, job: ExecutorJob) -> None:
        """Apply what :func:`decide` says until it says to keep or to wait (at most a
        failure, the end of the generation and the launch of the next)."""
        run = job.run
        reports = self._statuses(run.gen) if run.gen is not None else {}
        while True:
            action = decide(
                run,
                reports,
                job.want,
                self._live,
                self.clock(),
                max_failures=self.max_failures,
                fatal=bool(job.fatal),
            )
            if isinstance(action, (Keep, Wait)):
                return
            if isinstance(action, Launch):
                self._launch(job, action.layout)
                return
            gen = run.gen
            assert gen is not None
            if isinstance(action, Fail):
                gen.failed = action.reason
                log.warning(
                    "[controller] job %s generation %d failed: %s",
                    run.job_id,
                    gen.number,
                    gen.failed,
                )
                self._drain(run, gen, "failure", action.at)
            elif isinstance(action, Drain):
                self._drain(run, gen, action.reason, action.at)
            else:
                self._finish(job, gen, action)

    def _alive(self, agent_id: str) -> bool:
        return agent_id in self._live

    def _finish(self, job: ExecutorJob, gen: Generation, end: Finish) -> None:
        run, job_id = job.run, job.run.job_id
        run.step, run.cursor = end.step, end.cursor
        if end.failed:
            run.lost_steps += end.lost_steps
            run.failed_generations += 1
            run.last_failure = end.failed
            if not end.finished:
                job.failure = JobFailure(end.failed)
        if end.finished:
            run.finished = True
        run.failures = end.failures
        if end.fatal:
            job.fatal = end.fatal
        self._release_ports(gen)
        if gen.draining and run.last_stop_at is not None:
            run.last_stop_s = max(0.0, self.clock() - run.last_stop_at)
        run.ended.append(gen)
        log.info(
            "[controller] job %s generation %d ended at step %d (cursor %d)%s",
            job_id,
            gen.number,
            run.step,
            run.cursor,
            f": {end.failed}" if end.failed else "",
        )
        run.gen = None
        self._persist(job_id)

    def _drain(self, run: JobRun, gen: Generation, why: str, at: float) -> None:
        gen.draining = True
        run.last_stop_at = at
        log.info("[controller] job %s generation %d stopping (%s)", run.job_id, gen.number, why)
        self._persist(run.job_id)

    def _launch(self, entry: ExecutorJob, layout: Layout) -> None:
        job, run, job_id = entry.spec, entry.run, entry.run.job_id
        host_agent = self.agents.get(store_host(job, layout))
        assert host_agent is not None
        gens = [e.run.gen for e in self.jobs.values() if e.run.gen is not None]
        port = take_port(
            host_agent.host, host_agent.port_lo, host_agent.port_hi, gens, self._next_port
        )
        run.generations += 1
        tasks, agent_of, stop, ups = render_tasks(
            job,
            layout,
            number=run.generations,
            step=run.step,
            cursor=run.cursor,
            rendezvous=f"{host_agent.host}:{port}",
            settings=self.settings,
            gpu_indices=gpu_indices(job, layout, self.agents, gens),
        )
        run.gen = Generation(
            number=run.generations,
            layout=layout,
            start_step=run.step,
            start_cursor=run.cursor,
            stop_step=stop,
            ups=ups,
            tasks=tasks,
            agent_of=agent_of,
            ports=[(host_agent.host, port)],
            launched_at=self.clock(),
            trigger_at=run.last_stop_at,
            stopped_s=run.last_stop_s,
        )
        self.task_index.record(job_id, tasks, agent_of)
        self._index_agents(job_id, run.gen)
        log.info(
            "[controller] job %s generation %d: %s from step %d to %d",
            job_id,
            run.generations,
            " ".join(f"{a}:{w}w{p}ps" for a, w, p in layout),
            run.step,
            stop,
        )
        self._persist(job_id)

    def _release_ports(self, gen: Generation) -> None:
        gen.ports = []

    def _persist(self, job_id: str) -> None:
        """Store the job's run, unless it is what was stored last (most jobs at most slot
        boundaries: a steady job's run changes only when it reports progress)."""
        if self.on_change is None:
            return
        job = self.jobs.get(job_id)
        if job is None:
            self._stored.pop(job_id, None)
            self.on_change(job_id, None)
            return
        doc = job.run.to_dict()
        if self._stored.get(job_id) == doc:
            return
        self._stored[job_id] = doc
        self.on_change(job_id, doc)

    def _report(self, slot: int) -> SlotReport:
        """The slot's progress, measurements and failures, :data:`RECONCILE_CHUNK` jobs
        per hold of the lock (as :meth:`reconcile`), each chunk's runs stored in one
        commit."""
        report = SlotReport(slot=slot)
        with self._lock:
            self._nic.rates(slot, self.agents.alive())  # every slot: measured jobs or not
            wanted = [job_id for job_id, e in self.jobs.items() if e.want is not None]
        for k in range(0, len(wanted), RECONCILE_CHUNK):
            with self._lock, self.batch():
                for job_id in wanted[k : k + RECONCILE_CHUNK]:
                    entry = self.jobs.get(job_id)
                    if entry is not None and entry.want is not None:
                        self._report_job(report, entry, slot)
                        self._persist(job_id)
            time.sleep(0)
        with self._lock:
            for job_id, entry in self.jobs.items():
                if entry.failure is not None:
                    report.failures[job_id], entry.failure = entry.failure, None
                if entry.fatal and not entry.fatal_reported:
                    entry.fatal_reported = True
                    kept = float(entry.run.cursor)
                    report.failures[job_id] = JobFailure(
                        entry.fatal, fatal=True, checkpoint_units=kept
                    )
        return report

    def _report_job(self, report: SlotReport, entry: ExecutorJob, slot: int) -> None:
        """One job's part of the slot's report (:func:`.generation_measure.slot_progress`)."""
        run = entry.run
        seen = [
            (
                gen,
                [s for s in self._statuses(gen).values() if s is not None]
                if gen is run.gen
                else list(gen.final.values()),
            )
            for gen in [*run.ended, *([run.gen] if run.gen is not None else [])]
        ]
        progress, measurements = slot_progress(
            entry.spec,
            run,
            seen,
            slot,
            placement_of=self.placement_of,
            nic=lambda: self._nic.rates(slot, self.agents.alive()),
            now=self.clock,
            slot_seconds=self.slot_seconds,
            slot_start=self._slot_start,
        )
        report.measurements.extend(measurements)
        report.progress[entry.spec.job_id] = progress
