"""Runtime-model formulas (specs 000-004 §2.2) against hand-computed values, and invariants.

Units throughout: ``gradient_mb`` is MB (1e6 bytes), bandwidths are Gbit/s, so pushing and
pulling 100 MB over 1 Gbit/s takes 2 * 100e6 * 8 / 1e9 = 1.6 s.

The hand-computed tests use the cluster of :func:`topo_cluster`:

    rack a: s0, s1 (uplink 10)      rack b: s2, s3 (uplink 25), rack b's uplink to core: 4
    intra-server 100, core 400
    path(0,1) = 10; path(0,2) = min(10, 25, 400, 4) = 4; path(2,3) = 25; path(s,s) = 100
"""

from __future__ import annotations

import pytest

from mlsched.core.allocation import Placement
from mlsched.core.cluster import Cluster, Server, Topology
from mlsched.core.errors import SpecError
from mlsched.core.job import JobSpec
from mlsched.perfmodel import (
    AsyncPSModel,
    HeteroModel,
    PerfFamily,
    RingAllReduceModel,
    RuntimeEstimator,
    SyncPSModel,
)
from mlsched.perfmodel.paths import nominal_worker_bw, ring_bottleneck_gbps, ring_order

# Fixtures ---------------------------------------------------------------------------------


def topo_cluster(intra: float = 100.0) -> Cluster:
    servers = (
        Server("s0", {"cpu": 32}, rack="a", uplink_gbps=10.0),
        Server("s1", {"cpu": 32}, rack="a", uplink_gbps=10.0),
        Server("s2", {"cpu": 32}, rack="b", uplink_gbps=25.0),
        Server("s3", {"cpu": 32}, rack="b", uplink_gbps=25.0),
    )
    return Cluster(servers, Topology(intra, 400.0, {"b": 4.0}))


def parts(fam: PerfFamily, job: JobSpec, p: Placement, cl: Cluster) -> tuple[float, float]:
    """(compute, comm) under the job's prior parameters."""
    return fam.predict(fam.prior(job, p.worker_type, cl), job, p, cl)


def total(fam: PerfFamily, job: JobSpec, p: Placement, cl: Cluster) -> float:
    return sum(parts(fam, job, p, cl))


CL = topo_cluster()


def test_topology_paths() -> None:
    assert CL.path_gbps(0, 1) == 10.0
    assert CL.path_gbps(0, 2) == 4.0  # min(10, 25, rack a 400, rack b 4)
    assert CL.path_gbps(2, 3) == 25.0
    assert CL.path_gbps(1, 1) == 100.0


# Asynchronous PS (spec 001 §2.2) ------------------------------------------------------------


def async_job(**kw: object) -> JobSpec:
    args: dict = dict(
        job_id="a",
        sync="async",
        compute_s=0.5,
        gradient_mb=100.0,
        worker={"cpu": 1, "bw_gbps": 1.0},
        ps={"cpu": 1, "bw_gbps": 4.0},
        chunks=16,
    )
    args.update(kw)
    return JobSpec(**args)


def test_async_theta_reserved_bandwidth() -> None:
    job, fam = async_job(), AsyncPSModel()
    # Y=4, Z=1: Z*B = 4 >= Y*b = 4, PS not a bottleneck.
    p = Placement.of({0: 2, 1: 2}, {2: 1})
    compute, comm = parts(fam, job, p, CL)
    assert compute == pytest.approx(0.5)  # tau
    assert comm == pytest.approx(1.6)  # 2 * 100e6 B * 8 / 1e9 bit/s = 1.6 s
    assert total(fam, job, p, CL) == pytest.approx(2.1)  # 0.5 + 1.6


