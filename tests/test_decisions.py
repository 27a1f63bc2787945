"""The generation decisions as a pure function: runs, reports, wanted layouts and liveness
in, one action out. No processes, no agents, no gRPC."""

from __future__ import annotations

from typing import Any

import pytest

from mlsched.controller.decisions import (
    Action,
    Drain,
    Fail,
    Finish,
    Keep,
    Launch,
    Wait,
    decide,
)
from mlsched.controller.runs import Generation, JobRun, Layout
from mlsched.core.reports import TaskMeasurement, TaskReport, TaskState

LAYOUT: Layout = (("a0", 1, 0), ("a1", 1, 0))
MOVED: Layout = (("a0", 2, 0),)
ALIVE = frozenset({"a0", "a1"})
NOW = 1234.5
R0, R1 = "j.g1.r0", "j.g1.r1"


def _run(*, draining: bool = False, failed: str = "", stop: int = 50, **run: Any) -> JobRun:
    """Job ``j`` with generation 1 running one rank on a0 and one on a1."""
    gen = Generation(
        number=1, layout=LAYOUT, start_step=run.get("step", 0),
        start_cursor=run.get("cursor", 0), stop_step=stop, ups=2, tasks={},
        agent_of={R0: "a0", R1: "a1"}, ports=[("127.0.0.1", 29500)], draining=draining,
        failed=failed,
    )  # fmt: skip
    return JobRun("j", gen=gen, generations=1, **run)


def _report(task_id: str, state: TaskState = TaskState.RUNNING, *, code: int = 0,
            reason: str = "", last: int = -1, ckpt: int = -1, cursor: int = -1) -> TaskReport:  # fmt: skip
    return TaskReport(
        task_id, job_id="j", state=state, exit_code=code, exit_reason=reason,
        measurement=TaskMeasurement(
            iterations=last + 1 if last >= 0 else 0, last_step=last,
            checkpoint_step=ckpt, checkpoint_cursor=cursor,
        ),
    )  # fmt: skip


def _exited(task_id: str, **kw: Any) -> TaskReport:
    return _report(task_id, TaskState.EXITED, **kw)


def _decide(
    run: JobRun,
    reports: dict[str, TaskReport | None] | None = None,
    want: Layout | None = LAYOUT,
    alive: frozenset[str] = ALIVE,
    *,
    max_failures: int = 3,
    fatal: bool = False,
) -> Action:
    if reports is None:
        reports = {R0: _report(R0), R1: _report(R1)}
    return decide(run, reports, want, alive, NOW, max_failures=max_failures, fatal=fatal)


# Running ------------------------------------------------------------------------------
def test_a_running_generation_whose_layout_is_wanted_is_kept() -> None:
    assert _decide(_run()) == Keep()


def test_tasks_not_reported_yet_are_neither_exited_nor_lost() -> None:
    unknown = {R0: TaskReport(R0), R1: _report(R1)}
    assert _decide(_run(), unknown) == Keep()
    assert _decide(_run(), {R0: _report(R0)}) == Keep()  # R1 has no entry at all
    assert _decide(_run(draining=True), {R0: _exited(R0)}) == Keep()


# Failures -----------------------------------------------------------------------------
def test_a_task_exiting_with_an_error_fails_the_generation_at_once() -> None:
    reports = {R0: _report(R0), R1: _exited(R1, code=1, reason="error: boom")}
    assert _decide(_run(), reports) == Fail(f"task {R1} exited 1: error: boom", NOW)


def test_the_failure_named_is_the_first_task_s() -> None:
    reports = {R0: _exited(R0, code=2, reason="error: a"), R1: None}
    assert _decide(_run(), reports) == Fail(f"task {R0} exited 2: error: a", NOW)


@pytest.mark.parametrize(("code", "reason"), [(0, "stopped"), (1, "completed"), (0, "")])
def test_a_clean_exit_is_no_failure(code: int, reason: str) -> None:
    reports = {R0: _exited(R0, code=code, reason=reason), R1: _report(R1)}
    assert _decide(_run(), reports) == Keep()


def test_a_lost_agent_fails_the_generation() -> None:
    reports = {R0: _report(R0, last=5), R1: None}
    assert _decide(_run(), reports) == Fail(f"task {R1}: agent a1 lost", NOW)


