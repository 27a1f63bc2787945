"""A task the controller wants, in the agent's own terms: :class:`TaskOrder` holds its plan
(or why there is none), and :func:`local_plan` fits a plan to this machine (its metrics
file, its device, its checkpoint root). No proto here: ``agent/serde.py`` makes orders from
the wire."""

from __future__ import annotations

from dataclasses import dataclass, replace

from mlsched.core.ids import check_under
from mlsched.core.task_logs import MAX_TASK_ID_LEN
from mlsched.core.tasks import TaskPlan

__all__ = ["MAX_TASK_ID_LEN", "TaskOrder", "local_plan"]


@dataclass(frozen=True)
class TaskOrder:
    """One desired task: its plan, or, when the controller's spec did not validate, no
    plan and the reason (the task then fails at once, reported, never retried)."""

    task_id: str
    job_id: str
    generation: int
    lease_expires_unix: float
    plan: TaskPlan | None
    error: str = ""

    @property
    def stop_step(self) -> int:
        return self.plan.config.stop_step if self.plan is not None else 0


def local_plan(
    plan: TaskPlan, *, metrics: str, real_gpus: bool, checkpoint_root: str = ""
) -> TaskPlan:
    """``plan`` with this agent's metrics file and device; with a ``checkpoint_root`` the
    checkpoint directory must resolve under it (:class:`SpecError` naming the field)."""
    if checkpoint_root:
        check_under(checkpoint_root, plan.config.checkpoint_dir, field="checkpoint_dir")
    use_gpu = real_gpus and bool(plan.gpu_indices) and plan.config.device != "cpu"
    config = replace(plan.config, metrics=metrics, device="cuda" if use_gpu else "cpu")
    return replace(plan, config=config)
