"""What one generation of a job's tasks measured over a slot, from the agents' reports.

The agents report each task's cumulative counters; the slot's measurement is their growth
since the last report the executor read (kept per task in ``JobRun.seen``), as
per-iteration means with the workers' achieved communication throughput and their hosts'
NIC throughput. A relaunch's restart time, and a job's first launch's start-up, are
reported once, when every computing task has iterated.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from mlsched.controller.runs import Generation, JobRun, Layout
from mlsched.controller.throughput import comm_gbps
from mlsched.core.allocation import Placement
from mlsched.core.job import JobSpec
from mlsched.core.reports import TaskReport
from mlsched.engine.executor import JobProgress
from mlsched.perfmodel.base import Measurement, NicThroughput

__all__ = [
    "COUNTERS",
    "measure_generation",
    "restart_seconds",
    "slot_progress",
    "startup_seconds",
]

COUNTERS = (
    "timed_iterations",
    "compute_time_s",
    "comm_time_s",
    "bytes_sent",
    "bytes_recv",
    "iterations",
)


def measure_generation(
    job_id: str,
    run: JobRun,
    gen: Generation,
    statuses: list[TaskReport],
    slot: int,
    placement: Placement | None,
    nic: Callable[[], Mapping[str, NicThroughput]],
) -> Measurement | None:
    """Per-iteration means over the slot, from the workers' cumulative counters (and
    ``run.seen`` moved on to them); None when no timed iteration grew or the layout has no
    placement. ``nic`` gives the hosts' NIC throughput, read only for a measurement."""
    delta = [0.0] * len(COUNTERS)
    for s in statuses:
        plan = gen.tasks.get(s.task_id)
        if plan is None or not plan.computes:
            continue
        now = tuple(float(getattr(s.measurement, c)) for c in COUNTERS)
        before = run.seen.get(s.task_id, (0.0,) * len(COUNTERS))
        before = (*before, *now[len(before) :])  # stored before a counter was added
        run.seen[s.task_id] = now
        for i in range(len(COUNTERS)):
            delta[i] += max(0.0, now[i] - before[i])
    timed, compute, comm, sent, recv, all_iterations = delta
    if timed <= 0 or placement is None:
        return None
    workers = sum(w for _, w, _ in gen.layout)
    # Async PS: an iteration is one worker's push; synchronous: one step of all workers.
    iterations = timed / (1 if gen.ups == 1 else workers)
    c, m = compute / timed, comm / timed
    hosts = nic()
    return Measurement(
        job_id=job_id,
        slot=slot,
        placement=placement,
        iterations=iterations,
        iteration_time_s=c + m,
        compute_time_s=c,
        comm_time_s=m,
        bytes_sent=sent,
        bytes_recv=recv,
        comm_gbps=comm_gbps(sent + recv, all_iterations, comm, timed),
        nic={a: hosts[a] for a, _, _ in gen.layout if a in hosts},
    )


def restart_seconds(gen: Generation, statuses: list[TaskReport]) -> float | None:
    """The time a relaunch lost, once, when it is known: the stop that made it (its start
    to the last generation's end) and the relaunch to its first iteration; where the stop's
    length is unknown, the stop's start to the first iteration."""
    if gen.trigger_at is None:
        return None
    if gen.stopped_s is None:
        return _to_first_iteration(gen, statuses, gen.trigger_at)
    relaunch = _to_first_iteration(gen, statuses, gen.launched_at)
    return None if relaunch is None else gen.stopped_s + relaunch


def startup_seconds(gen: Generation, statuses: list[TaskReport]) -> float | None:
    """Launch-to-first-iteration time of a job's first launch, once, when it is known."""
    if gen.trigger_at is not None or gen.number != 1:
        return None
    return _to_first_iteration(gen, statuses, gen.launched_at)


def _to_first_iteration(gen: Generation, statuses: list[TaskReport], since: float) -> float | None:
    """Seconds from ``since`` to the last computing task's first iteration (a synchronous
    job waits for it; an asynchronous one is at full speed only then), reported once."""
    if gen.restart_reported:
        return None
    firsts = [s.measurement.first_iteration_unix for s in statuses if s.measurement.iterations]
    computing = sum(1 for t in gen.tasks.values() if t.computes)
    if not firsts or len(firsts) < computing:
        return None
    gen.restart_reported = True
    return max(0.0, max(firsts) - since)


def slot_progress(
    job: JobSpec,
    run: JobRun,
    seen: list[tuple[Generation, list[TaskReport]]],
    slot: int,
    *,
    placement_of: Callable[[Layout], Placement | None],
    nic: Callable[[], Mapping[str, NicThroughput]],
    now: Callable[[], float],
    slot_seconds: float,
    slot_start: float,
) -> tuple[JobProgress, list[Measurement]]:
    """A job's progress and measurements over the slot, from its generations that ended
    since the last report and its running one, each with its tasks' statuses (``seen``).
    Reported progress is a high-water mark (``run.reported_units``); the ended
    generations' counters are forgotten once read."""
    done_units = float(run.cursor)
    last_t: float | None = None
    restart_s = startup_s = 0.0
    measurements: list[Measurement] = []
    for gen, statuses in seen:
        steps = [s.measurement.last_step for s in statuses if s.measurement.iterations]
        if steps:
            reached = max(steps) + 1 - gen.start_step
            done_units = max(done_units, gen.start_cursor + max(0, reached) * gen.ups)
            t = max(s.measurement.last_iteration_unix for s in statuses)
            last_t = t if last_t is None else max(last_t, t)
        measurement = measure_generation(
            job.job_id, run, gen, statuses, slot, placement_of(gen.layout), nic
        )
        if measurement is not None:
            measurements.append(measurement)
        restart = restart_seconds(gen, statuses)
        if restart is not None:
            restart_s = restart
        startup = startup_seconds(gen, statuses)
        if startup is not None:
            startup_s = startup
    for gen in run.ended:
        for task_id in gen.tasks:
            run.seen.pop(task_id, None)
    run.ended.clear()
    total = job.total_work
    finished = run.finished or done_units >= total - 1e-9
    units = max(0.0, min(total, done_units) - run.reported_units)
    run.reported_units += units
    offset = None
    if finished:
        units = max(0.0, total - (run.reported_units - units))
        run.reported_units = total
        end = last_t if last_t is not None else now()
        offset = min(slot_seconds, max(0.0, end - slot_start))
    return JobProgress(units, finished, offset, restart_s, startup_s), measurements