def test_an_error_exit_while_draining_is_not_a_failure() -> None:
    # SIGTERM'd for a re-layout, a task that errors on its way out fails nothing.
    reports = {R0: _exited(R0, code=-15, reason="killed after grace"), R1: _report(R1)}
    assert _decide(_run(draining=True), reports, want=MOVED) == Keep()


def test_a_failed_generation_does_not_fail_again() -> None:
    run = _run(draining=True, failed=f"task {R1}: agent a1 lost")
    reports = {R0: _report(R0), R1: None}
    assert _decide(run, reports) == Keep()


# The end of a generation ---------------------------------------------------------------
def test_a_generation_ends_only_when_every_task_has_exited() -> None:
    run = _run(draining=True)
    assert _decide(run, {R0: _exited(R0, ckpt=20, cursor=40), R1: _report(R1)}) == Keep()
    end = _decide(run, {R0: _exited(R0, ckpt=20, cursor=40), R1: _exited(R1, ckpt=20, cursor=40)})
    assert isinstance(end, Finish) and (end.step, end.cursor) == (20, 40)


def test_the_newest_checkpoint_of_any_task_is_adopted() -> None:
    run = _run(draining=True, failures=2)
    reports: dict[str, TaskReport | None] = {
        R0: _exited(R0, last=24, ckpt=20, cursor=40),
        R1: _exited(R1, last=24, ckpt=24, cursor=48),
    }
    end = _decide(run, reports)
    assert end == Finish(
        step=24, cursor=48, failed="", lost_steps=0, machine_lost=False, finished=False,
        failures=0, fatal="",
    )  # fmt: skip


def test_a_lost_agent_s_last_seen_checkpoint_counts() -> None:
    run = _run(draining=True, failed=f"task {R1}: agent a1 lost")
    assert run.gen is not None
    run.gen.seen_status[R1] = _report(R1, last=33, ckpt=30, cursor=60)  # before it went silent
    reports = {R0: _exited(R0, last=31, ckpt=25, cursor=50), R1: None}
    end = _decide(run, reports)
    assert isinstance(end, Finish)
    assert (end.step, end.cursor) == (30, 60)
    assert end.lost_steps == 34 - 30  # the lost task had reached step 33


def test_no_checkpoint_older_than_the_run_s_and_none_without_a_cursor() -> None:
    run = _run(draining=True, step=30, cursor=60)
    reports: dict[str, TaskReport | None] = {
        R0: _exited(R0, ckpt=20, cursor=40),  # older than the generation's start
        R1: _exited(R1, ckpt=90, cursor=-1),  # a step without a cursor is no checkpoint
    }
    end = _decide(run, reports)
    assert isinstance(end, Finish) and (end.step, end.cursor) == (30, 60)
    same = {R0: _exited(R0, ckpt=30, cursor=61), R1: _exited(R1)}
    end = _decide(run, same)
    assert isinstance(end, Finish) and (end.step, end.cursor) == (30, 61)


def test_a_failed_generation_counts_the_steps_it_trained_past_its_checkpoint() -> None:
    run = _run(draining=True, failed="task x exited 1: e", step=10, cursor=20)
    reports: dict[str, TaskReport | None] = {
        R0: _exited(R0, code=1, last=30, ckpt=20, cursor=40),
        R1: _exited(R1),  # no iterations: no step reached
    }
    end = _decide(run, reports)
    assert isinstance(end, Finish)
    assert (end.step, end.lost_steps, end.failed) == (20, 11, "task x exited 1: e")
    # A generation stopped on purpose loses nothing.
    end = _decide(_run(draining=True), reports)
    assert isinstance(end, Finish) and end.lost_steps == 0
    # A task that never iterated reached no step, whatever its (default) last step says.
    silent = TaskReport(R0, state=TaskState.EXITED, measurement=TaskMeasurement(last_step=7))
    end = _decide(_run(draining=True, failed="x"), {R0: silent, R1: _exited(R1)})
    assert isinstance(end, Finish) and end.lost_steps == 0


def test_a_lost_machine_does_not_count_towards_the_crash_loop() -> None:
    run = _run(draining=True, failed=f"task {R1}: agent a1 lost", failures=2)
    end = _decide(run, {R0: _exited(R0), R1: None})
    assert isinstance(end, Finish)
    assert end.machine_lost and end.failures == 2 and end.fatal == ""


