"""The gadget-paper workload (spec 003 §5): ranges, racks, arrivals, units, a real run."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from mlsched.core.allocation import Allocation, JobState, Placement
from mlsched.core.errors import SpecError
from mlsched.core.job import Arch
from mlsched.core.utility import UtilityKind
from mlsched.engine.builder import SimulationConfig, simulate
from mlsched.engine.simulator import SimulatedExecutor
from mlsched.workloads import load_workload
from mlsched.workloads.gadget import bursty_weights, gadget_paper
from mlsched.workloads.trace import load_workload_file, save_workload


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_cluster_follows_the_two_tier_tree(seed: int) -> None:
    w = gadget_paper(seed=seed, jobs=5)
    cluster = w.cluster
    assert len(cluster) == 50 and cluster.resource_names == ("gpu",)
    sizes = Counter(s.rack for s in cluster.servers)
    assert 2 <= len(sizes) <= 5 and min(sizes.values()) >= 1
    assert dict(sizes) == w.notes["racks"]
    assert {s.capacity["gpu"] for s in cluster.servers} <= {1, 2, 4, 8}
    assert all(10 <= s.uplink_gbps <= 100 for s in cluster.servers)
    assert set(cluster.topology.rack_uplink_gbps) == set(cluster.racks)
    assert all(200 <= g <= 3200 for g in cluster.topology.rack_uplink_gbps.values())
    # The links: an up and a down link per server and per rack, at those speeds.
    assert len(cluster.links) == 2 * 50 + 2 * len(sizes)
    assert w.notes["gpus"] == sum(s.capacity["gpu"] for s in cluster.servers)


def test_rack_counts_and_gpu_sizes_vary_over_seeds() -> None:
    racks = {len(gadget_paper(seed=s, jobs=1).cluster.racks) for s in range(16)}
    assert len(racks) >= 3 and racks <= {2, 3, 4, 5}
    gpus = {s.capacity["gpu"] for s in gadget_paper(seed=0, jobs=1).cluster.servers}
    assert gpus == {1, 2, 4, 8}
    # Two servers still give two non-empty racks.
    assert len(gadget_paper(seed=5, jobs=1, servers=2).cluster.racks) == 2


@pytest.mark.parametrize("seed", [0, 7])
def test_jobs_match_the_paper_ranges_in_paper_units(seed: int) -> None:
    w = gadget_paper(seed=seed, jobs=150, horizon=120)
    assert len(w.jobs) == 150 and w.horizon_slots == 120 and w.slot_seconds == 60.0
    assert w.runtime == {"allreduce": "ring"}
    assert len({j.model for j in w.jobs}) == 150
    for j in w.jobs:
        assert j.arch is Arch.ALLREDUCE and 0 <= j.arrival_slot < 120
        assert 1 <= j.worker_cap <= 5 and dict(j.worker) == {"gpu": 1}
        assert 1000 <= j.total_work <= 6000 and j.total_work == int(j.total_work)
        zeta = w.slot_seconds / j.compute_s
        assert 50 - 1e-9 <= zeta <= 500 + 1e-9 and abs(zeta - round(zeta)) < 1e-6
        assert j.gradient_mb == 0 and j.update_s == 0
        assert j.hop_gbps is not None and 0.1 <= j.hop_gbps <= 5.0
        u = j.utility
        assert u.kind is UtilityKind.SIGMOID_PROGRESS
        assert 1 <= u.params["priority"] <= 100 and 0 < u.params["sensitivity"] <= 1
        assert 300 <= u.params["expected"] <= 3000
    assert {j.worker_cap for j in w.jobs} == {1, 2, 3, 4, 5}


def test_same_seed_same_workload_and_jobs_whatever_the_cluster() -> None:
    a = gadget_paper(seed=4, jobs=20)
    assert a.to_dict() == gadget_paper(seed=4, jobs=20).to_dict()
    assert gadget_paper(seed=5, jobs=20).jobs != a.jobs
    b = gadget_paper(seed=4, jobs=20, servers=6, node_scale=0.5, link_scale=2.0)
    assert b.jobs == a.jobs and b.cluster != a.cluster
    assert load_workload("gadget-paper", seed=4, jobs=20).jobs == a.jobs


def test_scales_multiply_gpus_and_links() -> None:
    base = gadget_paper(seed=2, jobs=1).cluster
    scaled = gadget_paper(seed=2, jobs=1, node_scale=0.5, link_scale=2.0).cluster
    assert np.allclose(scaled.capacity, base.capacity * 0.5)
    assert np.allclose(scaled.links.capacity, base.links.capacity * 2.0)


def test_arrivals_are_bursty_and_exactly_n() -> None:
    horizon, n = 200, 1500
    w = gadget_paper(seed=3, jobs=n, servers=4, horizon=horizon)
    slots = np.array([j.arrival_slot for j in w.jobs])
    assert len(slots) == n and slots.min() >= 0 and slots.max() < horizon
    # The generator's arrival stream starts with the state path: recompute it.
    _, burst = bursty_weights(np.random.default_rng([3, 2]), horizon)
    assert int(burst.sum()) == w.notes["burst_slots"] and 0 < burst.sum() < horizon
    per_slot = np.bincount(slots, minlength=horizon)
    ratio = per_slot[burst].mean() / per_slot[~burst].mean()
    assert 3.5 < ratio < 7.0  # a burst slot's rate is 5 x a calm one's
    flat = gadget_paper(seed=3, jobs=n, servers=4, horizon=horizon, arrivals="poisson")
    assert flat.notes["burst_slots"] == 0
    flat_slots = np.bincount([j.arrival_slot for j in flat.jobs], minlength=horizon)
    assert flat_slots[burst].mean() / flat_slots[~burst].mean() < 1.3


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("jobs", 0),
        ("servers", 1),
        ("horizon", 0),
        ("slot_seconds", 0),
        ("arrivals", "trace"),
        ("node_scale", 0),
        ("link_scale", -1.0),
        ("jobs", True),
    ],
)
def test_bad_options_name_the_field(field: str, value: object) -> None:
    with pytest.raises(SpecError, match=field):
        gadget_paper(**{field: value})  # type: ignore[arg-type]


def test_unknown_option_is_refused_by_name() -> None:
    with pytest.raises(SpecError, match=r"options\.racks"):
        load_workload("gadget-paper", options={"racks": 3})


def test_progress_is_workers_times_zeta_per_slot_wherever_they_run() -> None:
    """A3/A4 in paper mode: w workers do w zeta_i iterations per slot, on one server or on a
    ring across racks, so a job's budget F_i lasts F_i / zeta_i worker-slots."""
    w = gadget_paper(seed=0, jobs=40, servers=8)
    cluster = w.cluster
    job = max(w.jobs, key=lambda j: (j.worker_cap, j.total_work))
    zeta = w.slot_seconds / job.compute_s
    big = max(range(len(cluster)), key=lambda s: cluster.servers[s].capacity["gpu"])
    rack_of = cluster.links.rack_of
    other = next(s for s in range(len(cluster)) if rack_of[s] != rack_of[big])
    for n in range(1, job.worker_cap + 1):
        for placement in (
            Placement(((big, n),), ring=(big,)),
            Placement(((big, n - 1), (other, 1)), ring=(other, big) if n > 1 else (other,)),
        ):
            sim = SimulatedExecutor(cluster, w.slot_seconds, families=w.runtime)
            sim.apply(
                0, Allocation(0, {job.job_id: placement}), {job.job_id: job}, {job.job_id: 1e9}
            )
            assert sim.collect(0).progress[job.job_id].units == pytest.approx(n * zeta)


def test_a_fifo_run_through_the_engine_scores_progress_utility(tmp_path: Path) -> None:
    w = gadget_paper(seed=1, jobs=30, servers=8, horizon=80)
    path = tmp_path / "g.yaml"
    save_workload(w, path)
    assert load_workload_file(path).jobs == w.jobs  # hop_gbps and the utility survive
    result = simulate(w, SimulationConfig("fifo", seed=1, policy_options={"placement": "ring"}))
    records = result.records.values()
    done = [r for r in records if r.state is JobState.DONE]
    assert len(done) >= 20 and not any(r.state is JobState.REJECTED for r in records)
    for r in records:
        assert r.progress <= r.spec.total_work + 1e-6
        assert r.utility() == pytest.approx(r.spec.utility(r.progress))
    for r in done:
        assert r.progress == pytest.approx(r.spec.total_work)
        assert r.completion_slot is not None and r.completion_slot < 80
        # Fixed count w: the budget runs out after ceil(F / (w zeta)) slots of running.
        k = r.last_placement.n_workers if r.last_placement else 0
        zeta = w.slot_seconds / r.spec.compute_s
        assert r.slots_run == int(np.ceil(r.spec.total_work / (k * zeta) - 1e-9))
