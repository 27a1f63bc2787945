"""What agents report, as the controller holds it: plain data, free of the wire format.

The gRPC messages (``protos/mlsched/v1/agent.proto``) stop at the edge: ``serde.py`` turns
a heartbeat into these dataclasses, and everything behind it (the agent registry, the
cluster executor, the runs persisted in SQLite) works on them. A persisted report is
written from the field lists below (:data:`REPORT_KEYS`, :data:`MEASUREMENT_KEYS`, format
:data:`REPORT_FORMAT`), never from a message, so a field added to the protocol changes
nothing in the state file until it is added here deliberately.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

__all__ = [
    "GPU_COUNTERS",
    "MEASUREMENT_KEYS",
    "REPORT_FORMAT",
    "REPORT_KEYS",
    "GpuTelemetry",
    "Heartbeat",
    "TaskMeasurement",
    "TaskReport",
    "TaskState",
    "Telemetry",
]

#: The version of a persisted report's layout (``"v"``); bump it with the key lists.
REPORT_FORMAT = 1


class TaskState(str, Enum):
    UNKNOWN = "unknown"  # not reported (yet), or a state this release does not know
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    EXITED = "exited"


@dataclass(frozen=True)
class TaskMeasurement:
    """Cumulative counters of one task since it started (a lost heartbeat loses nothing:
    the controller takes differences)."""

    iterations: int = 0  # "iter" lines of the task (all of them)
    timed_iterations: int = 0  # iterations - warm-up
    compute_time_s: float = 0.0  # sums over the timed iterations
    comm_time_s: float = 0.0
    bytes_sent: float = 0.0
    bytes_recv: float = 0.0
    last_loss: float = 0.0
    last_step: int = -1  # -1 before the first iteration
    first_iteration_unix: float = 0.0
    last_iteration_unix: float = 0.0
    start_step: int = -1  # step of the trainer's "start" event (-1 until seen)
    checkpoint_step: int = -1  # step of its last checkpoint (-1: none)
    checkpoint_cursor: int = -1  # data cursor (mini-batches) of that checkpoint

    @property
    def has_checkpoint(self) -> bool:
        return self.checkpoint_cursor >= 0


@dataclass(frozen=True)
class TaskReport:
    """What an agent last reported of one task."""

    task_id: str
    job_id: str = ""
    state: TaskState = TaskState.UNKNOWN
    generation: int = 0
    pid: int = 0
    exit_code: int = 0  # valid once exited
    exit_reason: str = ""  # "completed", "stopped", "killed after grace", error text
    measurement: TaskMeasurement = field(default_factory=TaskMeasurement)
    cpu_percent: float = 0.0
    rss_bytes: int = 0
    log_path: str = ""

    @property
    def exited(self) -> bool:
        return self.state is TaskState.EXITED

    @property
    def failed(self) -> bool:
        """Exited with an error (a task stopped on request exits 0 or "completed")."""
        return self.exited and self.exit_code != 0 and self.exit_reason != "completed"

    def to_dict(self) -> dict[str, Any]:
        """The persisted form: exactly :data:`REPORT_KEYS`, its measurement exactly
        :data:`MEASUREMENT_KEYS`."""
        out: dict[str, Any] = {"v": REPORT_FORMAT}
        for name in _REPORT_FIELDS:
            out[name] = getattr(self, name)
        out["state"] = self.state.value
        out["measurement"] = {name: getattr(self.measurement, name) for name in _MEASUREMENT_TYPES}
        return out

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> TaskReport:
        """A report as :meth:`to_dict` wrote it, or as earlier releases stored it (the
        protocol message in its JSON mapping). Raises ValueError/TypeError on anything
        else."""
        if not isinstance(raw, dict):
            raise TypeError(f"a stored task report is a {type(raw).__name__}, not a mapping")
        if "v" not in raw:
            return _from_message_json(raw)
        if raw["v"] != REPORT_FORMAT:
            raise ValueError(f"task report format {raw['v']!r:.20} (this release reads 1)")
        m = raw["measurement"]
        if not isinstance(m, dict):
            raise TypeError(f"a stored measurement is a {type(m).__name__}, not a mapping")
        return cls(
            state=TaskState(raw["state"]),
            measurement=TaskMeasurement(
                **{name: _typed(m[name], kind) for name, kind in _MEASUREMENT_TYPES.items()}
            ),
            **{name: _typed(raw[name], _REPORT_TYPES[name]) for name in _REPORT_FIELDS},
        )


@dataclass(frozen=True)
class GpuTelemetry:
    """One GPU's counters (None: NVML did not give it; never a stand-in zero)."""

    index: int
    util_percent: float | None = None
    mem_used_bytes: int | None = None
    pcie_tx_kbps: float | None = None
    pcie_rx_kbps: float | None = None
    nvlink_tx_kbps: float | None = None
    nvlink_rx_kbps: float | None = None
    uuid: str = ""
    power_w: float | None = None
    mem_total_bytes: int | None = None


