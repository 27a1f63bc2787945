"""Agents' reports as plain data: the controller's serde edge and the persisted form of a
report, which the protocol cannot change behind the state file's back."""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory

from mlsched.agent import serde as agent_serde
from mlsched.controller import serde
from mlsched.controller.runs import Generation, JobRun
from mlsched.core.reports import (
    MEASUREMENT_KEYS,
    REPORT_KEYS,
    TaskMeasurement,
    TaskReport,
    TaskState,
)
from mlsched.v1 import agent_pb2, common_pb2, train_pb2

# The persisted layout of format 1, spelled out: changing it is changing the state file.
PERSISTED_REPORT = {
    "v", "task_id", "job_id", "state", "generation", "pid", "exit_code", "exit_reason",
    "cpu_percent", "rss_bytes", "log_path", "measurement",
}  # fmt: skip
PERSISTED_MEASUREMENT = {
    "iterations", "timed_iterations", "compute_time_s", "comm_time_s", "bytes_sent",
    "bytes_recv", "last_loss", "last_step", "first_iteration_unix", "last_iteration_unix",
    "start_step", "checkpoint_step", "checkpoint_cursor",
}  # fmt: skip


def _status(**over: Any) -> agent_pb2.TaskStatus:
    """A status with every field the controller reads set to a distinct non-default value."""
    msg = agent_pb2.TaskStatus(
        task_id="j.g2.r0", job_id="j", state=agent_pb2.TASK_STATE_EXITED, pid=4242,
        exit_code=3, exit_reason="error: boom", cpu_percent=12.5, rss_bytes=2**40,
        log_path="/logs/j.g2.r0.log", generation=2,
        measurement=agent_pb2.TaskMeasurement(
            iterations=40, compute_time_s=1.25, comm_time_s=0.5, bytes_sent=1e9,
            bytes_recv=2e9, last_loss=0.75, last_step=59, last_iteration_unix=1700000001.5,
            timed_iterations=38, start_step=20, checkpoint_step=50, checkpoint_cursor=100,
            first_iteration_unix=1700000000.25,
        ),
    )  # fmt: skip
    for k, v in over.items():
        setattr(msg, k, v)
    return msg


def _message_with_extra_field() -> Any:
    """The TaskStatus message class of a later protocol: one more field (number 99)."""
    pool = descriptor_pool.DescriptorPool()
    for module in (common_pb2, train_pb2, agent_pb2):
        proto = descriptor_pb2.FileDescriptorProto()
        module.DESCRIPTOR.CopyToProto(proto)
        if module is agent_pb2:
            (status,) = [m for m in proto.message_type if m.name == "TaskStatus"]
            status.field.add(
                name="gpu_util_percent",
                number=99,
                json_name="gpuUtilPercent",
                type=descriptor_pb2.FieldDescriptorProto.TYPE_DOUBLE,
                label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
            )
        pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("mlsched.v1.TaskStatus"))


def test_a_status_converts_to_a_report_and_back_without_loss() -> None:
    msg = _status()
    report = serde.report_from_proto(msg)
    assert report.state is TaskState.EXITED and report.exited and report.failed
    assert report.measurement.checkpoint_step == 50 and report.measurement.last_step == 59
    assert report.rss_bytes == 2**40 and report.generation == 2
    assert agent_serde.report_to_proto(report) == msg


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        (agent_pb2.TASK_STATE_UNSPECIFIED, TaskState.UNKNOWN),
        (agent_pb2.TASK_STATE_STARTING, TaskState.STARTING),
        (agent_pb2.TASK_STATE_RUNNING, TaskState.RUNNING),
        (agent_pb2.TASK_STATE_STOPPING, TaskState.STOPPING),
        (agent_pb2.TASK_STATE_EXITED, TaskState.EXITED),
        (17, TaskState.UNKNOWN),  # a state a later agent may send
    ],
)
def test_task_states_map_one_to_one(state: int, expected: TaskState) -> None:
    assert serde.report_from_proto(agent_pb2.TaskStatus(task_id="t", state=state)).state is expected


def test_exit_code_and_reason_decide_what_is_a_failure() -> None:
    assert not serde.report_from_proto(_status(exit_code=0, exit_reason="stopped")).failed
    assert not serde.report_from_proto(_status(exit_code=1, exit_reason="completed")).failed
    assert serde.report_from_proto(_status(exit_code=-9, exit_reason="killed")).failed
    running = _status(state=agent_pb2.TASK_STATE_RUNNING, exit_code=1)
    assert not serde.report_from_proto(running).failed


