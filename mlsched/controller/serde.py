"""The controller's edge: gRPC messages <-> the plain data it works on.

Only the services (``services.py``) and this module handle messages of the agent protocol
and the job service; the registry, the cluster executor, the slot loop and the store see
the dataclasses of ``reports.py`` (what agents report), ``agents.py`` (who they are) and
``status.py`` (what the controller tells clients). A message field that is not converted
here never reaches the controller's state or its SQLite file.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import fields
from typing import TYPE_CHECKING, Any

from mlsched.controller.agents import DEFAULT_NIC_GBPS, AgentInfo
from mlsched.controller.probes import ProbeStatus
from mlsched.controller.status import (
    AgentGpu,
    AgentStatus,
    ClusterStatus,
    JobStatus,
    PlacementEntry,
)
from mlsched.core.errors import SpecError
from mlsched.core.fields import check_number
from mlsched.core.ids import check_id, check_text
from mlsched.core.limits import MAX_RESOURCE, Bound
from mlsched.core.reports import (
    GPU_COUNTERS,
    GpuTelemetry,
    Heartbeat,
    TaskMeasurement,
    TaskReport,
    TaskState,
    Telemetry,
)
from mlsched.core.task_logs import (
    MAX_LOG_CHUNK,
    MAX_LOG_ERROR,
    MAX_LOG_OFFSET,
    MAX_LOG_REQUESTS,
    MAX_TASK_ID_LEN,
    LogChunk,
    LogRequest,
    check_range,
)
from mlsched.perfmodel.profile import cell_dict
from mlsched.v1 import agent_pb2, jobs_pb2

if TYPE_CHECKING:
    from mlsched.controller.logs import TaskLog

__all__ = [
    "agent_info_from_proto",
    "cluster_status_from_proto",
    "cluster_status_to_proto",
    "heartbeat_from_proto",
    "job_status_from_proto",
    "job_status_to_proto",
    "log_chunks_from_proto",
    "log_request_to_proto",
    "report_from_proto",
    "task_log_to_proto",
]

_STATES = {
    agent_pb2.TASK_STATE_STARTING: TaskState.STARTING,
    agent_pb2.TASK_STATE_RUNNING: TaskState.RUNNING,
    agent_pb2.TASK_STATE_STOPPING: TaskState.STOPPING,
    agent_pb2.TASK_STATE_EXITED: TaskState.EXITED,
}
_STATE_NUMBERS = {v: k for k, v in _STATES.items()}


# Agent protocol -------------------------------------------------------------------------
def report_from_proto(msg: agent_pb2.TaskStatus) -> TaskReport:
    m = msg.measurement
    return TaskReport(
        task_id=msg.task_id,
        job_id=msg.job_id,
        state=_STATES.get(msg.state, TaskState.UNKNOWN),
        generation=msg.generation,
        pid=msg.pid,
        exit_code=msg.exit_code,
        exit_reason=msg.exit_reason,
        # Same field names on both sides (tests/test_reports.py keeps them so).
        measurement=TaskMeasurement(
            **{f.name: getattr(m, f.name) for f in fields(TaskMeasurement)}
        ),
        cpu_percent=msg.cpu_percent,
        rss_bytes=msg.rss_bytes,
        log_path=msg.log_path,
    )


def _present(msg: Any, name: str) -> Any:
    """An optional field's value, None when the sender left it out."""
    return getattr(msg, name) if msg.HasField(name) else None


def telemetry_from_proto(msg: agent_pb2.Telemetry) -> Telemetry:
    return Telemetry(
        cpu_percent=msg.cpu_percent,
        mem_used_bytes=msg.mem_used_bytes,
        net_sent_bytes=_present(msg, "net_sent_bytes"),
        net_recv_bytes=_present(msg, "net_recv_bytes"),
        gpus=tuple(
            GpuTelemetry(
                index=g.index,
                uuid=g.uuid[:96],
                **{name: _present(g, name) for name in GPU_COUNTERS},
            )
            for g in msg.gpus[:MAX_GPUS]
        ),
        nvml=msg.nvml,
        net_interface=msg.net_interface,
        sampled_unix=msg.sampled_unix,
        ib_sent_bytes=_present(msg, "ib_sent_bytes"),
        ib_recv_bytes=_present(msg, "ib_recv_bytes"),
    )


def heartbeat_from_proto(req: agent_pb2.HeartbeatRequest) -> Heartbeat:
    return Heartbeat(
        agent_id=req.agent_id,
        tasks=tuple(report_from_proto(t) for t in req.tasks),
        telemetry=telemetry_from_proto(req.telemetry) if req.HasField("telemetry") else None,
    )