def test_async_theta_ps_bottleneck() -> None:
    job, fam = async_job(), AsyncPSModel()
    # Y=8, Z=1: Z*B = 4 < Y*b = 8, each worker gets Z*B/Y = 0.5 Gbit/s.
    p = Placement.of({0: 4, 1: 4}, {2: 1})
    assert parts(fam, job, p, CL)[1] == pytest.approx(3.2)  # 1.6 Gbit / 0.5 Gbit/s
    # Y=8, Z=2: Z*B = 8 = Y*b, back to the nominal 1.6 s.
    p2 = Placement.of({0: 4, 1: 4}, {2: 2})
    assert parts(fam, job, p2, CL)[1] == pytest.approx(1.6)
    # Y=10, Z=2: Z*B/Y = 0.8 Gbit/s -> 1.6 / 0.8 = 2.0 s.
    p3 = Placement.of({0: 5, 1: 5}, {2: 2})
    assert parts(fam, job, p3, CL)[1] == pytest.approx(2.0)


def test_async_unreserved_uses_slowest_worker_ps_path() -> None:
    job = async_job(worker={"cpu": 1}, ps={"cpu": 1})
    fam = AsyncPSModel()
    p = Placement.of({0: 1}, {1: 1})
    assert nominal_worker_bw(job, p, CL) == 10.0
    assert parts(fam, job, p, CL)[1] == pytest.approx(0.16)  # 1.6 Gbit / 10 Gbit/s
    # One worker behind the cross-rack path (4 Gbit/s) paces the model: 1.6 / 4 = 0.4 s.
    p2 = Placement.of({0: 1, 3: 1}, {3: 1})
    assert parts(fam, job, p2, CL)[1] == pytest.approx(0.4)


def test_async_throughput_is_y_units_per_theta() -> None:
    est = RuntimeEstimator(CL)
    job = async_job()
    p = Placement.of({0: 2, 1: 2}, {2: 1})
    assert est.units_per_iteration(job, p) == 4.0
    assert est.throughput(job, p) == pytest.approx(4 / 2.1)  # Y / theta
    # A global batch has no meaning for an async job: still Y units per theta.
    gb = async_job(global_batch=256)
    assert est.units_per_iteration(gb, p) == 4.0
    assert est.throughput(job, Placement(())) == 0.0


# Synchronous PS with locality (spec 000 §2.2, (E3)) ------------------------------------------


def sync_job(**kw: object) -> JobSpec:
    args: dict = dict(
        job_id="s",
        sync="sync",
        compute_s=0.01,
        gradient_mb=100.0,
        worker={"cpu": 1, "bw_gbps": 2.0},
        ps={"cpu": 1, "bw_gbps": 8.0},
        chunks=8,
    )
    args.update(kw)
    return JobSpec(**args)


def test_sync_colocated_uses_internal_rate() -> None:
    job, fam = sync_job(), SyncPSModel()
    p = Placement.of({1: 4}, {1: 2})
    dc, dm = fam.design(job, p, CL)
    # Internal: 2g / (n_s * b_int) = 1.6 Gbit / (2 * 100 Gbit/s) = 0.008 s, in the int column.
    assert dm == pytest.approx([0.0, 0.008, 0.0])
    assert dc == pytest.approx([1.0, 0.0, 0.0])  # u = 1 without a global batch
    assert total(fam, job, p, CL) == pytest.approx(0.018)  # 0.01 + 0.008


def test_sync_colocated_uses_the_jobs_own_internal_rate() -> None:
    # Spec 000's b(i) per job (10 x b(e) = 20 Gbit/s) replaces the topology's 100 Gbit/s.
    job, fam = sync_job(internal_gbps=20.0), SyncPSModel()
    p = Placement.of({1: 4}, {1: 2})
    assert fam.design(job, p, CL)[1] == pytest.approx([0.0, 0.04, 0.0])  # 1.6 / (2 * 20)
    # Across servers the job still runs at its external reservation.
    spread = Placement.of({1: 4}, {1: 1, 0: 1})
    assert fam.design(job, spread, CL)[1] == pytest.approx([0.0, 0.0, 0.4])
    assert JobSpec.from_dict(job.to_dict()).internal_gbps == 20.0
    with pytest.raises(SpecError, match="internal_gbps"):
        sync_job(internal_gbps=0.0)


