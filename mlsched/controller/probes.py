"""Profiling through the agents: one profile cell measured on the cluster's own hosts and links.

A probe runs one job (a spec as a client would submit it) in a shape the operator names:
all on one host, spread over hosts of one rack, or over hosts of two racks. It runs
outside the engine, on an idle cluster: the slot loop holds at its next boundary (jobs
submitted meanwhile wait, nothing running is disturbed because nothing may run), the
executor runs the probe's generations with the layout chosen here, and the loop resumes
when the probe ends. What it measures is what the agents report of any job:

1. a fresh generation: per-iteration compute and communication seconds and bytes over
   ``steps`` iterations per worker after ``warmup``, and ``seconds`` at least (differences
   of the tasks' cumulative counters), and its start-up: launch to the slowest worker's first iteration, less one
   steady iteration (an agent reports the first iteration's end);
2. the generation stopped as any re-layout stops it (SIGTERM, a common step, a checkpoint)
   and a second one launched from that checkpoint: the restart, from the stop to the
   slowest worker's first resumed iteration (less one iteration), as the executor measures
   a re-layout's.

Checkpoint save and load seconds are not separable there and stay null (a one-machine
profile measures them). Agents' clocks are taken to agree with the controller's, as the
executor's restart measurement takes them.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from mlsched.controller.agents import AgentInfo, AgentRegistry
from mlsched.controller.cluster_executor import ClusterExecutor
from mlsched.controller.runs import Generation, Layout
from mlsched.core.errors import MlschedError, SpecError
from mlsched.core.job import Arch, JobSpec
from mlsched.core.reports import TaskReport
from mlsched.core.tasks import TaskPlan
from mlsched.perfmodel.profile import PLACEMENTS, Cell
from mlsched.perfmodel.profiled import profile_kind

__all__ = ["LoopHold", "ProbeBusy", "ProbeRequest", "ProbeStatus", "Probes", "probe_layout"]

log = logging.getLogger(__name__)

_IDS = itertools.count(1)


class ProbeBusy(MlschedError):
    """A probe cannot start now: the cluster runs jobs, or another probe runs."""


@dataclass(frozen=True)
class ProbeRequest:
    job: JobSpec  # its model, kind, worker count, batch and training settings
    placement: str  # host | rack | racks
    steps: int = 20  # iterations per worker measured, after the warm-up
    warmup: int = 3
    timeout_s: float = 600.0  # for each phase
    #: The measured window lasts at least this long too: a running job pays periodic
    #: checkpoints and a CPU quota's periods, which a window of a few fast steps misses.
    seconds: float = 10.0

    def __post_init__(self) -> None:
        if self.placement not in PLACEMENTS:
            raise SpecError("placement", self.placement, f"one of {', '.join(PLACEMENTS)}")
        for name, low, high in (("steps", 2, 100_000), ("warmup", 0, 10_000)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
                raise SpecError(name, value, f"an integer in {low}..{high}")
        t = self.timeout_s
        if not isinstance(t, int | float) or isinstance(t, bool) or not 10 <= t <= 86_400:
            raise SpecError("timeout_s", t, "seconds in 10..86400")
        w = self.seconds
        if not isinstance(w, int | float) or isinstance(w, bool) or not 0 <= w <= t / 2:
            raise SpecError("seconds", w, f"seconds in 0..{t / 2:g} (half the phase timeout)")

    @property
    def workers(self) -> int:
        return self.job.requested_workers or self.job.worker_cap


@dataclass
class ProbeStatus:
    probe_id: str
    state: str = "running"  # running | done | failed
    phase: str = "waiting for the slot boundary"
    error: str = ""
    cell: Cell | None = None
    layout: Layout = ()
    device_type: str = ""
    started_unix: float = field(default_factory=time.time)


def _slots(agent: AgentInfo) -> int:
    """Workers an agent can hold: its devices, or its whole cores on a host without any."""
    gpus = int(agent.capacity.get("gpu", 0.0))
    return gpus if gpus > 0 else max(1, int(agent.capacity.get("cpu", 1.0)))


def probe_layout(agents: list[AgentInfo], workers: int, ps: int, placement: str) -> Layout:
    """Where a probe's processes go on ``agents`` (idle, in registration order) so that
    they have the shape ``placement``; SpecError naming ``placement`` when the agents
    cannot give it. Spread shapes put one worker on each host; the PS (when there is one)
    shares the first worker's host, or has a host of its own when there is one worker."""
    if placement == "host":
        for a in agents:
            if _slots(a) >= workers:
                return ((a.agent_id, workers, ps),)
        raise SpecError("placement", placement, f"an idle agent with {workers} devices")
    hosts = workers + (1 if ps and workers == 1 else 0)
    if hosts < 2:
        raise SpecError("placement", placement, "host (a single process needs one host)")
    racks: dict[str, list[AgentInfo]] = {}
    for a in agents:
        racks.setdefault(a.rack, []).append(a)
    chosen: list[AgentInfo] = []
    if placement == "rack":
        for members in racks.values():
            if len(members) >= hosts:
                chosen = members[:hosts]
                break
    elif len(racks) >= 2 and len(agents) >= hosts:
        # Round-robin over the racks: processes on both sides of the racks' uplinks.
        turns = itertools.zip_longest(*racks.values())
        chosen = [a for row in turns for a in row if a is not None][:hosts]
    if len(chosen) < hosts:
        where = "one rack" if placement == "rack" else "two or more racks"
        raise SpecError("placement", placement, f"{hosts} idle agents in {where}")
    if workers == 1 and ps:
        return ((chosen[0].agent_id, 1, 0), (chosen[1].agent_id, 0, ps))
    return tuple((a.agent_id, 1, ps if i == 0 else 0) for i, a in enumerate(chosen))


