"""The ``hetero`` policy (spec 002): the worked micro-example, the subroutines' rules,
A_dual's windows, round anchoring and option validation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from engine_helpers import make_engine

from mlsched.core.cluster import Cluster, Server
from mlsched.core.job import Arch, JobSpec, SyncMode
from mlsched.core.resources import ResourceVector
from mlsched.engine.builder import SimulationConfig, simulate
from mlsched.perfmodel.estimator import RuntimeEstimator
from mlsched.scheduler.hetero import (
    DEFAULT_CATALOGUE,
    Grid,
    JobShapes,
    dual,
    greedy_rtl,
    maxweight,
    mincost,
    price_base,
    scheduled_weight,
    theory_alpha,
)
from mlsched.scheduler.hetero.policy import HeteroPolicy, round_slot
from mlsched.scheduler.registry import create
from mlsched.scheduler.view import ClusterView
from mlsched.workloads import load_workload

SLOT = 100.0


def _view(cluster: Cluster) -> ClusterView:
    runtime = RuntimeEstimator(cluster, {"allreduce": "hetero", "ps_sync": "hetero"})
    return ClusterView(
        slot=0, slot_seconds=SLOT, horizon=None, cluster=cluster, runtime=runtime, jobs={}
    )


def _shapes(job: JobSpec, cluster: Cluster, usable: int) -> JobShapes:
    scale = np.asarray(cluster.capacity).max(axis=0)
    return JobShapes.of(job, _view(cluster), DEFAULT_CATALOGUE, scale, job.total_work, usable)


def _grid(cluster: Cluster, usable: int, lam: float = 1e6) -> Grid:
    cap = np.asarray(cluster.capacity, dtype=float)
    return Grid(cap / cap.max(axis=0), usable, lam)


def _ring_job(job_id: str = "j", weight: float = 10.0, chunks: int = 4) -> JobSpec:
    # W = 60 mini-batches, v = 0.05 slots, U = 0: rho = 20 per worker and slot (spec §3.10).
    return JobSpec(
        job_id=job_id,
        arch=Arch.ALLREDUCE,
        epochs=1,
        chunks=chunks,
        batches_per_chunk=60 // chunks,
        worker=ResourceVector({"gpu": 1}),
        compute_s=0.05 * SLOT,
        update_s=0.0,
        gradient_mb=1.0,
        weight=weight,
    )


ONE_SERVER = Cluster((Server("s0", ResourceVector({"gpu": 4})),))


@pytest.mark.parametrize(("tie", "workers", "length"), [("spec", 3, 1), ("paper", 1, 3)])
def test_worked_micro_example(tie: str, workers: int, length: int):
    """Spec §3.10: at zero prices the recommended tie-break takes Phi = 3 from slot 1 (it
    completes first), the paper's first-found rule Phi = 1; the prices then rise as (11)."""
    js = _shapes(_ring_job(), ONE_SERVER, usable=7)
    assert sorted((s.n, s.length) for s in js.shapes) == [(1, 3), (2, 2), (3, 1)]
    grid = _grid(ONE_SERVER, 7, lam=1e6)
    got = maxweight([js], lambda: grid, tie)
    assert len(got) == 1
    cand = got[0].candidate
    assert (cand.shape.n, cand.shape.length, cand.start, cand.cost) == (workers, length, 0, 0.0)
    assert grid.prices()[0, 0, 0] == pytest.approx(1e6 ** (workers / 4) - 1)
    assert grid.prices()[length, 0, 0] == 0.0


def test_price_base_and_theory_alpha():
    assert price_base(150, 150, 4, 10) == 2 * 150 * 150 * 4 * 10 + 1
    lam = price_base(150, 150, 4, 10)
    # Spec §4's magnitude check: w(J)/w_min ~ 2600 gives alpha ~ 220.
    alpha = theory_alpha([1.0] * 2600, lam)
    assert 200 <= alpha <= 240
    assert theory_alpha([5.0], lam) == 1


def test_weight_below_cost_is_not_scheduled_and_capacity_holds():
    """Jobs fill the server until prices exceed their weight; nothing ever overbooks."""
    jobs = [_shapes(_ring_job(f"j{i}", weight=3.0), ONE_SERVER, 7) for i in range(12)]
    grids: list[Grid] = []

    def make() -> Grid:
        grids.append(_grid(ONE_SERVER, 7, lam=1e4))
        return grids[-1]

    got = maxweight(jobs, make, "spec")
    assert 0 < len(got) < 12  # some priced out: weight 3 < cost
    assert (grids[0].used <= 1.0 + 1e-9).all()
    for s in got:
        assert s.cost < 3.0