def test_sync_spread_uses_external_rate() -> None:
    job, fam = sync_job(), SyncPSModel()
    # Same counts, one PS on another server: external = the 2 Gbit/s reservation.
    p = Placement.of({1: 4}, {1: 1, 0: 1})
    dc, dm = fam.design(job, p, CL)
    assert dc == pytest.approx([1.0, 0.0, 0.0])
    assert dm == pytest.approx([0.0, 0.0, 0.4])  # 1.6 Gbit / (2 * 2 Gbit/s) = 0.4 s
    assert total(fam, job, p, CL) == pytest.approx(0.41)  # 0.01 + 0.4
    # Unreserved: the slowest worker-PS path. Workers s0, s2, PS s3: min(4, 25) = 4.
    free = sync_job(worker={"cpu": 1}, ps={"cpu": 1})
    p2 = Placement.of({0: 1, 2: 1}, {3: 1})
    assert parts(fam, free, p2, CL)[1] == pytest.approx(0.4)  # 1.6 / (1 * 4)


def test_sync_fixed_global_batch() -> None:
    fam = SyncPSModel()
    # F = 64 samples, batch_size 1 (a unit is a sample), n_w = 4 -> u = 64 / (1 * 4) = 16.
    job = sync_job(global_batch=64, batch_size=1)
    p = Placement.of({0: 2, 1: 2}, {0: 1, 1: 1})
    compute, comm = parts(fam, job, p, CL)
    assert compute == pytest.approx(0.16)  # 16 * 0.01
    assert comm == pytest.approx(0.4)  # 1.6 / (2 * 2)
    est = RuntimeEstimator(CL)
    assert est.units_per_iteration(job, p) == 64.0  # F / batch_size
    assert est.throughput(job, p) == pytest.approx(64 / 0.56)
    # n_w = 8: u = 8 -> compute 0.08; comm unchanged -> 64 / 0.48 units/s.
    p8 = Placement.of({0: 4, 1: 4}, {0: 1, 1: 1})
    assert est.throughput(job, p8) == pytest.approx(64 / 0.48)


def test_sync_throughput_without_global_batch_is_nw_units() -> None:
    est = RuntimeEstimator(CL)
    job = sync_job()
    p = Placement.of({1: 4}, {1: 2})
    assert est.units_per_iteration(job, p) == 4.0
    assert est.throughput(job, p) == pytest.approx(4 / 0.018)


# Heterogeneous PS / RA (spec 002 M1/M2), DPS bandwidth (spec 004 R1-R3) ---------------------


def hetero_job(arch: str = "ps", **kw: object) -> JobSpec:
    args: dict = dict(
        job_id="h",
        arch=arch,
        sync="sync",
        compute_s=1.0,
        update_s=0.05,
        gradient_mb=50.0,  # 2 * pi = 2 * 0.4 Gbit = 0.8 Gbit
        worker={"cpu": 1, "bw_gbps": 1.0},
        ps={"cpu": 1, "bw_gbps": 4.0},
        worker_types={"fast": {"cpu": 4, "bw_gbps": 2.0}, "plain": {"cpu": 4}},
        ps_types={"big": {"cpu": 2, "bw_gbps": 4.0}},
        compute_s_by_type={"fast": 0.3, "plain": 0.3},
        chunks=8,
    )
    args.update(kw)
    return JobSpec(**args)


