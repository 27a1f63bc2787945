"""What the controller tells clients: plain data, converted to messages at the service edge."""

from __future__ import annotations

from dataclasses import fields

from mlsched.controller import serde
from mlsched.controller.status import AgentStatus, ClusterStatus, JobStatus, PlacementEntry
from mlsched.v1 import jobs_pb2


def test_a_job_status_converts_field_for_field() -> None:
    status = JobStatus(
        job_id="j", state="running", reason="moving", arrival_slot=3, progress=12.5,
        total_work=100.0, completion_slot=-1, utility=2.5,
        placement=(PlacementEntry("a0", 2, 0), PlacementEntry("a1", 1, 1)), restarts=4,
        predicted_iteration_s=0.25, measured_iteration_s=0.3, price=7.0, slots_run=5,
        iterations=99, admitted=True, admitted_slot=3, failed_generations=2, lost_steps=11,
        checkpoint_step=40,
    )  # fmt: skip
    msg = serde.job_status_to_proto(status)
    for f in fields(JobStatus):
        if f.name != "placement":
            assert getattr(msg, f.name) == getattr(status, f.name), f.name
    assert [(p.agent_id, p.workers, p.ps) for p in msg.placement] == [("a0", 2, 0), ("a1", 1, 1)]
    # Every field of the message has its counterpart (a new one is exposed deliberately).
    assert {f.name for f in jobs_pb2.JobStatus.DESCRIPTOR.fields} == {
        f.name for f in fields(JobStatus)
    }
    assert serde.job_status_to_proto(JobStatus("p", "pending")) == jobs_pb2.JobStatus(
        job_id="p", state="pending"
    )
    # A client renders plain data: the message converts back to the same status.
    assert serde.job_status_from_proto(msg) == status


def test_a_cluster_status_converts_with_its_agents() -> None:
    status = ClusterStatus(
        slot=7,
        slot_seconds=30.0,
        policy="oasis",
        agents=(
            AgentStatus("a0", "10.0.0.1", True, 0.5, 3, {"gpu": 2.0}, {"gpu": 1.0}, "V100"),
            AgentStatus("a1", "10.0.0.2", False, 40.0, 0),
        ),
        model_error_mean_abs=0.125,
        model_error_samples=8,
    )
    msg = serde.cluster_status_to_proto(status)
    assert (msg.slot, msg.slot_seconds, msg.policy) == (7, 30.0, "oasis")
    assert (msg.model_error_mean_abs, msg.model_error_samples) == (0.125, 8)
    a0, a1 = msg.agents
    assert (a0.agent_id, a0.name, a0.host, a0.alive, a0.tasks) == ("a0", "a0", "10.0.0.1", True, 3)
    assert dict(a0.capacity.amounts) == {"gpu": 2.0} and dict(a0.used.amounts) == {"gpu": 1.0}
    assert (a0.gpu_type, a0.last_heartbeat_age_s) == ("V100", 0.5)
    assert (a1.alive, a1.last_heartbeat_age_s, dict(a1.used.amounts)) == (False, 40.0, {})
    assert serde.cluster_status_from_proto(msg) == status


def test_the_status_tables_render_plain_statuses() -> None:
    """``mlsched status`` renders domain types: a paused job's reason, prices only where a
    price was put to the user, an agent's capacity and what is in use."""
    from mlsched.controller.tables import cluster_summary, decision_line, job_table

    job = JobStatus(
        "j1", "paused", reason="not allocated this slot", progress=25.0, total_work=100.0,
        placement=(PlacementEntry("a0", 2, 1),), quote_decision="accepted", price=4.2,
        worker_price=0.35, ps_price=0.21, admitted=True, admitted_slot=3, launch="ps",
        owner="alice",
    )  # fmt: skip
    table = job_table([job, JobStatus("j2", "pending")])
    lines = table.splitlines()
    assert lines[2].split()[:4] == ["j1", "alice", "ps", "paused"] and "a0:2w1ps" in lines[2]
    assert "25.0%" in lines[2] and "4.2" in lines[2]
    assert lines[3].strip() == "not allocated this slot"
    assert lines[4].split()[:4] == ["j2", "-", "-", "pending"]
    assert decision_line(job) == (
        "j1: quoted 4.2 (worker 0.35, PS 0.21 per unit): accepted, admitted in slot 3 (paused)"
    )
    summary = cluster_summary(
        ClusterStatus(
            7, 30.0, "oasis", (AgentStatus("a0", "h", True, 0.1, 2, {"gpu": 2.0}, {"gpu": 1.0}),)
        )
    )
    assert "policy oasis" in summary and "capacity gpu=2" in summary and "in use gpu=1" in summary
