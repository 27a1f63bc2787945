"""Stopping and failing for real: SIGTERM checkpoints and resumes; a killed peer fails the job.

Processes are started the way a node agent starts tasks: each command of the job in its own
session (process group), ``python -m mlsched.trainers`` for PS roles, one torchrun per DDP job.

What each signal does:

* SIGTERM to one PS worker: it asks PS 0 (in its next push) to stop handing out steps; every
  process finishes the steps already granted, PS 0 writes the checkpoint, all exit 0.
* SIGTERM to one DDP rank: the stop vote (an all-reduce per step) stops every rank at the same
  step, rank 0 checkpoints, all ranks and torchrun exit 0.
* SIGTERM to torchrun's process group (what an agent does to a task): the ranks stop and
  checkpoint exactly as above and exit 0, but torchrun itself turns the signal into a
  ``SignalException`` and exits 1 (torch.distributed.elastic behaviour, not the trainer's).
* SIGKILL of a PS worker: PS 0 fails, from gloo's connection error or, when gloo does not
  notice (no data in flight), because the worker owes it a message for longer than
  ``timeout_s``; the other worker loses PS 0 and fails. No checkpoint is written.
* SIGKILL of a DDP rank: the survivor's next collective fails (gloo sees the closed
  connection) and torchrun tears the job down with a non-zero status.
* SIGINT (Ctrl-C on ``mlsched train``) stops a process like SIGTERM; a second one interrupts.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest
from trainer_helpers import (
    PYTHON,
    checkpoint,
    make_config,
    of_type,
    read_records,
    reap,
    start,
    start_job,
    steps_of,
    torchrun_ranks,
    wait_all,
    wait_for_iterations,
    with_port,
)

from mlsched.trainers.checkpoint import latest_step
from mlsched.trainers.common import StopFlag
from mlsched.trainers.ps.server import _check_owed

pytestmark = pytest.mark.processes  # training processes: one such test at a time

BIG = 1_000_000  # a stop step no test reaches
TIMEOUT_S = 10.0  # --timeout-s of the kill tests
# How long to wait for the processes to exit before calling it a hang: a deadline for an
# event, not a speed goal (stop latency: benchmarks/restart_cost.py; noticing a lost peer:
# benchmarks/failure_cost.py), generous so that a loaded machine does not fail the test.
STOP_DEADLINE_S = 90.0
KILL_DEADLINE_S = TIMEOUT_S + 90.0


# SIGTERM ------------------------------------------------------------------------------------
@pytest.mark.soak  # about 25 s (make soak, CI); make test keeps the DDP SIGTERM and kill below
@pytest.mark.slow
def test_ps_sigterm_checkpoints_then_a_killed_worker_fails_the_resumed_job(
    tmp_path: Path,
) -> None:
    """SIGTERM one worker: a clean stop at step s. Resume (steps continue at s), then
    SIGKILL one worker: the PS and the other worker fail within the timeout."""
    cfg = with_port(
        make_config(tmp_path, "term", arch="ps", mode="async", num_workers=2, stop_step=BIG)
    )
    with reap(start_job(cfg)) as procs:  # PS 0, worker 0, worker 1
        wait_for_iterations(cfg.metrics, 30, procs=procs)
        procs[2].send_signal(signal.SIGTERM)
        codes = wait_all(procs, STOP_DEADLINE_S)
    assert codes == [0, 0, 0]

    records = read_records(cfg.metrics)
    assert of_type(records, "error") == []
    s = latest_step(cfg.checkpoint_dir)
    assert s is not None and 0 < s < BIG
    steps = steps_of(records, "worker")
    assert s == max(steps) + 1
    assert Counter(steps) == Counter(range(s))  # every granted step pushed exactly once
    state = checkpoint(cfg)
    assert (state.step, state.data_cursor) == (s, s)
    stopped_by = {(r["role"], r["rank"]): r["stopped_by"] for r in of_type(records, "summary")}
    assert stopped_by[("worker", 1)] == "signal SIGTERM"
    assert stopped_by[("ps", 0)] == "requested by worker rank 2"  # worker 1 is global rank 2

    # Resume, with --timeout-s 10; once it is past s, SIGKILL worker 1.
    cfg2 = with_port(
        make_config(
            tmp_path, "kill", arch="ps", mode="async", num_workers=2, stop_step=BIG,
            timeout_s=TIMEOUT_S,
        )
    )  # fmt: skip
    with reap(start_job(cfg2)) as procs:
        wait_for_iterations(cfg2.metrics, 30, procs=procs)
        procs[2].kill()
        codes = wait_all(procs[:2], KILL_DEADLINE_S)
    assert codes == [1, 1]

    records = read_records(cfg2.metrics)
    starts = [r["step"] for r in of_type(records, "event", "ps", 0) if r["event"] == "start"]
    assert starts == [s]
    steps = steps_of(records, "worker")  # a SIGKILLed worker loses its unflushed lines
    assert min(steps) == s and max(Counter(steps).values()) == 1
    errors = {(r["role"], r["rank"]): r["error"] for r in of_type(records, "error")}
    assert set(errors) == {("ps", 0), ("worker", 0)}
    # Either gloo saw the connection reset, or PS 0's deadline on worker 1 ran out.
    assert "peer" in errors[("ps", 0)]
    assert latest_step(cfg2.checkpoint_dir) == s  # a failed run writes no checkpoint


def test_sigterm_to_one_ddp_rank_or_the_process_group_checkpoints_and_resumes(
    tmp_path: Path,
) -> None:
    cfg = with_port(make_config(tmp_path, "term", arch="allreduce", num_workers=2, stop_step=BIG))
    with reap(start_job(cfg)) as procs:
        ranks = torchrun_ranks(procs[0], 2)
        wait_for_iterations(cfg.metrics, 40, procs=procs)
        ranks[1].send_signal(signal.SIGTERM)
        codes = wait_all(procs, STOP_DEADLINE_S)
    assert codes == [0]  # torchrun: both ranks succeeded
    records = read_records(cfg.metrics)
    assert of_type(records, "error") == []
    s = latest_step(cfg.checkpoint_dir)
    assert s is not None and 0 < s < BIG
    for rank in (0, 1):
        assert steps_of(records, "rank", rank) == list(range(s))
    assert checkpoint(cfg).data_cursor == 2 * s
    stopped_by = {r["rank"]: r["stopped_by"] for r in of_type(records, "summary", "rank")}
    assert stopped_by == {0: "requested by a peer", 1: "signal SIGTERM"}

    # Resume from s; then SIGTERM torchrun's whole process group, as an agent stops a task.
    cfg2 = with_port(
        make_config(tmp_path, "resume", arch="allreduce", num_workers=2, stop_step=BIG)
    )
    with reap(start_job(cfg2)) as procs:
        wait_for_iterations(cfg2.metrics, 20, procs=procs)
        os.killpg(procs[0].pid, signal.SIGTERM)
        codes = wait_all(procs, STOP_DEADLINE_S)
    # torchrun re-raises the signal as SignalException (exit 1) whatever its ranks did ...
    assert codes == [1]
    # ... but both ranks stopped at one step, checkpointed and returned cleanly.
    records = read_records(cfg2.metrics)
    assert of_type(records, "error") == []
    s2 = latest_step(cfg2.checkpoint_dir)
    assert s2 is not None and s < s2 < BIG
    for rank in (0, 1):
        assert steps_of(records, "rank", rank) == list(range(s, s2))
    summaries = of_type(records, "summary", "rank")
    assert len(summaries) == 2
    assert all(r["final_step"] == s2 and r["stopped_by"] == "signal SIGTERM" for r in summaries)
    assert checkpoint(cfg2).data_cursor == 2 * s2


# SIGKILL ------------------------------------------------------------------------------------
def test_ps_deadline_on_workers_that_owe_a_message() -> None:
    """The check behind the PS SIGKILL case when gloo does not notice the lost worker
    (or the worker hangs): a receive from any source keeps returning while one worker
    pushes, so PS 0 checks every other worker's deadline after each message."""
    now = time.monotonic()
    _check_owed({1: now, 2: now - TIMEOUT_S / 2}, TIMEOUT_S)  # all within the deadline
    with pytest.raises(RuntimeError, match=r"worker rank 2 sent nothing .* lost peer"):
        _check_owed({1: now, 2: now - TIMEOUT_S - 1}, TIMEOUT_S)