#: The optional counters of :class:`GpuTelemetry`, as named on the wire.
GPU_COUNTERS = (
    "util_percent",
    "mem_used_bytes",
    "mem_total_bytes",
    "power_w",
    "pcie_tx_kbps",
    "pcie_rx_kbps",
    "nvlink_tx_kbps",
    "nvlink_rx_kbps",
)


@dataclass(frozen=True)
class Telemetry:
    """A machine's load as its agent last sampled it; NIC byte counters are cumulative
    through ``net_interface`` ("": the sum of the physical NICs), None where psutil has none."""

    cpu_percent: float = 0.0
    mem_used_bytes: int = 0
    net_sent_bytes: float | None = None
    net_recv_bytes: float | None = None
    gpus: tuple[GpuTelemetry, ...] = ()
    nvml: bool = False
    net_interface: str = ""
    sampled_unix: float = 0.0
    ib_sent_bytes: float | None = None  # InfiniBand/RoCE ports together (None: no RDMA device)
    ib_recv_bytes: float | None = None


@dataclass(frozen=True)
class Heartbeat:
    agent_id: str
    tasks: tuple[TaskReport, ...] = ()
    telemetry: Telemetry | None = None


# The persisted layout, format 1: these tables, not the dataclasses' fields, say what is
# written and as what (tests hold them to the dataclasses, so a new field is a deliberate
# change of the format).
_REPORT_TYPES: dict[str, type] = {
    "task_id": str,
    "job_id": str,
    "generation": int,
    "pid": int,
    "exit_code": int,
    "exit_reason": str,
    "cpu_percent": float,
    "rss_bytes": int,
    "log_path": str,
}
_MEASUREMENT_TYPES: dict[str, type] = {
    "iterations": int,
    "timed_iterations": int,
    "compute_time_s": float,
    "comm_time_s": float,
    "bytes_sent": float,
    "bytes_recv": float,
    "last_loss": float,
    "last_step": int,
    "first_iteration_unix": float,
    "last_iteration_unix": float,
    "start_step": int,
    "checkpoint_step": int,
    "checkpoint_cursor": int,
}
_REPORT_FIELDS = tuple(_REPORT_TYPES)
REPORT_KEYS = frozenset({"v", "state", "measurement", *_REPORT_FIELDS})
MEASUREMENT_KEYS = frozenset(_MEASUREMENT_TYPES)


def _typed(value: Any, kind: type) -> Any:
    """A stored value as ``kind``: text stays text, numbers stay numbers (a JSON int64 may
    be a string of digits in the legacy form)."""
    if kind is str:
        if not isinstance(value, str):
            raise TypeError(f"stored {value!r:.40} is not text")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TypeError(f"stored {value!r:.40} is not a number")
    if kind is int:
        return int(value)
    return float(value)


# Earlier releases stored the TaskStatus message through json_format: lowerCamelCase keys,
# default values left out (proto3: 0, "", the first enum value), int64 as strings, the
# state as its enum name. Read with this fixed table, never with the message class, so a
# later change of the protocol cannot change what an old state file means.
_LEGACY_STATES = {
    "TASK_STATE_UNSPECIFIED": TaskState.UNKNOWN,
    "TASK_STATE_STARTING": TaskState.STARTING,
    "TASK_STATE_RUNNING": TaskState.RUNNING,
    "TASK_STATE_STOPPING": TaskState.STOPPING,
    "TASK_STATE_EXITED": TaskState.EXITED,
}
_LEGACY_STATES_BY_NUMBER = dict(enumerate(_LEGACY_STATES.values()))


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def _from_message_json(raw: dict[str, Any]) -> TaskReport:
    state = raw.get("state", "TASK_STATE_UNSPECIFIED")
    if isinstance(state, int) and not isinstance(state, bool):
        parsed = _LEGACY_STATES_BY_NUMBER.get(state, TaskState.UNKNOWN)
    elif isinstance(state, str) and state in _LEGACY_STATES:
        parsed = _LEGACY_STATES[state]
    else:
        raise ValueError(f"stored task state {state!r:.40}")
    m = raw.get("measurement", {})
    if not isinstance(m, dict):
        raise TypeError(f"a stored measurement is a {type(m).__name__}, not a mapping")
    zero = {int: 0, float: 0.0, str: ""}
    return TaskReport(
        state=parsed,
        measurement=TaskMeasurement(
            **{
                name: _typed(m.get(_camel(name), zero[kind]), kind)
                for name, kind in _MEASUREMENT_TYPES.items()
            }
        ),
        **{
            name: _typed(raw.get(_camel(name), zero[_REPORT_TYPES[name]]), _REPORT_TYPES[name])
            for name in _REPORT_FIELDS
        },
    )
