"""Committed plans (OASiS, PD-ORS): a job stays on its servers from slot to slot."""

from __future__ import annotations

import pytest

from mlsched.core import Cluster, JobSpec, Pool, ResourceVector, Server, Topology
from mlsched.core.allocation import Placement
from mlsched.scheduler.committed import CommittedPlans


@pytest.fixture
def plans() -> CommittedPlans:
    servers = tuple(Server(f"m{i}", ResourceVector({"cpu": 4}), pool=Pool.BOTH) for i in range(3))
    return CommittedPlans(Cluster(servers, Topology()))


def job(job_id: str = "a") -> JobSpec:
    return JobSpec(job_id, worker=ResourceVector({"cpu": 1}), ps=ResourceVector({"cpu": 1}))


def spread(w: int, p: int) -> Placement:
    return Placement.of({w: 2}, {p: 1})


def test_same_counts_stay_on_the_previous_servers(plans: CommittedPlans) -> None:
    slots = {0: spread(0, 1), 1: spread(1, 2), 2: spread(2, 0), 4: spread(1, 0)}
    plan = plans.commit(job(), slots, cost=0.0, payoff=1.0)
    # A gap (slot 3) keeps the last placement too: resuming elsewhere is a restart.
    assert set(plan.slots.values()) == {spread(0, 1)}
    # Only the kept placement's capacity is booked.
    assert plans.usage.at(1).tolist() == [[2.0], [1.0], [0.0]]


def test_a_full_previous_server_lets_the_job_move(plans: CommittedPlans) -> None:
    other = Placement.of({0: 3}, {2: 1})
    plans.commit(job("other"), {1: other}, cost=0.0, payoff=1.0)
    plan = plans.commit(job(), {0: spread(0, 1), 1: spread(1, 2)}, cost=0.0, payoff=1.0)
    assert plan.slots[1] == spread(1, 2)  # server 0 has 1 cpu left in slot 1, not 2
    assert (plans.usage.at(1) <= 4.0).all()


@pytest.mark.parametrize(
    "nxt",
    [
        Placement.of({1: 3}, {1: 1}),  # co-located: another rate (spec 000 Fact 1)
        Placement.of({1: 3}, {2: 1}),  # one worker more
        Placement.of({1: 2}, {2: 2}),  # one PS more
    ],
    ids=["colocated", "workers", "ps"],
)
def test_another_shape_is_kept_as_planned(plans: CommittedPlans, nxt: Placement) -> None:
    first = Placement.of({0: 3}, {2: 1}) if nxt.colocated else spread(0, 1)
    plan = plans.commit(job(), {0: first, 1: nxt}, cost=0.0, payoff=1.0)
    assert plan.slots[1] == nxt