def test_hetero_ps_formula() -> None:
    job, fam = hetero_job(), HeteroModel()
    spread = Placement.of({0: 2}, {1: 1}, worker_type="fast", ps_type="big")
    # v + U + 2 pi / b = 0.3 + 0.05 + 0.8 / 2 = 0.75
    assert total(fam, job, spread, CL) == pytest.approx(0.75)
    # q = 1: v + U = 0.35
    local = Placement.of({0: 2}, {0: 1}, worker_type="fast", ps_type="big")
    assert total(fam, job, local, CL) == pytest.approx(0.35)
    # Independent of N, the PS count and how the spread is arranged (002 §2.2).
    wide = Placement.of({0: 3, 2: 3}, {1: 2, 3: 1}, worker_type="fast", ps_type="big")
    assert total(fam, job, wide, CL) == pytest.approx(0.75)


def test_hetero_ra_formula() -> None:
    job, fam = hetero_job(arch="allreduce"), HeteroModel()
    spread = Placement.of({0: 2, 1: 2}, worker_type="fast")
    # Phi = 4: v + U*3/4 + 2 pi * 3 / (4 b) = 0.3 + 0.0375 + 0.8 * 0.75 / 2 = 0.6375
    assert total(fam, job, spread, CL) == pytest.approx(0.6375)
    local = Placement.of({0: 4}, worker_type="fast")
    assert total(fam, job, local, CL) == pytest.approx(0.3375)  # 0.3 + 0.0375
    assert total(fam, job, Placement.of({0: 1}, worker_type="fast"), CL) == pytest.approx(0.3)
    # An unreserved type spread over s0, s1: b is the ring's slowest path (10 Gbit/s).
    # Phi = 2: 0.3 + 0.05 / 2 + 0.8 * 0.5 / 10 = 0.3 + 0.025 + 0.04 = 0.365
    plain = Placement.of({0: 1, 1: 1}, worker_type="plain")
    assert total(fam, job, plain, CL) == pytest.approx(0.365)


def test_dps_bandwidth_rule() -> None:
    job, fam = hetero_job(), HeteroModel(bw_rule="dps")
    assert fam.name == "dps"
    # d_W = 4: b = min(h = 2, H / d_W = 4 / 4 = 1) = 1 -> 0.35 + 0.8 / 1 = 1.15
    p4 = Placement.of({0: 2, 1: 2}, {2: 1}, worker_type="fast", ps_type="big")
    assert total(fam, job, p4, CL) == pytest.approx(1.15)
    # d_W = 2: b = min(2, 4 / 2 = 2) = 2 -> 0.35 + 0.4 = 0.75 (same as the worker rule)
    p2 = Placement.of({0: 2}, {2: 1}, worker_type="fast", ps_type="big")
    assert total(fam, job, p2, CL) == pytest.approx(0.75)
    assert total(HeteroModel(), job, p4, CL) == pytest.approx(0.75)  # worker rule ignores H
    # R3: co-located, no transfer term whatever b is.
    p_loc = Placement.of({0: 4}, {0: 1}, worker_type="fast", ps_type="big")
    assert total(fam, job, p_loc, CL) == pytest.approx(0.35)


def test_hetero_global_batch_scales_compute() -> None:
    fam = HeteroModel()
    job = hetero_job(global_batch=64, batch_size=8)
    # u = 64 / (8 * 4) = 2 mini-batches per worker: 2 * 0.3 + 0.05 + 0.4 = 1.05
    p = Placement.of({0: 2, 1: 2}, {2: 1}, worker_type="fast", ps_type="big")
    assert total(fam, job, p, CL) == pytest.approx(1.05)


# Ring-all-reduce (spec 003 (1), (E1), (E2)) --------------------------------------------------


def ring_job(**kw: object) -> JobSpec:
    args: dict = dict(
        job_id="r",
        arch="allreduce",
        compute_s=0.2,
        update_s=0.02,
        gradient_mb=100.0,  # 2D = 1.6 Gbit
        worker={"cpu": 1},
        chunks=8,
    )
    args.update(kw)
    return JobSpec(**args)


