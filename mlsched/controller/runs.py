"""A job's training on the testbed: its generations of tasks and where its data stands.

A *generation* is one launch of a job's processes with one layout (workers and PSs per
agent). A layout change, a pause or a failure ends the generation: the processes stop at a
common step and checkpoint (or, failing, leave the previous checkpoint), and the next
generation resumes from that checkpoint with its own world size. Steps and the data cursor
(mini-batches consumed) are continuous across generations.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format

from mlsched.controller.reports import TaskReport
from mlsched.core.errors import SpecError
from mlsched.core.ids import contained
from mlsched.core.job import Arch, JobSpec, SyncMode
from mlsched.v1 import agent_pb2, common_pb2

__all__ = ["Generation", "JobRun", "Layout", "render_tasks", "units_per_step"]

#: (agent id, workers, PSs) per agent, in the cluster's server order.
Layout = tuple[tuple[str, int, int], ...]


def units_per_step(job: JobSpec, workers: int) -> int:
    """Mini-batches one trainer step consumes: async PS steps are single pushes."""
    if job.arch is Arch.PS and job.sync is SyncMode.ASYNC:
        return 1
    return workers


@dataclass
class Generation:
    number: int
    layout: Layout
    start_step: int
    start_cursor: int
    stop_step: int
    ups: int  # units (mini-batches) per step
    tasks: dict[str, agent_pb2.TaskSpec]
    agent_of: dict[str, str]
    ports: list[tuple[str, int]]
    launched_at: float = field(default_factory=time.time)
    trigger_at: float | None = None  # when the stop that made this launch necessary began
    draining: bool = False
    failed: str = ""
    restart_reported: bool = False
    final: dict[str, TaskReport] = field(default_factory=dict)  # at its end
    # The last status each task's agent reported (not persisted): what a lost agent's
    # tasks had done when it went silent.
    seen_status: dict[str, TaskReport] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "layout": [list(e) for e in self.layout],
            "start_step": self.start_step,
            "start_cursor": self.start_cursor,
            "stop_step": self.stop_step,
            "ups": self.ups,
            "tasks": {k: json_format.MessageToDict(v) for k, v in self.tasks.items()},
            "agent_of": self.agent_of,
            "ports": [list(p) for p in self.ports],
            "launched_at": self.launched_at,
            "trigger_at": self.trigger_at,
            "draining": self.draining,
            "failed": self.failed,
            "restart_reported": self.restart_reported,
            "final": {k: v.to_dict() for k, v in self.final.items()},
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Generation:
        tasks = {k: json_format.ParseDict(v, agent_pb2.TaskSpec()) for k, v in raw["tasks"].items()}
        return cls(
            number=raw["number"],
            layout=tuple((str(a), int(w), int(p)) for a, w, p in raw["layout"]),
            start_step=raw["start_step"],
            start_cursor=raw["start_cursor"],
            stop_step=raw["stop_step"],
            ups=raw["ups"],
            tasks=tasks,
            agent_of=dict(raw["agent_of"]),
            ports=[(str(h), int(p)) for h, p in raw["ports"]],
            launched_at=raw["launched_at"],
            trigger_at=raw["trigger_at"],
            draining=raw["draining"],
            failed=raw["failed"],
            restart_reported=raw["restart_reported"],
            final={k: TaskReport.from_dict(v) for k, v in raw.get("final", {}).items()},
        )


@dataclass
class JobRun:
    job_id: str
    step: int = 0  # checkpointed step: where the next generation starts
    cursor: int = 0  # checkpointed data cursor
    reported_units: float = 0.0  # progress already reported to the engine (high water)
    generations: int = 0
    gen: Generation | None = None
    finished: bool = False  # the trainer reached its last step
    failures: int = 0  # consecutive failed generations
    failed_generations: int = 0  # all of them
    lost_steps: int = 0  # trained steps that failures threw away (past the last checkpoint)
    last_failure: str = ""
    last_stop_at: float | None = None
    seen: dict[str, tuple[float, ...]] = field(default_factory=dict)  # counters per task
    ended: list[Generation] = field(default_factory=list)  # not yet reported

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "cursor": self.cursor,
            "reported_units": self.reported_units,
            "generations": self.generations,
            "gen": self.gen.to_dict() if self.gen else None,
            "finished": self.finished,
            "failures": self.failures,
            "failed_generations": self.failed_generations,
            "lost_steps": self.lost_steps,
            "last_failure": self.last_failure,
            "seen": {k: list(v) for k, v in self.seen.items()},
        }

    @classmethod
    def from_dict(cls, job_id: str, raw: dict[str, Any]) -> JobRun:
        return cls(
            job_id=job_id,
            step=raw["step"],
            cursor=raw["cursor"],
            reported_units=raw["reported_units"],
            generations=raw["generations"],
            gen=Generation.from_dict(raw["gen"]) if raw.get("gen") else None,
            finished=raw["finished"],
            failures=raw["failures"],
            failed_generations=int(raw.get("failed_generations", 0)),
            lost_steps=int(raw.get("lost_steps", 0)),
            last_failure=str(raw.get("last_failure", "")),
            seen={k: tuple(v) for k, v in raw.get("seen", {}).items()},
        )


def stop_step_for(job: JobSpec, step: int, cursor: int, ups: int) -> int:
    left = max(0.0, job.total_work - cursor)
    return step + math.ceil(left / ups - 1e-9)


@dataclass(frozen=True)
class TaskDefaults:
    """Controller-wide trainer settings a job's ``training`` mapping may override."""

    checkpoint_root: str
    data_root: str = ""  # where a job's relative training.data_path is resolved
    timeout_s: float = 60.0
    dataset: str = "synthetic"
    num_samples: int = 2048
    image_size: int = 32
    threads: int = 1
    checkpoint_every_s: float = 60.0
    checkpoint_every_steps: int = 0


