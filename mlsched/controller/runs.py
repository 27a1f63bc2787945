"""A job's training on the testbed: its generations of tasks and where its data stands.

A *generation* is one launch of a job's processes with one layout (workers and PSs per
agent). A layout change, a pause or a failure ends the generation: the processes stop at a
common step and checkpoint (or, failing, leave the previous checkpoint), and the next
generation resumes from that checkpoint with its own world size. Steps and the data cursor
(mini-batches consumed) are continuous across generations.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any

from mlsched.core.allocation import Placement
from mlsched.core.errors import SpecError
from mlsched.core.ids import contained
from mlsched.core.job import Arch, JobSpec, SyncMode
from mlsched.core.reports import TaskReport
from mlsched.core.tasks import LaunchKind, NodeLaunch, TaskPlan, launch_kind
from mlsched.core.train_config import Role, TrainConfig

__all__ = [
    "Generation",
    "JobRun",
    "Layout",
    "TaskSettings",
    "job_config",
    "launch_name",
    "placement_layout",
    "plan_from_dict",
    "plan_to_dict",
    "render_tasks",
    "units_per_step",
]

#: (agent id, workers, PSs) per agent, in the cluster's server order.
Layout = tuple[tuple[str, int, int], ...]


def placement_layout(p: Placement, name_of: Callable[[int], str]) -> Layout:
    """A placement by server index as (agent id, workers, PSs): in the placement's ring
    order when it has one (ranks follow the layout, so a ring's neighbours are its ranks'
    neighbours, spec 003 3.4.4), else in server order."""
    w, k = dict(p.workers), dict(p.ps)
    order = list(p.ring) if p.ring else []
    order += sorted((set(w) | set(k)) - set(order))
    return tuple((name_of(s), w.get(s, 0), k.get(s, 0)) for s in order)


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
    tasks: dict[str, TaskPlan]
    agent_of: dict[str, str]
    ports: list[tuple[str, int]]
    launched_at: float = field(default_factory=time.time)
    trigger_at: float | None = None  # when the stop that made this launch necessary began
    # How long that stop took (its start to the generation's end): a restart loses it and
    # the relaunch's time to the first iteration, not the slots a paused job waited between.
    stopped_s: float | None = None
    draining: bool = False
    failed: str = ""
    restart_reported: bool = False  # its launch-to-first-iteration time (restart or start-up)
    final: dict[str, TaskReport] = field(default_factory=dict)  # at its end
    # The last status each task's agent reported (not persisted): what a lost agent's
    # tasks had done when it went silent.
    seen_status: dict[str, TaskReport] = field(default_factory=dict)
    # The tasks as stored, made once: a generation's tasks never change, and the run is
    # stored at every slot boundary (a thousand jobs' task configs per slot otherwise).
    _tasks_doc: dict[str, Any] | None = field(default=None, init=False, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        if self._tasks_doc is None:
            self._tasks_doc = {k: plan_to_dict(v) for k, v in self.tasks.items()}
        return {
            "number": self.number,
            "layout": [list(e) for e in self.layout],
            "start_step": self.start_step,
            "start_cursor": self.start_cursor,
            "stop_step": self.stop_step,
            "ups": self.ups,
            "tasks": self._tasks_doc,
            "agent_of": dict(self.agent_of),
            "ports": [list(p) for p in self.ports],
            "launched_at": self.launched_at,
            "trigger_at": self.trigger_at,
            "stopped_s": self.stopped_s,
            "draining": self.draining,
            "failed": self.failed,
            "restart_reported": self.restart_reported,
            "final": {k: v.to_dict() for k, v in self.final.items()},
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Generation:
        tasks = {k: plan_from_dict(v) for k, v in raw["tasks"].items()}
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
            stopped_s=raw.get("stopped_s"),
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
    last_stop_s: float | None = None  # how long the last stop took, to its generation's end
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


def plan_to_dict(plan: TaskPlan) -> dict[str, Any]:
    """A task as the store keeps it: explicit fields, the trainer's as :class:`TrainConfig`
    names them (not a proto's JSON, so the wire can change without the stored rows)."""
    return {
        "task_id": plan.task_id,
        "config": plan.config.to_dict(),
        "launcher": plan.node.launcher.value,
        "node_rank": plan.node.node_rank,
        "node_sizes": list(plan.node.node_sizes),
        "generation": plan.generation,
        "gpu_indices": list(plan.gpu_indices),
    }


def plan_from_dict(raw: dict[str, Any]) -> TaskPlan:
    """The task :func:`plan_to_dict` stored (or an earlier release's), validated again."""
    if "config" not in raw:
        return _legacy_plan(raw)
    return TaskPlan(
        task_id=str(raw["task_id"]),
        config=TrainConfig(**raw["config"]),
        node=NodeLaunch(
            LaunchKind.of(raw["launcher"]), int(raw["node_rank"]), tuple(raw["node_sizes"])
        ),
        generation=int(raw["generation"]),
        gpu_indices=tuple(int(i) for i in raw["gpu_indices"]),
    )


_LEGACY_ROLES = {"TASK_ROLE_WORKER": "worker", "TASK_ROLE_PS": "ps", "TASK_ROLE_RANK": "rank"}


def _legacy_plan(raw: dict[str, Any]) -> TaskPlan:
    """A task stored by releases before the launch path: the JSON of a flat ``TaskSpec``
    (camelCase keys, int64 as text, fields at their default left out), which always ran
    one process directly. Fields it left out take the trainer's defaults, as its agents did."""
    values: dict[str, Any] = {}
    for f in fields(TrainConfig):
        key = re.sub(r"_([a-z])", lambda m: m.group(1).upper(), f.name)
        if key in raw:
            value = raw[key]
            values[f.name] = int(value) if str(f.type) == "int" else value
    values["role"] = _LEGACY_ROLES.get(raw.get("role", ""), "rank")
    values["launcher"] = "direct"
    return TaskPlan(
        task_id=str(raw["taskId"]),
        config=TrainConfig(**values),
        generation=int(raw.get("generation", 0)),
        gpu_indices=tuple(int(i) for i in raw.get("gpuIndices", ())),
    )


@dataclass(frozen=True)
class TaskSettings:
    """What the controller adds to every job's trainer configuration: where checkpoints
    and data live, and the operator's settings for all jobs (None: the trainer's default).
    A job's own ``training:`` settings win over these."""

    checkpoint_root: str
    data_root: str = ""  # where a job's relative training.data_path is resolved
    timeout_s: float | None = None
    checkpoint_every_s: float | None = None

    def for_job(self, job: JobSpec) -> dict[str, Any]:
        """The trainer settings of ``job``: these, then the job's own."""
        out: dict[str, Any] = {
            k: v
            for k, v in (
                ("timeout_s", self.timeout_s),
                ("checkpoint_every_s", self.checkpoint_every_s),
            )
            if v is not None
        }
        out.update(job.training)
        out["data_path"] = data_path(job, self.data_root) or None
        return out


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


def job_config(job: JobSpec, settings: TaskSettings, **plumbing: Any) -> TrainConfig:
    """The trainer configuration of ``job``'s processes: the job's model, architecture and
    batch size, the controller's settings, the job's ``training:`` settings, and the
    ``plumbing`` of one launch (world size, rendezvous, stop step, role and rank)."""
    values: dict[str, Any] = {
        "job_id": job.job_id,
        "model": job.model,
        "arch": job.arch.value,
        "mode": job.sync.value,
        "num_ps": 1 if job.arch is Arch.PS else 0,
        "checkpoint_dir": str(contained(settings.checkpoint_root, job.job_id, field="job_id")),
        "batch_size": job.batch_size,
        "device": "auto",
    }
    return TrainConfig(**{**values, **settings.for_job(job), **plumbing})


def launch_name(job: JobSpec) -> str:
    """How ``job``'s processes start, for tables: ``ps``, ``torchrun``, ``horovod`` or
    ``direct`` (what :attr:`TaskPlan.launch` says of its tasks)."""
    if job.arch is Arch.PS:
        return "ps"
    chosen = {k: job.training[k] for k in ("backend", "launcher") if k in job.training}
    cfg = TrainConfig(model=job.model, arch="allreduce", checkpoint_dir="-", **chosen)
    return launch_kind(cfg).value


def render_tasks(
    job: JobSpec,
    layout: Layout,
    *,
    number: int,
    step: int,
    cursor: int,
    rendezvous: str,
    settings: TaskSettings,
    gpu_indices: dict[tuple[str, int], list[int]] | None = None,
) -> tuple[dict[str, TaskPlan], dict[str, str], int, int]:
    """The tasks of one generation: (task id -> plan, task id -> agent id, stop step, ups).

    PS jobs: PS ``k`` and worker ``w`` are numbered over the layout in its order (PS 0,
    which hosts the rendezvous store, on the first agent with a PS). All-reduce jobs: ranks
    in layout order (the ring's, when the placement has one), rank 0 hosting the store (``launcher: direct``: one task per rank), or
    one task per agent (node) for torchrun and Horovod, node 0 hosting the rendezvous.
    """
    n_workers = sum(w for _, w, _ in layout)
    n_ps = sum(p for _, _, p in layout) if job.arch is Arch.PS else 0
    ups = units_per_step(job, n_workers)
    stop = stop_step_for(job, step, cursor, ups)
    base = job_config(
        job, settings, num_workers=n_workers, num_ps=n_ps, rendezvous=rendezvous, stop_step=stop
    )
    kind = launch_kind(base)
    tasks: dict[str, TaskPlan] = {}
    agent_of: dict[str, str] = {}
    gpus = gpu_indices or {}

    def add(tag: str, cfg: TrainConfig, agent: str, gpu: list[int], node: NodeLaunch) -> None:
        task_id = f"{job.job_id}.g{number}.{tag}"
        tasks[task_id] = TaskPlan(task_id, cfg, node, number, tuple(gpu))
        agent_of[task_id] = agent

    if kind is not LaunchKind.DIRECT:
        nodes = [(agent, w) for agent, w, _ in layout if w > 0]
        sizes = tuple(w for _, w in nodes)
        first = 0
        for i, (agent, w) in enumerate(nodes):
            gpu = [g for slot in range(w) for g in gpus.get((agent, slot), [])]
            cfg = replace(base, role=Role.RANK, rank=first)
            add(f"n{i}", cfg, agent, gpu, NodeLaunch(kind, i, sizes))
            first += w
        return tasks, agent_of, stop, ups
    if job.arch is Arch.PS:
        k = 0
        for agent, _, p in layout:
            for _ in range(p):
                add(f"ps{k}", replace(base, role=Role.PS, rank=k), agent, [], NodeLaunch())
                k += 1
    w = 0
    role, tag = (Role.WORKER, "w") if job.arch is Arch.PS else (Role.RANK, "r")
    for agent, n, _ in layout:
        for i in range(n):
            cfg = replace(base, role=role, rank=w)
            add(f"{tag}{w}", cfg, agent, gpus.get((agent, i), []), NodeLaunch())
            w += 1
    return tasks, agent_of, stop, ups


def store_host(job: JobSpec, layout: Layout) -> str:
    """The agent hosting the job's rendezvous store (PS 0 or rank 0)."""
    for agent, w, p in layout:
        if (p if job.arch is Arch.PS else w) > 0:
            return agent
    raise ValueError(f"layout {layout} of job {job.job_id} has no task to host the store")