@pytest.mark.parametrize(("before", "fatal"), [(0, False), (1, False), (2, True)])
def test_max_failures_own_failures_in_a_row_are_fatal(before: int, fatal: bool) -> None:
    why = f"task {R0} exited 1: error: boom"
    run = _run(draining=True, failed=why, failures=before)
    end = _decide(run, {R0: _exited(R0, code=1, reason="error: boom"), R1: _exited(R1)})
    assert isinstance(end, Finish) and not end.machine_lost
    assert end.failures == before + 1
    assert end.fatal == (f"3 generations failed in a row; last: {why}" if fatal else "")
    assert _decide(run, {R0: _exited(R0), R1: _exited(R1)}, max_failures=before + 1) == (
        Finish(
            step=0, cursor=0, failed=why, lost_steps=0, machine_lost=False, finished=False,
            failures=before + 1, fatal=f"{before + 1} generations failed in a row; last: {why}",
        )
    )  # fmt: skip


def test_reaching_the_stop_step_finishes_the_job_and_clears_its_failures() -> None:
    done = {R0: _exited(R0, last=49, ckpt=50, cursor=100), R1: _exited(R1, last=49)}
    end = _decide(_run(draining=True, failures=2), done)
    assert isinstance(end, Finish) and end.finished and end.failures == 0
    # Even a generation that failed after its last checkpoint is done, never fatal.
    failed = _run(draining=True, failed="task x exited 1: e", failures=2)
    end = _decide(failed, done)
    assert isinstance(end, Finish) and end.finished and (end.failures, end.fatal) == (0, "")
    short = {R0: _exited(R0, ckpt=49, cursor=98), R1: _exited(R1)}
    end = _decide(_run(draining=True), short)
    assert isinstance(end, Finish) and not end.finished


# Layouts ------------------------------------------------------------------------------
def test_a_changed_layout_drains_for_a_re_layout() -> None:
    assert _decide(_run(), want=MOVED) == Drain("re-layout", NOW)


def test_an_unallocated_job_drains_paused() -> None:
    assert _decide(_run(), want=None) == Drain("paused", NOW)


def test_a_draining_generation_is_not_drained_again() -> None:
    assert _decide(_run(draining=True), want=MOVED) == Keep()
    assert _decide(_run(draining=True), want=None) == Keep()


def test_a_failure_comes_before_a_re_layout() -> None:
    reports = {R0: _exited(R0, code=1, reason="error: x"), R1: _report(R1)}
    assert isinstance(_decide(_run(), reports, want=MOVED), Fail)


# Launching ----------------------------------------------------------------------------
def test_a_wanted_job_launches_when_every_agent_of_its_layout_is_alive() -> None:
    run = JobRun("j", step=20, cursor=40)
    assert _decide(run, {}) == Launch(LAYOUT)
    assert _decide(run, {}, alive=frozenset({"a0"})) == Wait(("a1",))
    assert _decide(run, {}, alive=frozenset()) == Wait(("a0", "a1"))


@pytest.mark.parametrize(
    ("run", "want", "fatal"),
    [
        (JobRun("j", finished=True), LAYOUT, False),
        (JobRun("j"), LAYOUT, True),
        (JobRun("j"), None, False),
    ],
)
def test_a_finished_failed_or_unallocated_job_does_not_launch(
    run: JobRun, want: Layout | None, fatal: bool
) -> None:
    assert _decide(run, {}, want=want, fatal=fatal) == Keep()


def test_a_failure_ends_the_generation_once_the_survivors_exit() -> None:
    """The sequence the executor follows, applying each action as it does."""
    run = _run(failures=1)
    assert run.gen is not None
    run.gen.seen_status[R0] = _report(R0, last=12, ckpt=10, cursor=20)
    reports: dict[str, TaskReport | None] = {R0: _report(R0, last=12, ckpt=10, cursor=20)}
    reports[R1] = _exited(R1, code=1, reason="error: oom", last=12)
    act = _decide(run, reports)
    assert act == Fail(f"task {R1} exited 1: error: oom", NOW)
    run.gen.failed, run.gen.draining = act.reason, True  # what the executor does
    assert _decide(run, reports) == Keep()  # R0 is still checkpointing
    reports[R0] = _exited(R0, last=12, ckpt=13, cursor=26)
    end = _decide(run, reports)
    assert end == Finish(
        step=13, cursor=26, failed=act.reason, lost_steps=0, machine_lost=False,
        finished=False, failures=2, fatal="",
    )  # fmt: skip