def test_a_heartbeat_carries_its_reports_and_telemetry_only_when_sent() -> None:
    req = agent_pb2.HeartbeatRequest(agent_id="a0", tasks=[_status(), _status(task_id="x")])
    beat = serde.heartbeat_from_proto(req)
    assert [t.task_id for t in beat.tasks] == ["j.g2.r0", "x"] and beat.telemetry is None
    req.telemetry.cpu_percent = 50.0
    req.telemetry.gpus.add(index=1, util_percent=90.0, mem_used_bytes=7)
    req.telemetry.nvml = True
    tele = serde.heartbeat_from_proto(req).telemetry
    assert tele is not None and tele.cpu_percent == 50.0 and tele.nvml
    assert [(g.index, g.util_percent, g.mem_used_bytes) for g in tele.gpus] == [(1, 90.0, 7)]


def test_the_persisted_report_has_exactly_the_format_keys() -> None:
    stored = serde.report_from_proto(_status()).to_dict()
    assert set(stored) == PERSISTED_REPORT == REPORT_KEYS
    assert set(stored["measurement"]) == PERSISTED_MEASUREMENT == MEASUREMENT_KEYS
    assert stored["v"] == 1 and stored["state"] == "exited"
    # The format lists cover the dataclasses: a new field is a deliberate format change.
    assert {f.name for f in fields(TaskReport)} == REPORT_KEYS - {"v"}
    assert {f.name for f in fields(TaskMeasurement)} == MEASUREMENT_KEYS
    # The serde modules convert the measurement by name, both ways.
    assert set(agent_pb2.TaskMeasurement.DESCRIPTOR.fields_by_name) == MEASUREMENT_KEYS


def test_a_field_added_to_the_protocol_does_not_change_the_persisted_run() -> None:
    later = _message_with_extra_field()
    msg = later.FromString(_status().SerializeToString())
    msg.gpu_util_percent = 87.5
    # What the message-to-JSON persistence stored would have changed with the protocol ...
    assert "gpuUtilPercent" in json_format.MessageToDict(msg)
    # ... what the run stores does not.
    gen = Generation(
        number=2, layout=(("a0", 1, 0),), start_step=20, start_cursor=40, stop_step=70, ups=2,
        tasks={}, agent_of={"j.g2.r0": "a0"}, ports=[],
    )  # fmt: skip
    gen.final["j.g2.r0"] = serde.report_from_proto(msg)
    with_extra = gen.to_dict()["final"]["j.g2.r0"]
    gen.final["j.g2.r0"] = serde.report_from_proto(_status())
    assert with_extra == gen.to_dict()["final"]["j.g2.r0"]
    assert set(with_extra) == PERSISTED_REPORT


def test_a_persisted_run_reloads_its_final_reports() -> None:
    run = JobRun("j", step=20, cursor=40, generations=2)
    run.gen = Generation(
        number=2, layout=(("a0", 1, 0),), start_step=20, start_cursor=40, stop_step=70, ups=2,
        tasks={}, agent_of={"j.g2.r0": "a0", "j.g2.r1": "a0"}, ports=[("h", 29500)],
    )  # fmt: skip
    run.gen.final = {
        "j.g2.r0": serde.report_from_proto(_status()),
        "j.g2.r1": TaskReport("j.g2.r1"),  # a placeholder: nothing reported yet
    }
    again = JobRun.from_dict("j", json.loads(json.dumps(run.to_dict())))
    assert again.gen is not None and again.gen.final == run.gen.final