def test_killed_ddp_rank_fails_the_job_within_the_timeout(tmp_path: Path) -> None:
    cfg = with_port(
        make_config(
            tmp_path, "kill", arch="allreduce", num_workers=2, stop_step=BIG, timeout_s=TIMEOUT_S
        )
    )
    with reap(start_job(cfg)) as procs:
        ranks = torchrun_ranks(procs[0], 2)
        wait_for_iterations(cfg.metrics, 40, procs=procs)
        ranks[1].kill()
        codes = wait_all(procs, KILL_DEADLINE_S)
        assert not ranks[0].is_running()
    assert codes == [1]  # torchrun: a rank failed (ChildFailedError)
    errors = {
        (r["role"], r["rank"]): r["error"] for r in of_type(read_records(cfg.metrics), "error")
    }
    assert set(errors) == {("rank", 0)}
    assert latest_step(cfg.checkpoint_dir) is None


def test_stop_flag_turns_sigterm_and_a_first_sigint_into_a_stop() -> None:
    """SIGINT too: Ctrl-C on `mlsched train` reaches every process of the job, which must
    stop and checkpoint rather than die of KeyboardInterrupt mid-step."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        flag = StopFlag().install()
        assert not flag
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # the handler runs between bytecodes of this thread
        assert flag and flag.reason == "signal SIGINT"
        with pytest.raises(KeyboardInterrupt):  # a second Ctrl-C interrupts at once
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
        flag = StopFlag().install()
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        assert flag and flag.reason == "signal SIGTERM"
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def test_a_trainer_whose_launcher_dies_stops_and_checkpoints(tmp_path: Path) -> None:
    """An agent that crashes must not leave its trainers running unsupervised."""
    cfg = with_port(make_config(tmp_path, "orphan", arch="allreduce", stop_step=100_000))
    # A launcher that starts the trainer and then waits: killing it orphans the trainer.
    trainer = " ".join(f"'{a}'" for a in [PYTHON, "-m", "mlsched.trainers", *cfg.to_args()])
    launcher = start(["sh", "-c", f"{trainer} & echo $! > {tmp_path / 'pid'}; wait"])
    try:
        wait_for_iterations(cfg.metrics, 3, procs=[launcher])
        os.killpg(launcher.pid, 0)  # still alive
        launcher.kill()  # SIGKILL the launcher only (the trainer is its child, same group)
        launcher.wait(timeout=10)
        pid = int((tmp_path / "pid").read_text())
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.2)
        else:
            os.kill(pid, signal.SIGKILL)
            raise AssertionError("the orphaned trainer kept running")
        records = read_records(cfg.metrics)
        summary = [r for r in records if r.get("type") == "summary"]
        assert summary and "launcher" in summary[-1]["stopped_by"]
        assert [r for r in records if r.get("event") == "checkpoint"]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(launcher.pid, signal.SIGKILL)
