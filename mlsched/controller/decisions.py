"""What to do next with a job's generation, decided from facts alone.

:func:`decide` is the cluster executor's judgment as a pure function: given a job's run
(its checkpoint, its current generation, its consecutive failures), what the agents last
reported of the generation's tasks, the layout the slot's allocation wants, which agents
are alive and the time, it returns one action. ``ClusterExecutor`` gathers the facts,
applies the action (the run's state, ports, persistence, logging) and asks again until
the answer is to keep things as they are or to wait.

The order of the questions is the order of the rules: a failure is noticed before anything
else (the survivors drain at once); a generation whose tasks have all exited ends; a
running generation whose layout is no longer wanted drains; with no generation, a wanted
job launches once every agent of its layout is alive.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from dataclasses import dataclass

from mlsched.controller.runs import JobRun, Layout
from mlsched.core.reports import TaskReport

__all__ = ["Action", "Drain", "Fail", "Finish", "Keep", "Launch", "Wait", "decide"]


@dataclass(frozen=True)
class Keep:
    """Nothing to do: the generation runs (or drains) as it should, or nothing is wanted."""


@dataclass(frozen=True)
class Wait:
    """The job is wanted, but agents of its layout are not alive: it is re-placed at the
    next slot boundary."""

    lost: tuple[str, ...]


@dataclass(frozen=True)
class Drain:
    """Stop the generation at a common step (its tasks checkpoint and exit): its layout is
    no longer wanted (``re-layout``) or the job has no allocation (``paused``)."""

    reason: str
    at: float  # when the stop began


@dataclass(frozen=True)
class Fail:
    """A task failed (an error exit, a lost agent): the generation fails, and drains."""

    reason: str
    at: float


@dataclass(frozen=True)
class Finish:
    """Every task has exited: the generation ends."""

    step: int  # the checkpoint the job continues from
    cursor: int
    failed: str  # why the generation failed ("" if it did not)
    lost_steps: int  # steps the failed generation trained past that checkpoint
    machine_lost: bool  # an agent was lost: no fault of the job's own processes
    finished: bool  # the checkpoint is the job's last step
    failures: int  # the job's own failed generations in a row, this one included
    fatal: str  # not "": the job failed too often and ends, with this reason


@dataclass(frozen=True)
class Launch:
    """Start the next generation with ``layout``."""

    layout: Layout


Action = Keep | Wait | Drain | Fail | Finish | Launch


def decide(
    run: JobRun,
    reports: Mapping[str, TaskReport | None],
    want: Layout | None,
    alive: Container[str],
    now: float,
    *,
    max_failures: int,
    fatal: bool = False,
) -> Action:
    """The next action for ``run``.

    ``reports``: the last report of each task of the current generation, None for a task
    whose agent is lost; a task without an entry has not been reported yet. ``want``: the
    layout allocated this slot (None: not allocated). ``alive``: the live agents. ``fatal``:
    the job has been failed (its generation may still drain, none launches).
    """
    gen = run.gen
    if gen is None:
        if want is None or run.finished or fatal:
            return Keep()
        lost = tuple(agent for agent, _, _ in want if agent not in alive)
        return Wait(lost) if lost else Launch(want)
    tasks = [(t, reports.get(t, TaskReport(t))) for t in gen.agent_of]
    if not gen.failed and not gen.draining:
        for task_id, r in tasks:
            if r is None:
                return Fail(f"task {task_id}: agent {gen.agent_of[task_id]} lost", now)
            if r.failed:
                return Fail(f"task {task_id} exited {r.exit_code}: {r.exit_reason}", now)
    if all(r is None or r.exited for _, r in tasks):
        return _finish(run, [r for _, r in tasks], max_failures)
    if not gen.draining and (want is None or gen.layout != want):
        return Drain("re-layout" if want else "paused", now)
    return Keep()


def _finish(run: JobRun, reports: list[TaskReport | None], max_failures: int) -> Finish:
    gen = run.gen
    assert gen is not None
    # The newest checkpoint any task wrote; a lost agent's tasks: the last one its
    # heartbeats reported. Never older than the one the generation started from.
    known = [r for r in reports if r is not None] + list(gen.seen_status.values())
    step, cursor = run.step, run.cursor
    for r in known:
        m = r.measurement
        if m.has_checkpoint and m.checkpoint_step >= step:
            step, cursor = m.checkpoint_step, m.checkpoint_cursor
    lost_steps = 0
    if gen.failed:
        # What the tasks had trained beyond that checkpoint is lost with the generation.
        reached = max(
            (r.measurement.last_step + 1 for r in known if r.measurement.iterations),
            default=step,
        )
        lost_steps = max(0, reached - step)
    machine_lost = any(r is None for r in reports)
    finished = step >= gen.stop_step
    # A success resets the count; a machine that went down is no fault of the job: only
    # failures of its own processes count towards the crash loop that ends it.
    own = 0 if machine_lost else 1
    failures = 0 if finished or not gen.failed else run.failures + own
    fatal = ""
    if gen.failed and not finished and failures >= max_failures:
        fatal = f"{failures} generations failed in a row; last: {gen.failed}"
    return Finish(
        step=step,
        cursor=cursor,
        failed=gen.failed,
        lost_steps=lost_steps,
        machine_lost=machine_lost,
        finished=finished,
        failures=failures,
        fatal=fatal,
    )
