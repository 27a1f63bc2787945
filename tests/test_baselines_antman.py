"""AntMan-style classes (spec 002 §5, AMB-15) through the real engine and simulator.

One 4-GPU server; every job needs all 4 GPUs, so the schedule shows who has priority.
Weights 1, 2, 3, 10 with a 50 % guarantee share make the two heaviest (3 and 10)
guarantee jobs and the others opportunistic.
"""

from __future__ import annotations

import pytest
from test_baselines_tiresias import gpu_cluster, ring_job
from test_baselines_tiresias import run as run_policy

from mlsched.core import JobSpec, Placement
from mlsched.engine.engine import RunResult
from mlsched.engine.simulator import TruthConfig
from mlsched.scheduler import create


def weighted(job: JobSpec, weight: float) -> JobSpec:
    return JobSpec.from_dict({**job.to_dict(), "weight": weight})


def run(jobs: list[JobSpec], until: int) -> tuple[RunResult, dict[int, dict[str, Placement]]]:
    return run_policy(
        gpu_cluster(), jobs, until=until, truth=TruthConfig(restart_s=1.0), policy="antman"
    )


def slots_of(alloc: dict[int, dict[str, Placement]], job_id: str) -> list[int]:
    return [t for t in sorted(alloc) if job_id in alloc[t]]


def test_guarantee_jobs_preempt_and_are_not_preempted_and_a_waiter_is_promoted() -> None:
    jobs = [
        weighted(ring_job("o", workers=4, slots=100), 1.0),  # opportunistic, long
        weighted(ring_job("g", workers=4, slots=6, arrival=2), 10.0),  # guarantee
        weighted(ring_job("o2", workers=4, slots=3, arrival=4), 2.0),  # opportunistic
        weighted(ring_job("x", workers=4, slots=1, arrival=90), 3.0),  # guarantee, late
    ]
    result, alloc = run(jobs, until=20)
    g_end = result.records["g"].completion_slot
    assert g_end is not None
    # g takes the server from o on arrival and keeps it to its end: the newcomer o2
    # (nothing attained, less work left) does not preempt it, as LAS would.
    assert slots_of(alloc, "g") == list(range(2, g_end + 1))
    assert slots_of(alloc, "o")[:2] == [0, 1]
    # o2 waits behind the earlier opportunistic o until it has waited more than twice its
    # ideal 3 slots (promotion in slot 4 + 7 = 11), then preempts o.
    o2 = slots_of(alloc, "o2")
    assert o2 and o2[0] == 11
    assert all(t in alloc and set(alloc[t]) == {"o"} for t in range(g_end + 1, 11))


def test_options_are_checked() -> None:
    with pytest.raises(ValueError, match="guarantee_share"):
        create("antman", guarantee_share=1.5)
    with pytest.raises(ValueError, match="promote_after"):
        create("antman", promote_after=-1)