def test_dual_uses_consecutive_windows_and_stops_early():
    # Weights far above any price: every job is taken where it is cheapest, at most 28
    # GPU-slots per window of 7 usable slots; 20 jobs of >= 3 GPU-slots need three.
    jobs = [_shapes(_ring_job(f"j{i:02d}", weight=1e5), ONE_SERVER, 7) for i in range(20)]
    got = dual(jobs, lambda: _grid(ONE_SERVER, 7, lam=100.0), tau=8, alpha=4, tie="spec")
    assert len(got) == 20
    starts = sorted(s.start for s in got)
    assert {t // 8 for t in starts} == {0, 1, 2}  # three windows, then early termination
    assert all(s.start % 8 < 7 for s in got)  # never in a window's last slot
    # At most 4 GPUs per slot across all windows.
    per_slot: dict[int, int] = {}
    for s in got:
        for t in range(s.start, s.start + s.candidate.shape.length):
            per_slot[t] = per_slot.get(t, 0) + s.candidate.shape.n
    assert max(per_slot.values()) <= 4


def test_ps_distributed_covers_remote_bandwidth():
    """A PS job too big for one server: PSs on one host cover the remote workers' b ((2i))."""
    servers = tuple(
        Server(f"s{i}", ResourceVector({"gpu": 2, "cpu": 16, "bw_gbps": 20})) for i in range(3)
    )
    cluster = Cluster(servers)
    job = JobSpec(
        job_id="ps",
        arch=Arch.PS,
        sync=SyncMode.SYNC,
        epochs=1,
        chunks=6,
        batches_per_chunk=20,
        min_workers=6,
        worker=ResourceVector({"gpu": 1, "cpu": 2, "bw_gbps": 2}),
        ps=ResourceVector({"cpu": 2, "bw_gbps": 3}),
        compute_s=0.05 * SLOT,
        gradient_mb=1.0,
        weight=100.0,
    )
    js = _shapes(job, cluster, usable=15)
    cand = mincost(_grid(cluster, 15), js, "spec")
    assert cand is not None and cand.shape.case == "ps_dist"
    assert sum(cand.workers.values()) == 6
    ((host, s),) = cand.ps.items()
    remote = 6 - cand.workers.get(host, 0)
    assert s * 3 >= remote * 2 and s == max(1, math.ceil(remote * 2 / 3))


def test_rounds_are_anchored_to_absolute_slots():
    assert [s for s in range(40) if round_slot(s) is not None] == [0, 1, 3, 7, 15, 31]
    assert round_slot(15) == 16


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("alpha", 0),
        ("alpha", 2.5),
        ("alpha", True),
        ("tie_break", "first"),
        ("order", "random"),
        ("f", 0.5),
        ("f", float("nan")),
        ("horizon", 0),
        ("compact_offsets", "yes"),
    ],
)
def test_bad_options_name_the_option(option: str, value: object):
    with pytest.raises(ValueError, match=option):
        create("hetero", **{option: value})


def test_demo_every_job_finishes_with_compact_offsets():
    workload = load_workload("demo")
    result = simulate(
        workload, SimulationConfig("hetero", policy_options={"compact_offsets": True})
    )
    assert all(r.state.value == "done" for r in result.records.values())


def test_faithful_offsets_start_round_i_at_alpha_tau():
    workload = load_workload("demo")
    policy = HeteroPolicy(alpha=2)

    engine = make_engine(
        workload.cluster,
        policy,
        slot_seconds=workload.slot_seconds,
        horizon=workload.horizon_slots,
        families=workload.runtime,
    )
    engine.submit_all(workload.jobs)
    engine.run()
    rounds = [d for d in policy.decisions if d.scheduled]
    assert rounds and all(d.offset == 2 * d.tau - 1 for d in rounds)


def test_greedy_rtl_packs_late_by_density_and_never_overbooks():
    """Jain et al.'s greedy: densest first, each job as late as the window allows, every
    job that fits (no prices), capacity never exceeded."""
    light = [_shapes(_ring_job(f"l{i}", weight=1.0), ONE_SERVER, 7) for i in range(6)]
    heavy = _shapes(_ring_job("h", weight=50.0), ONE_SERVER, 7)
    batch = [*light, heavy]
    grids: list[Grid] = []

    def make() -> Grid:
        grids.append(_grid(ONE_SERVER, 7, lam=1e4))
        return grids[-1]

    got = greedy_rtl(batch, make)
    assert got[0].job_id == "h"  # the densest goes first ...
    first = got[0]
    assert first.start + first.candidate.shape.length == 7  # ... and ends at the deadline
    used = np.zeros(7)
    for s in got:
        length = s.candidate.shape.length
        assert s.start >= 0 and s.start + length <= 7
        used[s.start : s.start + length] += s.candidate.shape.n
    assert (used <= 4).all()  # one 4-GPU server
    # 7 slots x 4 GPUs hold 28 worker-slots; each job needs 3 (rho = 20 of 60 per slot):
    # 7 jobs x 3 = 21 fit, all of them.
    assert len(got) == 7
    assert scheduled_weight(batch, got) == pytest.approx(56.0)
    crowded = [*batch, *(_shapes(_ring_job(f"x{i}"), ONE_SERVER, 7) for i in range(6))]
    full = greedy_rtl(crowded, make)
    assert len(full) == 9  # 28 // 3 worker-slots: the rest do not fit
    assert "h" in {s.job_id for s in full}
