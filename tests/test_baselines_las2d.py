"""2D-LAS (spec 002's Tiresias) through the real engine, simulator and estimator.

Each test is built so that `tiresias` (least attained service) or a key without the
resource factor would give another order; the expected slots are worked out by hand.
"""

from __future__ import annotations

from test_baselines_tiresias import gpu_cluster, ring_job
from test_baselines_tiresias import run as run_policy

from mlsched.core import Cluster, JobSpec, JobState, Placement
from mlsched.engine.engine import RunResult
from mlsched.engine.simulator import TruthConfig


def run(
    cluster: Cluster, jobs: list[JobSpec], *, until: int, policy: str = "las2d"
) -> tuple[RunResult, dict[int, dict[str, Placement]]]:
    return run_policy(cluster, jobs, until=until, truth=TruthConfig(restart_s=1.0), policy=policy)


def order(alloc: dict[int, dict[str, Placement]], slots: range) -> list[set[str]]:
    return [set(alloc.get(t, {})) for t in slots]


def test_a_short_newcomer_runs_to_completion_before_the_long_job_resumes() -> None:
    # 4 GPUs, both need all 4. a (100 slots of work) runs slots 0-2; b (about 5 slots)
    # arrives in slot 3 with far less left and runs to its end before a resumes. Least
    # attained service would alternate them once b had caught up (slot 6).
    jobs = [ring_job("a", workers=4), ring_job("b", workers=4, slots=5, arrival=3)]
    result, alloc = run(gpu_cluster(), jobs, until=12)
    end = result.records["b"].completion_slot
    assert result.records["b"].state is JobState.DONE and end is not None and end <= 8
    assert order(alloc, range(12)) == [{"a"}] * 3 + [{"b"}] * (end - 2) + [{"a"}] * (11 - end)
    assert result.records["a"].restart_s == 1.0  # the resume after b, charged
    _, las = run(gpu_cluster(), jobs, until=10, policy="tiresias")
    assert order(las, range(6, 8)) == [{"a"}, {"b"}]  # the order 2D-LAS must not follow


def test_resources_weigh_the_remaining_work() -> None:
    # One 2-GPU server. a: 2 workers for 10 slots (200 units left, x 2 GPUs = 400);
    # b: 1 worker for 30 slots (300 units, x 1 GPU = 300). b goes first although a has
    # less work left; a does not fit beside it and waits for b's end.
    jobs = [ring_job("a", workers=2, slots=10), ring_job("b", workers=1, slots=30)]
    _, alloc = run(gpu_cluster(gpus=2), jobs, until=32)
    assert order(alloc, range(30)) == [{"b"}] * 30
    assert order(alloc, range(30, 32)) == [{"a"}] * 2
