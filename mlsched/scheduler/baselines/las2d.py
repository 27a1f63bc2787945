"""2D-LAS as spec 002 §5 defines its Tiresias baseline: smallest remaining work x resources
first, fixed counts, preemptive.

Spec 002 describes Tiresias by its priority, "the job's remaining workload x its number of
resources, smallest first", re-prioritised every slot; the `tiresias` policy is spec 003's
continuous LAS (attained GPU service first). Everything else is `tiresias`'s: counts fixed
at arrival (:func:`~mlsched.scheduler.baselines.common.fixed_counts`), admission only
checks that the job can ever fit, each slot places jobs whole in priority order and the jobs
left out are preempted, a running job keeps its servers when they still fit.

The key of a job is its remaining work units times its resources: GPUs over its workers
(workers for GPU-less workers) plus its PSs. Ties go to the earlier arrival. The restart
penalty (AMB-15: 0.1 slot by default, the measured checkpoint/restart time on the testbed)
is charged by the environment, not the policy: ``TruthConfig.restart_s`` in simulation,
the agents' measured restarts on the testbed.
"""

from __future__ import annotations

from typing import Any

from mlsched.core.allocation import Placement
from mlsched.core.job import JobSpec
from mlsched.scheduler.baselines.tiresias import TiresiasPolicy
from mlsched.scheduler.view import ClusterView

__all__ = ["Las2dPolicy"]


class Las2dPolicy(TiresiasPolicy):
    name = "las2d"
    description = (
        "2D-LAS (spec 002's Tiresias): smallest remaining work x resources first, fixed counts, "
        "preemptive"
    )

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._size: dict[str, float] = {}  # GPUs over the workers plus PSs

    def _admitted(
        self, job: JobSpec, view: ClusterView, workers: int, ps: int, empty: Placement
    ) -> None:
        self._size[job.job_id] = workers * self._gpus[job.job_id] + ps

    def release(self, job_id: str) -> None:
        super().release(job_id)
        self._size.pop(job_id, None)

    def rank(self, view: ClusterView, job_id: str) -> tuple[float, ...]:
        """Remaining work units x resources, smallest first."""
        return (view[job_id].remaining * self._size[job_id],)