def agent_info_from_proto(req: agent_pb2.RegisterRequest) -> AgentInfo:
    """Validate a registration; errors name the field."""
    check_id(req.name, "name")
    check_text(req.host, "host", max_len=255)
    for name, text in (("rack", req.rack), ("gpu_type", req.gpu_type), ("version", req.version)):
        if text:
            check_text(text, name, max_len=64)
    if len(req.capacity.amounts) > 32:
        raise SpecError("capacity", f"{len(req.capacity.amounts)} resources", "at most 32")
    capacity = {
        check_id(k, "capacity", max_len=64): float(
            check_number(v, f"capacity.{k}", Bound(0.0, MAX_RESOURCE))
        )
        for k, v in req.capacity.amounts.items()
    }
    check_number(req.nic_gbps, "nic_gbps", Bound(0.0, MAX_RESOURCE))
    pool = req.pool or "both"
    if pool not in ("worker", "ps", "both"):
        raise SpecError("pool", pool, "one of worker, ps, both")
    lo, hi = (req.port_lo, req.port_hi) if req.port_lo or req.port_hi else (29500, 29999)
    if not 1024 <= lo <= hi <= 65535:
        raise SpecError("port_lo", f"{lo}-{hi}", "a port range within 1024-65535")
    if len(req.gpus) > MAX_GPUS:
        raise SpecError("gpus", f"{len(req.gpus)} GPUs", f"at most {MAX_GPUS}")
    gpus = []
    for i, g in enumerate(req.gpus):
        for name, text in (("type", g.type), ("uuid", g.uuid), ("name", g.name)):
            if text:
                check_text(text, f"gpus[{i}].{name}", max_len=96)
        check_number(g.memory_bytes, f"gpus[{i}].memory_bytes", Bound(0, 2**50))
        gpus.append({"index": g.index, "uuid": g.uuid, "model": g.type,
                     "memory_bytes": g.memory_bytes})  # fmt: skip
    # No type declared: the GPUs' model (the agent refuses GPUs of several models).
    gpu_type = req.gpu_type or (req.gpus[0].type if req.gpus else "") or None
    if gpu_type is not None:
        check_text(gpu_type, "gpu_type", max_len=64)
    return AgentInfo(
        agent_id=req.name,
        host=req.host,
        capacity=capacity,
        pool=pool,
        rack=req.rack or "rack0",
        gpu_type=gpu_type,
        nic_gbps=req.nic_gbps or DEFAULT_NIC_GBPS,
        real_gpus=req.real_gpus,
        gpu_count=int(capacity.get("gpu", len(req.gpus))),
        port_lo=lo,
        port_hi=hi,
        version=req.version,
        gpus=gpus,
    )


#: GPUs (MIG instances included) one registration may list.
MAX_GPUS = 256


def _log_chunk_from_proto(msg: agent_pb2.LogChunk) -> LogChunk:
    if msg.error:
        # Shown to the client: printable and bounded, whatever the agent sent.
        text = "".join(c if c.isprintable() else "?" for c in msg.error[:MAX_LOG_ERROR])
        return LogChunk(msg.request_id, msg.task_id[:MAX_TASK_ID_LEN], error=text)
    if msg.task_id:
        check_id(msg.task_id, "logs.task_id", max_len=MAX_TASK_ID_LEN)
    check_range(msg.offset, 0)
    if len(msg.data) > MAX_LOG_CHUNK:
        raise SpecError("logs.data", f"{len(msg.data)} bytes", f"at most {MAX_LOG_CHUNK} bytes")
    if not 0 <= msg.size <= MAX_LOG_OFFSET + MAX_LOG_CHUNK:
        raise SpecError("logs.size", msg.size, "a length within the offsets' bound")
    return LogChunk(msg.request_id, msg.task_id, msg.offset, msg.data, msg.size, msg.ended)


def log_chunks_from_proto(msgs: Sequence[agent_pb2.LogChunk]) -> list[LogChunk]:
    """An agent's answers to log requests (the first :data:`MAX_LOG_REQUESTS`); a malformed
    one becomes an error answer to its request, so the waiting client hears why."""
    out: list[LogChunk] = []
    for msg in msgs[:MAX_LOG_REQUESTS]:
        try:
            out.append(_log_chunk_from_proto(msg))
        except SpecError as err:
            out.append(LogChunk(msg.request_id, "", error=f"the agent's answer is invalid: {err}"))
    return out


def log_request_to_proto(r: LogRequest) -> agent_pb2.LogRequest:
    return agent_pb2.LogRequest(
        request_id=r.request_id, task_id=r.task_id, offset=r.offset, max_bytes=r.max_bytes
    )