# A run as the previous release stored it: the TaskStatus message through json_format
# (camelCase, defaults left out, int64 as strings, the state's enum name).
LEGACY_RUN = {
    "step": 10, "cursor": 20, "reported_units": 20.0, "generations": 2, "finished": False,
    "failures": 1, "failed_generations": 1, "lost_steps": 5, "last_failure": "task x: lost",
    "seen": {"j.g2.r0": [18.0, 1.0, 0.5, 0.0, 0.0]},
    "gen": {
        "number": 2, "layout": [["a0", 1, 0]], "start_step": 10, "start_cursor": 20,
        "stop_step": 50, "ups": 2, "tasks": {"j.g2.r0": {
            "taskId": "j.g2.r0", "jobId": "j", "role": "TASK_ROLE_RANK", "numWorkers": 2,
            "rendezvous": "127.0.0.1:29500", "stopStep": "50", "checkpointDir": "/c/j",
            "model": "mlp", "arch": "allreduce", "mode": "sync", "backend": "ddp",
            "batchSize": 16, "lr": 0.05, "dataset": "synthetic", "numSamples": "2048",
            "imageSize": 32, "threads": 1, "device": "auto", "timeoutS": 60.0,
            "generation": 2, "checkpointEverySteps": "0",
        }},
        "agent_of": {"j.g2.r0": "a0", "j.g2.r1": "a0"}, "ports": [["127.0.0.1", 29500]],
        "launched_at": 1000.0, "trigger_at": None, "draining": True, "failed": "",
        "restart_reported": True,
        "final": {
            "j.g2.r0": {
                "taskId": "j.g2.r0", "jobId": "j", "state": "TASK_STATE_EXITED", "pid": 12,
                "exitCode": 1, "exitReason": "error: x", "cpuPercent": 1.5, "rssBytes": "10",
                "logPath": "/l", "generation": 2,
                "measurement": {
                    "iterations": "20", "computeTimeS": 1.0, "lastStep": "29",
                    "lastIterationUnix": 1001.5, "timedIterations": "18",
                    "checkpointStep": "25", "checkpointCursor": "50",
                    "firstIterationUnix": 1000.5, "lastLoss": "NaN",
                },
            },
            "j.g2.r1": {"taskId": "j.g2.r1", "state": "TASK_STATE_EXITED"},
        },
    },
}  # fmt: skip


def test_a_run_stored_by_the_previous_release_still_loads() -> None:
    run = JobRun.from_dict("j", json.loads(json.dumps(LEGACY_RUN)))
    assert run.gen is not None and (run.step, run.lost_steps) == (10, 5)
    task = run.gen.tasks["j.g2.r0"]  # a flat TaskSpec of old: one process, run directly
    assert (task.node.launcher.value, task.generation, task.config.rank) == ("direct", 2, 0)
    assert (task.config.stop_step, task.config.num_samples, task.config.momentum) == (50, 2048, 0.9)
    r0, r1 = run.gen.final["j.g2.r0"], run.gen.final["j.g2.r1"]
    assert r0.failed and (r0.exit_code, r0.exit_reason, r0.pid) == (1, "error: x", 12)
    m = r0.measurement
    assert (m.iterations, m.last_step, m.timed_iterations) == (20, 29, 18)
    assert (m.checkpoint_step, m.checkpoint_cursor, m.start_step) == (25, 50, 0)
    assert (m.compute_time_s, m.comm_time_s, m.first_iteration_unix) == (1.0, 0.0, 1000.5)
    assert m.last_loss != m.last_loss  # NaN
    assert r0.rss_bytes == 10 and r0.log_path == "/l" and r0.generation == 2
    # Left out: the message's defaults (0), as the old reader saw them; exit 0 is success.
    assert r1.exited and not r1.failed and r1.job_id == ""
    assert (r1.measurement.checkpoint_step, r1.measurement.checkpoint_cursor) == (0, 0)
    # Written back, the run is in the current format and reads the same.
    stored = run.to_dict()
    assert set(stored["gen"]["final"]["j.g2.r0"]) == PERSISTED_REPORT
    assert JobRun.from_dict("j", stored).gen.final["j.g2.r1"] == r1  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "damage",
    [
        {"v": 2},  # a later format
        {"state": "flying"},
        {"exit_code": "one"},
        {"task_id": 7},
        {"pid": True},
        {"measurement": [1, 2]},
    ],
)
def test_a_damaged_stored_report_raises(damage: dict[str, Any]) -> None:
    stored = {**serde.report_from_proto(_status()).to_dict(), **damage}
    with pytest.raises((ValueError, TypeError)):
        TaskReport.from_dict(stored)


@pytest.mark.parametrize(
    "damage",
    [{"state": "TASK_STATE_FLYING"}, {"exitCode": "x"}, {"measurement": "m"}, {"taskId": 1}],
)
def test_a_damaged_legacy_report_raises(damage: dict[str, Any]) -> None:
    with pytest.raises((ValueError, TypeError)):
        TaskReport.from_dict({"taskId": "t", "state": "TASK_STATE_EXITED", **damage})


def test_a_damaged_stored_report_is_missing_a_key() -> None:
    stored = serde.report_from_proto(_status()).to_dict()
    del stored["measurement"]["checkpoint_step"]
    with pytest.raises(KeyError):
        TaskReport.from_dict(stored)