def test_ring_within_rack() -> None:
    job, fam = ring_job(), RingAllReduceModel()
    p = Placement.of({0: 1, 1: 1})
    assert ring_bottleneck_gbps(job, p, CL) == 10.0
    # w = 2: 1/2 * (1.6 / 10 + 0.02) + 0.2 = 0.5 * 0.18 + 0.2 = 0.29
    assert total(fam, job, p, CL) == pytest.approx(0.29)
    # w = 4 on two servers: intra hops (100) are faster than the 10 Gbit/s hops.
    p4 = Placement.of({0: 2, 1: 2})
    assert ring_bottleneck_gbps(job, p4, CL) == 10.0
    assert total(fam, job, p4, CL) == pytest.approx(0.335)  # 0.75 * 0.18 + 0.2


def test_ring_cross_rack_is_paced_by_slowest_hop() -> None:
    job, fam = ring_job(), RingAllReduceModel()
    p = Placement.of({0: 1, 1: 1, 2: 1})
    # Hop s1 -> s2 crosses rack b's 4 Gbit/s uplink.
    assert ring_bottleneck_gbps(job, p, CL) == 4.0
    # w = 3: 2/3 * (1.6 / 4 + 0.02) + 0.2 = 2/3 * 0.42 + 0.2 = 0.48
    assert total(fam, job, p, CL) == pytest.approx(0.48)
    # Explicit ring order is honoured.
    pr = Placement(((0, 1), (1, 1), (2, 1)), ring=(2, 0, 1))
    assert ring_order(pr) == (2, 0, 1)
    assert ring_bottleneck_gbps(job, pr, CL) == 4.0


def test_ring_single_server_and_reservation_cap() -> None:
    fam = RingAllReduceModel()
    job = ring_job()
    # All on one server: every hop intra-server (100). 0.75 * (1.6/100 + 0.02) + 0.2 = 0.227
    assert total(fam, job, Placement.of({3: 4}), CL) == pytest.approx(0.227)
    assert total(fam, job, Placement.of({3: 1}), CL) == pytest.approx(0.2)  # w = 1: T_cmp
    reserved = ring_job(worker={"cpu": 1, "bw_gbps": 2.0})
    # Inter-server hops capped by the 2 Gbit/s reservation: 0.5 * (1.6/2 + 0.02) + 0.2 = 0.61
    p = Placement.of({0: 1, 1: 1})
    assert ring_bottleneck_gbps(reserved, p, CL) == 2.0
    assert total(fam, reserved, p, CL) == pytest.approx(0.61)
    # Intra-server hops are not capped by the reservation (E1).
    assert ring_bottleneck_gbps(reserved, Placement.of({0: 3}), CL) == 100.0


def test_ring_slow_intra_server_hop() -> None:
    # Intra-server rate 5 < uplink 10: a server with two workers paces the ring at 5.
    cl = topo_cluster(intra=5.0)
    job = ring_job()
    assert ring_bottleneck_gbps(job, Placement.of({0: 2, 1: 1}), cl) == 5.0
    assert ring_bottleneck_gbps(job, Placement.of({0: 1, 1: 1}), cl) == 10.0


def test_ring_global_batch_and_throughput() -> None:
    fam = RingAllReduceModel()
    job = ring_job(global_batch=64, batch_size=8)
    p = Placement.of({0: 2, 1: 2})
    # u = 64 / (8 * 4) = 2: compute 0.4; comm 0.75 * 0.18 = 0.135
    compute, comm = parts(fam, job, p, CL)
    assert compute == pytest.approx(0.4)
    assert comm == pytest.approx(0.135)
    est = RuntimeEstimator(CL)
    assert est.units_per_iteration(job, p) == 8.0  # 64 / 8
    assert est.throughput(job, p) == pytest.approx(8 / 0.535)
    # Without a global batch: w units per iteration.
    # (a distinct job id: the estimator caches predictions per job id and placement)
    assert est.throughput(ring_job(job_id="r2"), p) == pytest.approx(4 / 0.335)
