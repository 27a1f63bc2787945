"""The job state machine (one enum, its moves written down) and the one road by which a
failure ends a job (the executor's slot report; the engine ends it)."""

from __future__ import annotations

import pytest
from engine_helpers import make_engine
from test_engine import SLOT_S, gpu_job

from mlsched.core import Cluster, JobState
from mlsched.engine.simulator import SimulatedExecutor
from mlsched.scheduler import create


def test_the_job_state_machine_is_written_down_and_kept() -> None:
    """One enum, its moves listed: final states have none and are derived from the table;
    live states (status only) are active; the engine refuses a move the table lacks."""
    from mlsched.core.allocation import FINAL_STATES, TRANSITIONS

    assert set(TRANSITIONS) == set(JobState)
    assert set(FINAL_STATES) == {"done", "rejected", "failed", "cancelled"}
    assert JobState.PENDING.can_become(JobState.ADMITTED)
    assert not JobState.PENDING.can_become(JobState.RUNNING)  # admitted first
    assert not JobState.DONE.can_become(JobState.RUNNING) and JobState.DONE.is_final
    assert JobState.REPLACING.is_live and JobState.REPLACING.is_active
    assert not JobState.CANCELLING.can_become(JobState.RUNNING)
    for state in JobState:  # every target of a move is a state the table knows
        assert all(t in TRANSITIONS for t in TRANSITIONS[state])
        assert state.is_final == (not TRANSITIONS[state])


def test_a_fatal_failure_in_the_slot_report_ends_the_job_at_its_checkpoint(
    tiny_cluster: Cluster,
) -> None:
    """The one failure road: the executor reports a fatal failure with the checkpointed
    work; the engine keeps only that work, ends the job failed, frees its resources, and
    says so in the step's changes. A non-fatal failure only sets the reason."""
    from mlsched.engine.executor import JobFailure, SlotReport

    class Failing(SimulatedExecutor):
        fail: dict[str, JobFailure]

        def collect(self, slot: int) -> SlotReport:
            report = super().collect(slot)
            report.failures.update(self.fail)
            return report

    executor = Failing(tiny_cluster, SLOT_S)
    executor.fail = {}
    engine = make_engine(tiny_cluster, create("fifo"), slot_seconds=SLOT_S, executor=executor)
    engine.submit(gpu_job("a", chunks=100))  # far more work than three slots do
    engine.step()
    executor.fail = {"a": JobFailure("one rank crashed")}
    outcome = engine.step()
    record = engine.records["a"]
    assert record.state is JobState.RUNNING and record.reason == "one rank crashed"
    assert not [c for c in outcome.changes if c.new is JobState.FAILED]
    done = record.progress
    executor.fail = {"a": JobFailure("3 generations failed in a row", True, done / 4)}
    outcome = engine.step()
    assert record.state is JobState.FAILED and record.reason.startswith("3 generations")
    assert record.progress == pytest.approx(done / 4)  # the work since the checkpoint is lost
    assert [(c.old, c.new) for c in outcome.changes] == [(JobState.RUNNING, JobState.FAILED)]
    assert not engine.placements and not engine.used.any()