class LoopHold:
    """A hold on the slot loop at a boundary: a probe asks (:meth:`take`), the loop obeys
    at its next boundary (:meth:`holding`, True while held), the probe lets it go."""

    def __init__(self, wait_s: float) -> None:
        self.wait_s = wait_s
        self._wanted = threading.Event()
        self._held = threading.Event()

    def holding(self) -> bool:
        """Called by the loop at each boundary: whether to hold there (and say it does)."""
        if self._wanted.is_set():
            self._held.set()
            return True
        self._held.clear()
        return False

    def take(self, on: bool) -> bool:
        """Hold (True once the loop holds; False when it did not within ``wait_s``), or
        let the loop go on."""
        if not on:
            self._wanted.clear()
            self._held.clear()
            return True
        self._wanted.set()
        if self._held.wait(self.wait_s):
            return True
        self._wanted.clear()
        return False


class Probes:
    """One probe at a time. ``hold(True)`` asks the slot loop to hold at its next boundary
    and returns once it holds (False: it did not within the wait); ``hold(False)`` lets it
    go. ``busy`` names the jobs that are not finished (a probe needs an idle cluster)."""

    def __init__(
        self,
        executor: ClusterExecutor,
        agents: AgentRegistry,
        *,
        hold: Callable[[bool], bool],
        busy: Callable[[], list[str]],
        poll_s: float = 0.2,
    ) -> None:
        self.executor = executor
        self.agents = agents
        self._hold = hold
        self._busy = busy
        self.poll_s = poll_s
        self._lock = threading.Lock()
        self._probes: dict[str, ProbeStatus] = {}
        self._running: str | None = None

    def start(self, request: ProbeRequest) -> ProbeStatus:
        """Start a probe in the background; ProbeBusy when one runs or jobs are unfinished."""
        busy = self._busy()
        if busy:
            shown = ", ".join(busy[:5]) + (f" and {len(busy) - 5} more" if len(busy) > 5 else "")
            raise ProbeBusy(f"the cluster has unfinished jobs ({shown}): profile an idle cluster")
        with self._lock:
            if self._running is not None:
                raise ProbeBusy(f"probe {self._running} is running: one at a time")
            self._place(request)  # a shape these agents cannot give is refused now, by field
            job = request.job
            probe_id = f"profile{next(_IDS)}-{int(time.time()) % 100_000}"
            status = ProbeStatus(probe_id)
            self._probes[probe_id] = status
            self._running = probe_id
            if len(self._probes) > 100:  # the oldest finished ones go
                for old in [p for p, s in self._probes.items() if s.state != "running"][:50]:
                    del self._probes[old]
        spec = replace(
            job,
            job_id=f"{probe_id}-{job.model}-{profile_kind(job)}-{request.workers}w",
            arrival_slot=0,
            # Work no probe finishes, however fast its steps: it is stopped, never done
            # (a job that finished during the measured window would end the probe).
            epochs=1,
            chunks=1,
            batches_per_chunk=1_000_000_000,
        )
        threading.Thread(
            target=self._run, args=(status, request, spec), name=probe_id, daemon=True
        ).start()
        return status

    def get(self, probe_id: str) -> ProbeStatus:
        with self._lock:
            status = self._probes.get(probe_id)
        if status is None:
            raise KeyError(probe_id)
        return status

    # The probe --------------------------------------------------------------------------
    def _run(self, status: ProbeStatus, req: ProbeRequest, spec: JobSpec) -> None:
        pinned = False
        try:
            if not self._hold(True):
                raise RuntimeError("the slot loop did not reach a slot boundary in time")
            busy = self._busy()
            if busy:
                raise ProbeBusy(f"jobs arrived before the hold: {', '.join(busy[:5])}")
            layout, device = self._place(req)
            status.layout, status.device_type = layout, device
            status.phase = "fresh run"
            log.info("[controller] probe %s: %s on %s", status.probe_id, spec.job_id, layout)
            self.executor.pin(spec, layout)
            pinned = True
            fresh = self._fresh(status, req, spec.job_id)
            status.phase = "stopping at a checkpoint"
            self.executor.pin(spec, None)
            self._wait(req, status, lambda: self._ended(spec.job_id))
            status.phase = "resumed run"
            self.executor.pin(spec, layout)
            restart = self._resumed(req, status, spec.job_id, fresh["iteration_s"])
            status.phase = "stopping"
            self.executor.pin(spec, None)
            self._wait(req, status, lambda: self._ended(spec.job_id))
            status.cell = Cell(
                model=spec.model,
                kind=profile_kind(spec),
                workers=req.workers,
                device_type=device,
                restart_s=restart,
                batch_size=spec.batch_size,
                image_size=_image_size(spec),
                placement=req.placement,
                **fresh,
            ).check()
            status.state, status.phase = "done", "done"
        except Exception as err:
            log.warning("[controller] probe %s failed: %s", status.probe_id, err)
            status.state, status.error = "failed", f"{status.phase}: {err}"[:1000]
        finally:
            if pinned:
                self._clean_up(spec)
            self._hold(False)
            with self._lock:
                self._running = None

    def _place(self, req: ProbeRequest) -> tuple[Layout, str]:
        idle = [
            a
            for a in self.agents.alive()
            if not a.returning and all(t.exited for t in a.tasks.values())
        ]
        ps = (req.job.requested_ps or 1) if req.job.arch is Arch.PS else 0
        layout = probe_layout(idle, req.workers, ps, req.placement)
        types = {a.gpu_type for a in idle if a.agent_id in {n for n, _, _ in layout}}
        if len(types) > 1:
            raise SpecError("placement", req.placement, "agents of one device type")
        return layout, types.pop() or "cpu"

    def _fresh(self, status: ProbeStatus, req: ProbeRequest, job_id: str) -> dict[str, Any]:
        """Per-iteration means between the warm-up and ``steps`` more, and the start-up."""
        self._wait(req, status, lambda: self._reached(job_id, req.warmup))
        before = self._counters(job_id)
        start, since = before[6], time.monotonic()

        def enough() -> bool:
            long_enough = time.monotonic() - since >= req.seconds
            return self._reached(job_id, req.steps, start) and long_enough

        self._wait(req, status, enough)
        after = self._counters(job_id)
        timed, compute, comm, moved = (a - b for a, b in zip(after[:4], before[:4], strict=True))
        if timed <= 0:
            raise RuntimeError("no timed iteration between the warm-up and the end")
        c, m = compute / timed, comm / timed
        launched, firsts = after[4], after[5]
        return {
            "iteration_s": c + m,
            "compute_s": c,
            "comm_s": m,
            "bytes_per_iteration": moved / timed,
            "startup_s": max(0.0, max(firsts) - launched - (c + m)),
            "iterations": int(timed),
        }

    def _resumed(self, req: ProbeRequest, status: ProbeStatus, job_id: str, iter_s: float) -> float:
        self._wait(req, status, lambda: self._reached(job_id, 1))
        with self.executor.viewing(job_id) as (run, gen, reports):
            if gen is None or run.last_stop_at is None:
                raise RuntimeError("the resumed generation ended before it was measured")
            firsts = [r.measurement.first_iteration_unix for p, r in _computing(gen, reports)]
            stopped = run.last_stop_at
        return max(0.0, max(firsts) - stopped - iter_s)

    # What the agents reported -----------------------------------------------------------
    def _reached(self, job_id: str, iterations: int, since: dict[str, int] | None = None) -> bool:
        """Every computing task's ranks each did ``iterations`` (more than ``since``, the
        tasks' iteration counts then); RuntimeError when the generation failed or ended."""
        with self.executor.viewing(job_id) as (run, gen, reports):
            if gen is None or gen.failed:
                why = gen.failed if gen is not None else run.last_failure or "it ended"
                raise RuntimeError(f"generation failed: {why}")
            tasks = _computing(gen, reports)
            if len(tasks) < sum(1 for p in gen.tasks.values() if p.computes):
                return False
            base = since or {}
            return all(
                r.measurement.iterations >= base.get(p.task_id, 0) + iterations * _ranks(p)
                for p, r in tasks
            )

    def _counters(self, job_id: str) -> tuple[Any, ...]:
        """Timed iterations, compute and communication seconds, bytes (summed over the
        generation's workers), the launch time, each computing task's first iteration,
        and each one's iteration count."""
        with self.executor.viewing(job_id) as (_, gen, reports):
            assert gen is not None
            tasks = _computing(gen, reports)
            ms = [r.measurement for _, r in tasks]
            return (
                float(sum(m.timed_iterations for m in ms)),
                sum(m.compute_time_s for m in ms),
                sum(m.comm_time_s for m in ms),
                sum(m.bytes_sent + m.bytes_recv for m in ms),
                gen.launched_at,
                [m.first_iteration_unix for m in ms],
                {p.task_id: r.measurement.iterations for p, r in tasks},
            )

    def _ended(self, job_id: str) -> bool:
        with self.executor.viewing(job_id) as (_, gen, _reports):
            return gen is None

    def _wait(self, req: ProbeRequest, status: ProbeStatus, done: Callable[[], bool]) -> None:
        deadline = time.monotonic() + req.timeout_s
        while not done():
            if time.monotonic() > deadline:
                raise RuntimeError(f"no progress within {req.timeout_s:g} s")
            time.sleep(self.poll_s)

    def _clean_up(self, spec: JobSpec) -> None:
        """Stop whatever of the probe still runs and forget it (its run row too)."""
        try:
            self.executor.pin(spec, None)
            deadline = time.monotonic() + 120.0
            while time.monotonic() < deadline and not self._ended(spec.job_id):
                time.sleep(self.poll_s)
        except Exception:
            log.exception("[controller] probe %s: stopping it failed", spec.job_id)
        self.executor.drop(spec.job_id)


def _computing(
    gen: Generation, reports: dict[str, TaskReport | None]
) -> list[tuple[TaskPlan, TaskReport]]:
    """The generation's computing tasks that have reported an iteration, with that report."""
    out = []
    for task_id, plan in gen.tasks.items():
        report = reports.get(task_id)
        if plan.computes and report is not None and report.measurement.iterations > 0:
            out.append((plan, report))
    return out


def _ranks(plan: TaskPlan) -> int:
    """Training ranks in one task (a torchrun or Horovod node has several)."""
    sizes = plan.node.node_sizes
    return sizes[plan.node.node_rank] if sizes else 1


def _image_size(job: JobSpec) -> int | None:
    value = job.training.get("image_size")
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None