def data_path(job: JobSpec, data_root: str) -> str:
    """The absolute data directory of ``job`` (empty for none): its ``training.data_path``
    resolved under ``data_root``, refused when there is no root or it leads outside."""
    given = job.training.get("data_path")
    if not given:
        return ""
    if not data_root:
        raise SpecError(
            "training.data_path", given, "no data_path: this controller has no --data-root"
        )
    return str(contained(data_root, given, field="training.data_path"))


def checkpoint_interval(slot_seconds: float) -> float:
    """Seconds between periodic checkpoints on the testbed: 5 % of a slot, within [5, 60] s,
    so a failure loses at most that much of a slot's work (or a minute on long slots)."""
    return min(60.0, max(5.0, 0.05 * slot_seconds))


def render_tasks(
    job: JobSpec,
    layout: Layout,
    *,
    number: int,
    step: int,
    cursor: int,
    rendezvous: str,
    defaults: TaskDefaults,
    gpu_indices: dict[tuple[str, int], list[int]] | None = None,
) -> tuple[dict[str, agent_pb2.TaskSpec], dict[str, str], int, int]:
    """The tasks of one generation: (task id -> spec, task id -> agent id, stop step, ups).

    PS jobs: PS ``k`` and worker ``w`` are numbered over the layout in server order (PS 0,
    which hosts the rendezvous store, on the first agent with a PS); all-reduce jobs: ranks
    in server order, rank 0 hosting the store.
    """
    n_workers = sum(w for _, w, _ in layout)
    n_ps = sum(p for _, _, p in layout) if job.arch is Arch.PS else 0
    ups = units_per_step(job, n_workers)
    stop = stop_step_for(job, step, cursor, ups)
    tr = dict(job.training)
    common = {
        "job_id": job.job_id,
        "num_workers": n_workers,
        "num_ps": n_ps,
        "rendezvous": rendezvous,
        "stop_step": stop,
        "checkpoint_dir": str(contained(defaults.checkpoint_root, job.job_id, field="job_id")),
        "model": job.model,
        "arch": job.arch.value,
        "mode": job.sync.value,
        "backend": "ddp",
        "batch_size": job.batch_size,
        "lr": float(tr.get("lr", 0.05)),
        "momentum": float(tr.get("momentum", 0.9)),
        "weight_decay": float(tr.get("weight_decay", 5e-4)),
        "dataset": str(tr.get("dataset", defaults.dataset)),
        "data_path": data_path(job, defaults.data_root),
        "num_samples": int(tr.get("num_samples", defaults.num_samples)),
        "num_classes": int(tr.get("num_classes", 10)),
        "image_size": int(tr.get("image_size", defaults.image_size)),
        "threads": int(tr.get("threads", defaults.threads)),
        "device": "auto",
        "timeout_s": float(tr.get("timeout_s", defaults.timeout_s)),
        "seed": int(tr.get("seed", 0)),
        "overlap": bool(tr.get("overlap", False)),
        "checkpoint_keep": int(tr.get("checkpoint_keep", 2)),
        "checkpoint_every_s": float(tr.get("checkpoint_every_s", defaults.checkpoint_every_s)),
        "checkpoint_every_steps": int(
            tr.get("checkpoint_every_steps", defaults.checkpoint_every_steps)
        ),
        "generation": number,
    }
    tasks: dict[str, agent_pb2.TaskSpec] = {}
    agent_of: dict[str, str] = {}
    gpus = gpu_indices or {}

    def add(role: int, tag: str, rank: int, agent: str, slot: int) -> None:
        task_id = f"{job.job_id}.g{number}.{tag}{rank}"
        spec = agent_pb2.TaskSpec(task_id=task_id, role=role, rank=rank, **common)  # type: ignore[arg-type]
        spec.gpu_indices.extend(gpus.get((agent, slot), []))
        tasks[task_id] = spec
        agent_of[task_id] = agent

    if job.arch is Arch.PS:
        k = 0
        for agent, _, p in layout:
            for _ in range(p):
                add(common_pb2.TASK_ROLE_PS, "ps", k, agent, -1)
                k += 1
    w = 0
    for agent, n, _ in layout:
        for i in range(n):
            role = common_pb2.TASK_ROLE_WORKER if job.arch is Arch.PS else common_pb2.TASK_ROLE_RANK
            add(role, "w" if job.arch is Arch.PS else "r", w, agent, i)
            w += 1
    return tasks, agent_of, stop, ups


def store_host(job: JobSpec, layout: Layout) -> str:
    """The agent hosting the job's rendezvous store (PS 0 or rank 0)."""
    for agent, w, p in layout:
        if (p if job.arch is Arch.PS else w) > 0:
            return agent
    raise ValueError(f"layout {layout} of job {job.job_id} has no task to host the store")
