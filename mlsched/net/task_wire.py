"""The one conversion of a task and its :class:`TrainConfig` to and from the wire.

The proto ``TrainConfig`` has the dataclass's field names (a test keeps them equal), so the
conversion is by name; every field is always sent, and the receiver validates the whole
configuration again (:class:`TrainConfig` and :class:`NodeLaunch` raise
:class:`SpecError` naming the field).
"""

from __future__ import annotations

from dataclasses import fields
from functools import lru_cache
from typing import Any

from mlsched.core.tasks import LaunchKind, NodeLaunch, TaskPlan
from mlsched.core.train_config import TrainConfig
from mlsched.v1 import agent_pb2, train_pb2

__all__ = ["config_from_proto", "config_to_proto", "task_from_proto", "task_to_proto"]

_OPTIONAL = frozenset({"data_path"})


def config_to_proto(cfg: TrainConfig) -> train_pb2.TrainConfig:
    values = {k: v for k, v in cfg.to_dict().items() if v is not None}
    return train_pb2.TrainConfig(**values)


def config_from_proto(msg: train_pb2.TrainConfig) -> TrainConfig:
    values: dict[str, Any] = {}
    for f in fields(TrainConfig):
        if f.name in _OPTIONAL and not msg.HasField(f.name):
            values[f.name] = None
        else:
            values[f.name] = getattr(msg, f.name)
    return TrainConfig(**values)


def task_to_proto(task: TaskPlan, *, lease_expires_unix: float = 0.0) -> agent_pb2.TaskSpec:
    # A task's plan does not change while it runs, and every heartbeat reply carries it with
    # a new lease: build its message once (the dataclass-to-message step dominated replies).
    msg = agent_pb2.TaskSpec.FromString(_task_bytes(task))
    msg.lease_expires_unix = lease_expires_unix
    return msg


@lru_cache(maxsize=8192)
def _task_bytes(task: TaskPlan) -> bytes:
    return agent_pb2.TaskSpec(
        task_id=task.task_id,
        job_id=task.job_id,
        generation=task.generation,
        gpu_indices=list(task.gpu_indices),
        config=config_to_proto(task.config),
        node=agent_pb2.NodeLaunch(
            launcher=task.node.launcher.value,
            node_rank=task.node.node_rank,
            node_sizes=list(task.node.node_sizes),
        ),
    ).SerializeToString()


def task_from_proto(spec: agent_pb2.TaskSpec) -> TaskPlan:
    node = NodeLaunch(
        LaunchKind.of(spec.node.launcher), spec.node.node_rank, tuple(spec.node.node_sizes)
    )
    return TaskPlan(
        task_id=spec.task_id,
        config=config_from_proto(spec.config),
        node=node,
        generation=spec.generation,
        gpu_indices=tuple(spec.gpu_indices),
    )
