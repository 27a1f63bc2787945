"""PD-ORS as a policy in the engine (spec 000): co-location when the internal link is faster,
rejection of what cannot pay, options, the separated ablation, reproducible plans.

The pieces it is built from (gain factor, the two placement cases, the DP, the price
constants, rates) are tested in test_pdors.py."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from engine_helpers import make_engine

from mlsched.core import Cluster, JobSpec, JobState, Pool, ResourceVector, Server, Topology
from mlsched.core.job import Arch, SyncMode
from mlsched.core.utility import Utility
from mlsched.engine.engine import Engine
from mlsched.scheduler import Policy, create
from mlsched.scheduler.pdors.policy import PdorsPolicy


# The policy ------------------------------------------------------------------------------------------
def _pd_cluster(n: int = 4) -> Cluster:
    return Cluster(
        tuple(
            Server(f"m{i}", ResourceVector({"gpu": 8, "cpu": 32, "bw_gbps": 10}), pool=Pool.BOTH)
            for i in range(n)
        ),
        Topology(intra_server_gbps=100.0),
    )


def _sync_job(
    job_id: str, *, arrival: int = 0, batches: int = 4000, value: float = 50.0
) -> JobSpec:
    return JobSpec(
        job_id,
        sync=SyncMode.SYNC,
        arrival_slot=arrival,
        chunks=1,
        batches_per_chunk=batches,
        max_workers=6,
        ps_ratio=2.0,
        compute_s=0.1,
        gradient_mb=100.0,
        worker=ResourceVector({"gpu": 1, "cpu": 2, "bw_gbps": 1.0}),
        ps=ResourceVector({"cpu": 2, "bw_gbps": 2.0}),
        utility=Utility.sigmoid(value, 0.5, 6.0),
    )


def _engine(cluster: Cluster, policy: Policy, horizon: int = 30) -> Engine:
    return make_engine(cluster, policy, slot_seconds=60.0, horizon=horizon)


def test_pd_ors_co_locates_when_the_internal_link_is_much_faster() -> None:
    """Spec §7's invariant end to end: a job that fits one machine, with 100 Gbit/s inside
    and 1 Gbit/s across, runs co-located in every slot, and finishes."""
    cluster = _pd_cluster()
    engine = _engine(cluster, create("pd_ors"))
    engine.submit(_sync_job("a"))
    placements = []
    while not engine.done():
        engine.step()
        placements += [p for j, p in engine.placements.items() if j == "a"]
    assert engine.records["a"].state is JobState.DONE, engine.records["a"].reason
    assert placements and all(p.colocated for p in placements)
    assert "co-located" in (engine.records["a"].reason or "")


def test_pd_ors_rejects_what_cannot_pay_and_all_reduce_jobs() -> None:
    cluster = _pd_cluster()
    policy = create("pd_ors")
    engine = _engine(cluster, policy, horizon=5)
    ring = JobSpec("ring", arch=Arch.ALLREDUCE)
    huge = _sync_job("huge", batches=10**9)  # cannot finish within the horizon
    engine.submit_all([ring, huge, _sync_job("ok")])
    engine.step()
    assert engine.records["ring"].state is JobState.REJECTED
    assert "A29" in (engine.records["ring"].reason or "")
    assert engine.records["huge"].state is JobState.REJECTED
    assert engine.records["ok"].state is JobState.RUNNING


def test_pd_ors_options_are_checked() -> None:
    for bad in ({"g_delta": 0.0}, {"levels": 0}, {"rounds": 0}, {"exact": "yes"}, {"window": 0}):
        with pytest.raises(ValueError):
            create("pd_ors", **bad)


def test_pd_ors_separated_never_co_locates() -> None:
    """The ablation: workers only on worker machines, PSs only on PS machines."""
    cluster = Cluster(
        tuple(
            Server(
                f"m{i}",
                ResourceVector({"gpu": 8, "cpu": 32, "bw_gbps": 10}),
                pool=Pool.WORKER if i % 2 == 0 else Pool.PS,
            )
            for i in range(4)
        ),
        Topology(intra_server_gbps=100.0),
    )
    policy = create("pd_ors", separated=True)
    engine = _engine(cluster, policy)
    engine.submit_all([_sync_job(f"j{i}", arrival=i) for i in range(4)])
    seen = 0
    while not engine.done():
        engine.step()
        for placement in engine.placements.values():
            seen += 1
            assert not placement.colocated
    assert seen > 0


@pytest.mark.parametrize("seed", range(8))
def test_pd_ors_plans_are_reproducible_and_finish_what_they_admit(seed: int) -> None:
    """Same seed, same decisions (seeded rounding, A12); with the model exact, every
    admitted job completes by its planned slot's end."""
    cluster = _pd_cluster(3)
    rng = np.random.default_rng(seed)
    jobs = [
        _sync_job(f"j{i}", arrival=int(rng.integers(0, 6)), batches=int(rng.integers(500, 6000)))
        for i in range(8)
    ]
    outcomes = []
    for _ in range(2):
        engine = _engine(cluster, create("pd_ors"), horizon=25)
        engine.submit_all(jobs)
        result = engine.run()
        outcomes.append({j: (r.state, r.completion_slot) for j, r in result.records.items()})
        admitted = [r for r in result.records.values() if r.admitted_slot is not None]
        # Something is admitted (else "finishes what it admits" holds of nothing).
        assert admitted, [r.reason for r in result.records.values()]
        for r in admitted:
            assert r.state is JobState.DONE, (r.job_id, r.reason)
    assert outcomes[0] == outcomes[1]


def test_pd_ors_declares_the_jobs_it_models() -> None:
    """The general declaration (Policy.archs): PD-ORS covers PS jobs only (A29); the
    others cover every architecture."""
    ring, ps = JobSpec("ring", arch=Arch.ALLREDUCE), JobSpec("ps")
    pd = create("pd_ors")
    assert pd.supports(ps) and not pd.supports(ring)
    assert all(create(name).supports(ring) for name in ("fifo", "drf", "oasis"))


def test_a_job_arriving_beside_committed_load_pays_the_higher_prices() -> None:
    """PD-ORS's prices are a function of the load committed in each slot (spec 000 (12)):
    the same job arriving after another was committed to the same slots pays more there.
    On one machine both fit at once and the sigmoid's early target keeps the second from
    waiting for free slots. The plausible bug: the policy handing the prices no load."""
    policy = PdorsPolicy()
    engine = _engine(_pd_cluster(1), policy)
    jobs = [dataclasses.replace(_sync_job(j, value=500.0), max_workers=3) for j in ("a", "b")]
    engine.submit_all(jobs)
    engine.step()
    assert [d.admitted for d in policy.decisions] == [True, True], policy.decisions
    plans = [engine.records[j].plan for j in ("a", "b")]
    first, second = (set(p.slots) for p in plans if p is not None)
    assert first & second  # the same slots: so the second faces the first's load there
    costs = [d.cost for d in policy.decisions]
    assert costs[0] < costs[1], costs
