"""The agent's one conversion between its plain data and the wire: its registration, the
reports of its tasks, its machine's telemetry and its answers to log requests go out as
protos; the tasks the controller wants come in as :class:`TaskOrder` (their plans
validated by :mod:`mlsched.net.task_wire`) and log requests as :class:`LogRequest`
(checked by ``agent/logs.py``). Nothing else in the agent builds or reads a proto."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict

from mlsched.agent.discovery import NodeInfo
from mlsched.agent.orders import MAX_TASK_ID_LEN, TaskOrder, local_plan
from mlsched.core.errors import SpecError
from mlsched.core.ids import check_id
from mlsched.core.reports import GPU_COUNTERS, GpuTelemetry, TaskReport, TaskState, Telemetry
from mlsched.core.task_logs import MAX_LOG_REQUESTS, LogChunk, LogRequest
from mlsched.core.tasks import TaskPlan
from mlsched.net.task_wire import task_from_proto
from mlsched.v1 import agent_pb2, common_pb2

__all__ = [
    "heartbeat_request",
    "log_requests_from_proto",
    "report_to_proto",
    "task_order",
    "task_plan",
    "telemetry_to_proto",
    "to_register_request",
]

_STATE_NUMBERS = {
    TaskState.STARTING: agent_pb2.TASK_STATE_STARTING,
    TaskState.RUNNING: agent_pb2.TASK_STATE_RUNNING,
    TaskState.STOPPING: agent_pb2.TASK_STATE_STOPPING,
    TaskState.EXITED: agent_pb2.TASK_STATE_EXITED,
}


def to_register_request(node: NodeInfo) -> agent_pb2.RegisterRequest:
    return agent_pb2.RegisterRequest(
        name=node.name,
        host=node.host,
        capacity=common_pb2.Resources(amounts=node.resources()),
        gpus=[
            common_pb2.Gpu(
                index=g.index, type=g.type, memory_bytes=g.memory_bytes, uuid=g.uuid, name=g.name
            )
            for g in node.gpus
        ],
        nic_gbps=node.nic_gbps,
        gpu_type=node.gpu_type,
        pool=node.pool,
        rack=node.rack,
        checkpoint_root=node.checkpoint_root,
        port_lo=node.ports[0],
        port_hi=node.ports[1],
        real_gpus=node.real_gpus,
        version=node.version,
    )


def report_to_proto(report: TaskReport) -> agent_pb2.TaskStatus:
    m = report.measurement
    return agent_pb2.TaskStatus(
        task_id=report.task_id,
        job_id=report.job_id,
        state=_STATE_NUMBERS.get(report.state, agent_pb2.TASK_STATE_UNSPECIFIED),
        generation=report.generation,
        pid=report.pid,
        exit_code=report.exit_code,
        exit_reason=report.exit_reason,
        # Same field names on both sides (tests/test_reports.py keeps them so).
        measurement=agent_pb2.TaskMeasurement(**asdict(m)),
        cpu_percent=report.cpu_percent,
        rss_bytes=report.rss_bytes,
        log_path=report.log_path,
    )


def _gpu_to_proto(gpu: GpuTelemetry) -> agent_pb2.GpuTelemetry:
    msg = agent_pb2.GpuTelemetry(index=gpu.index, uuid=gpu.uuid)
    for name in GPU_COUNTERS:
        value = getattr(gpu, name)
        if value is not None:  # absent stays absent: never a stand-in zero
            setattr(msg, name, value)
    return msg


def telemetry_to_proto(t: Telemetry) -> agent_pb2.Telemetry:
    msg = agent_pb2.Telemetry(
        cpu_percent=t.cpu_percent,
        mem_used_bytes=t.mem_used_bytes,
        nvml=t.nvml,
        net_interface=t.net_interface,
        sampled_unix=t.sampled_unix,
        gpus=[_gpu_to_proto(g) for g in t.gpus],
    )
    if t.net_sent_bytes is not None and t.net_recv_bytes is not None:
        msg.net_sent_bytes, msg.net_recv_bytes = t.net_sent_bytes, t.net_recv_bytes
    if t.ib_sent_bytes is not None and t.ib_recv_bytes is not None:
        msg.ib_sent_bytes, msg.ib_recv_bytes = t.ib_sent_bytes, t.ib_recv_bytes
    return msg


def log_requests_from_proto(msgs: Sequence[agent_pb2.LogRequest]) -> list[LogRequest]:
    """The first :data:`MAX_LOG_REQUESTS` requests as they came; ``agent/logs.py`` checks
    each before reading anything."""
    return [
        LogRequest(m.request_id, m.task_id, m.offset, m.max_bytes) for m in msgs[:MAX_LOG_REQUESTS]
    ]


def _chunk_to_proto(c: LogChunk) -> agent_pb2.LogChunk:
    return agent_pb2.LogChunk(
        request_id=c.request_id,
        task_id=c.task_id,
        offset=c.offset,
        data=c.data,
        size=c.size,
        ended=c.ended,
        error=c.error,
    )


def heartbeat_request(
    agent_id: str,
    reports: list[TaskReport],
    telemetry: Telemetry | None = None,
    logs: Iterable[LogChunk] = (),
) -> agent_pb2.HeartbeatRequest:
    request = agent_pb2.HeartbeatRequest(
        agent_id=agent_id,
        tasks=[report_to_proto(r) for r in reports],
        logs=[_chunk_to_proto(c) for c in logs],
    )
    if telemetry is not None:
        request.telemetry.CopyFrom(telemetry_to_proto(telemetry))
    return request


def task_order(spec: agent_pb2.TaskSpec) -> TaskOrder:
    """The order behind a desired task's spec: its plan, or why the spec does not validate.

    The controller is trusted to send what it validated, but not blindly: the whole
    configuration is validated again and ids are checked. Nothing a spec holds may take
    the agent down: whatever goes wrong is this task's failure, with its reason."""
    plan: TaskPlan | None = None
    error = ""
    try:
        check_id(spec.task_id, "task_id", max_len=MAX_TASK_ID_LEN)
        plan = task_from_proto(spec)
    except SpecError as err:
        error = f"invalid task spec: {err}"
    except Exception as err:  # a spec no validation anticipated
        error = f"invalid task spec: {type(err).__name__}: {str(err)[:200]}"
    return TaskOrder(
        spec.task_id, spec.job_id, spec.generation, spec.lease_expires_unix, plan, error
    )


def task_plan(
    spec: agent_pb2.TaskSpec, *, metrics: str, real_gpus: bool, checkpoint_root: str = ""
) -> TaskPlan:
    """What ``spec`` asks this agent to run, with this agent's metrics file and device;
    raises :class:`SpecError` naming a bad field (:func:`task_order` reports it instead)."""
    check_id(spec.task_id, "task_id", max_len=MAX_TASK_ID_LEN)
    return local_plan(
        task_from_proto(spec), metrics=metrics, real_gpus=real_gpus, checkpoint_root=checkpoint_root
    )
