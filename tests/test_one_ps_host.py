"""Constraint (2i) for the PS baselines (spec 002 §5 item 1, AMB-6): with ``one_ps_host``
every PS of a job goes to one server, so its PSs cover all the job's workers elsewhere.

The cluster is built so that the default placement splits the PSs: two servers full of
workers have room for one PS each, an empty third has room for both. Each placement path
(packing, round-robin, P0 and the per-task growth of DRF) is run both ways, and the
hetero experiment's baselines are run on its smoke workload with every placement checked.
"""

from __future__ import annotations

import numpy as np
import pytest

from mlsched.core import Arch, Cluster, JobSpec, Placement, ResourceVector, Server, SyncMode
from mlsched.engine.builder import SimulationConfig, simulate
from mlsched.experiments.hetero.common import (
    BASELINES,
    FIXED_COUNTS,
    SCALE_SETTINGS,
    SCHEMES,
    worker_cap,
    workload,
)
from mlsched.scheduler import create
from mlsched.scheduler.baselines.taskfill import TaskFiller
from mlsched.scheduler.baselines.tiresias import p0_place
from mlsched.scheduler.hetero.cover import uncovered_ps_hosts
from mlsched.scheduler.placement import RoundRobin, can_ever_run, pack
from mlsched.scheduler.view import CapacityLedger


def cluster(servers: int = 4) -> Cluster:
    # s0 holds the four workers and nothing more; s1 and s2 have room for one PS each,
    # s3 for two.
    shapes = [(4, 8), (0, 4), (0, 4), (0, 8)][:servers]
    return Cluster(
        tuple(
            Server(f"s{i}", ResourceVector({"gpu": g, "cpu": 8, "bw_gbps": bw}))
            for i, (g, bw) in enumerate(shapes)
        )
    )


def ps_job(job_id: str = "j", workers: int = 4) -> JobSpec:
    return JobSpec(
        job_id,
        arch=Arch.PS,
        sync=SyncMode.SYNC,
        chunks=workers,
        batches_per_chunk=50,
        min_workers=workers,
        max_workers=workers,
        worker=ResourceVector({"gpu": 1, "cpu": 1, "bw_gbps": 2}),
        ps=ResourceVector({"cpu": 1, "bw_gbps": 4}),
        compute_s=1.0,
        gradient_mb=1.0,
    )


def test_the_cover_check_charges_each_ps_host_every_remote_worker() -> None:
    job = ps_job()  # b = 2, B = 4
    assert job.ps_needed(4) == 2
    split = Placement(((0, 4),), ((1, 1), (2, 1)))  # each host: 4 Gbit/s for 4 x 2
    assert uncovered_ps_hosts(job, split) == [1, 2]
    assert uncovered_ps_hosts(job, Placement(((0, 4),), ((3, 2),))) == []
    # Workers beside the PSs are not remote: one PS covers the other server's two.
    assert uncovered_ps_hosts(job, Placement(((0, 2), (1, 2)), ((0, 1),))) == []
    assert uncovered_ps_hosts(job, Placement(((0, 2), (1, 2)), ((0, 1), (2, 1)))) == [2]


@pytest.mark.parametrize("one", [False, True])
def test_packing_puts_every_ps_on_one_server_only_when_asked(one: bool) -> None:
    c, job = cluster(), ps_job()
    ledger = CapacityLedger(c)
    placement = pack(job, 4, 2, ledger, order=[0, 1, 2], one_ps_host=one)
    assert placement is not None and placement.workers == ((0, 4),)
    assert (placement.ps == ((3, 2),)) is one
    assert (uncovered_ps_hosts(job, placement) == []) is one


@pytest.mark.parametrize("one", [False, True])
def test_round_robin_puts_every_ps_on_one_server_only_when_asked(one: bool) -> None:
    c, job = cluster(), ps_job()
    placement = RoundRobin(c).place(job, 4, 2, CapacityLedger(c), one_ps_host=one)
    assert placement is not None
    assert (len(placement.ps) == 1) is one
    assert (uncovered_ps_hosts(job, placement) == []) is one


@pytest.mark.parametrize("one", [False, True])
def test_p0_puts_every_ps_on_one_server_only_when_asked(one: bool) -> None:
    c, job = cluster(), ps_job()
    f = TaskFiller(c)
    dem = f.demand(job, 0, one)
    placement = p0_place(f, dem, 4, 2, np.zeros(4, dtype=np.intp))
    assert placement is not None
    assert (len(placement.ps) == 1) is one
    assert (uncovered_ps_hosts(job, placement) == []) is one


def test_a_job_whose_pss_fit_no_single_server_is_refused_and_takes_nothing() -> None:
    c, job = cluster(3), ps_job()  # s1 and s2: room for one PS each
    ledger = CapacityLedger(c)
    before = ledger.free.copy()
    assert pack(job, 4, 2, ledger, one_ps_host=True) is None
    assert np.array_equal(ledger.free, before)
    assert pack(job, 4, 2, ledger) is not None  # split over both: what (2i) forbids
    f = TaskFiller(c)
    assert p0_place(f, f.demand(job, 0, True), 4, 2, np.zeros(3, dtype=np.intp)) is None
    assert np.array_equal(f.free, np.array(c.capacity, dtype=float))
    assert can_ever_run(job, c, 4) and not can_ever_run(job, c, 4, one_ps_host=True)


@pytest.mark.parametrize("policy", ["fifo", "drf", "tiresias", "las2d", "antman"])
def test_each_baseline_refuses_a_bad_one_ps_host_value(policy: str) -> None:
    with pytest.raises(ValueError, match="one_ps_host"):
        create(policy, one_ps_host="yes")


def _placements(name: str, seed: int, one: bool) -> list[tuple[JobSpec, Placement]]:
    s = SCALE_SETTINGS["smoke"]
    w = workload(seed, s.jobs, s.horizon, "ps", s.default_capacity, s.run_factor)
    policy, options = SCHEMES[name]
    options = {**options, "one_ps_host": one}
    if name in FIXED_COUNTS:
        options["max_workers"] = worker_cap(w)
    specs = {j.job_id: j for j in w.jobs}
    seen: list[tuple[JobSpec, Placement]] = []
    config = SimulationConfig(
        policy, seed=seed, policy_options=options, stall_slots=s.run_factor * s.horizon
    )
    simulate(
        w, config, on_allocate=lambda _p, _v, a: seen.extend((specs[j], p) for j, p in a.items())
    )
    return seen


@pytest.mark.parametrize("name", BASELINES)
def test_the_hetero_experiment_s_baselines_keep_2i_in_every_slot(name: str) -> None:
    """Every placement of every slot, two seeds; each run has workers away from the PS host,
    so (2i) binds. DRF grows a job a task at a time: without the rule its PSs split."""
    assert SCHEMES[name][1].get("one_ps_host") is True
    for seed in (0, 1):
        seen = _placements(name, seed, True)
        assert any(any(h != p.ps[0][0] for h, _ in p.workers) for _, p in seen if p.ps)
        assert [p for j, p in seen if uncovered_ps_hosts(j, p)] == []
    if name == "drf":
        assert any(uncovered_ps_hosts(j, p) for j, p in _placements(name, 0, False))