# Job service ----------------------------------------------------------------------------
def task_log_to_proto(log: TaskLog) -> jobs_pb2.GetTaskLogResponse:
    c = log.chunk
    return jobs_pb2.GetTaskLogResponse(
        job_id=log.job_id,
        task_id=log.task_id,
        agent_id=log.agent_id,
        offset=c.offset,
        data=c.data,
        next_offset=c.next_offset,
        size=max(c.size, c.next_offset),
        ended=c.ended,
        job_state=log.job_state,
        latest_task_id=log.latest_task_id,
        task_ids=list(log.task_ids),
    )


def job_status_to_proto(s: JobStatus) -> jobs_pb2.JobStatus:
    # Same field names on both sides (tests/test_status.py keeps them so).
    out = jobs_pb2.JobStatus(
        **{f.name: getattr(s, f.name) for f in fields(JobStatus) if f.name != "placement"}
    )
    for p in s.placement:
        out.placement.add(agent_id=p.agent_id, workers=p.workers, ps=p.ps)
    return out


def probe_status_to_proto(s: ProbeStatus) -> jobs_pb2.ProbeStatus:
    out = jobs_pb2.ProbeStatus(
        probe_id=s.probe_id,
        state=s.state,
        phase=s.phase,
        error=s.error,
        cell_json=json.dumps(cell_dict(s.cell)) if s.cell is not None else "",
        device_type=s.device_type,
    )
    for agent, workers, ps in s.layout:
        out.layout.add(agent_id=agent, workers=workers, ps=ps)
    return out


def cluster_status_to_proto(s: ClusterStatus) -> jobs_pb2.GetClusterStatusResponse:
    out = jobs_pb2.GetClusterStatusResponse(
        slot=s.slot,
        slot_seconds=s.slot_seconds,
        policy=s.policy,
        model_error_mean_abs=s.model_error_mean_abs,
        model_error_samples=s.model_error_samples,
        revenue=s.revenue,
        quotes=s.quotes,
        quotes_accepted=s.quotes_accepted,
    )
    for a in s.agents:
        entry = out.agents.add(
            agent_id=a.agent_id,
            name=a.agent_id,
            host=a.host,
            alive=a.alive,
            last_heartbeat_age_s=a.last_heartbeat_age_s,
            tasks=a.tasks,
            gpu_type=a.gpu_type,
        )
        entry.capacity.amounts.update(a.capacity)
        entry.used.amounts.update(a.used)
        for g in a.gpus:
            gpu = entry.gpus.add(index=g.index, uuid=g.uuid, model=g.model)
            for name in _AGENT_GPU_COUNTERS:
                value = getattr(g, name)
                if value is not None:
                    setattr(gpu, name, value)
    return out


_AGENT_GPU_COUNTERS = ("util_percent", "mem_used_bytes", "mem_total_bytes", "power_w")


def job_status_from_proto(msg: jobs_pb2.JobStatus) -> JobStatus:
    """The inverse of :func:`job_status_to_proto` (a client renders plain data)."""
    values = {f.name: getattr(msg, f.name) for f in fields(JobStatus) if f.name != "placement"}
    placement = tuple(PlacementEntry(p.agent_id, p.workers, p.ps) for p in msg.placement)
    return JobStatus(**values, placement=placement)


def cluster_status_from_proto(msg: jobs_pb2.GetClusterStatusResponse) -> ClusterStatus:
    """The inverse of :func:`cluster_status_to_proto`."""
    agents = tuple(
        AgentStatus(
            agent_id=a.agent_id,
            host=a.host,
            alive=a.alive,
            last_heartbeat_age_s=a.last_heartbeat_age_s,
            tasks=a.tasks,
            capacity=dict(a.capacity.amounts),
            used=dict(a.used.amounts),
            gpu_type=a.gpu_type,
            gpus=tuple(
                AgentGpu(
                    index=g.index,
                    uuid=g.uuid,
                    model=g.model,
                    **{n: _present(g, n) for n in _AGENT_GPU_COUNTERS},
                )
                for g in a.gpus
            ),
        )
        for a in msg.agents
    )
    return ClusterStatus(
        slot=msg.slot,
        slot_seconds=msg.slot_seconds,
        policy=msg.policy,
        agents=agents,
        model_error_mean_abs=msg.model_error_mean_abs,
        model_error_samples=msg.model_error_samples,
        revenue=msg.revenue,
        quotes=msg.quotes,
        quotes_accepted=msg.quotes_accepted,
    )
