"""Runtime-model invariants over seeded random parameters (specs 000-004 §2.2): monotone in
bandwidth and gradient size, rings bounded, co-location never slower, linear throughput.

Hand-computed values of the same formulas are in test_perfmodel.py."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np
import pytest
from test_perfmodel import topo_cluster, total

from mlsched.core.allocation import Placement
from mlsched.core.cluster import Cluster, Server, Topology
from mlsched.core.job import JobSpec
from mlsched.perfmodel import (
    FAMILIES,
    PerfFamily,
    RingAllReduceModel,
    RuntimeEstimator,
    SyncPSModel,
)

# Invariants over seeded random parameters ---------------------------------------------------

N_CASES = 40
FAMILY_NAMES = ("ps_async", "ps_sync", "ring", "hetero_ps", "hetero_ra", "dps")


@dataclass
class Case:
    """A random job, placement, cluster and parameter vector, rebuilt at any bandwidth."""

    kind: str
    grad_mb: float
    compute: float
    update: float
    worker_bw: float  # 0 = unreserved
    ps_bw: float
    uplinks: list[float]
    racks: list[str]
    intra: float
    rack_up: float
    workers: dict[int, int]
    ps: dict[int, int]
    scales: np.ndarray  # fitted-parameter multipliers of the prior
    global_batch: int | None = None
    up_factor: dict[int, float] = field(default_factory=dict)

    def family(self) -> PerfFamily:
        name = {"hetero_ps": "hetero", "hetero_ra": "hetero"}.get(self.kind, self.kind)
        return FAMILIES[name]()

    def build(
        self, bw: float = 1.0, grad: float = 1.0, up: dict[int, float] | None = None
    ) -> tuple[PerfFamily, JobSpec, Placement, Cluster]:
        up = up or {}
        servers = tuple(
            Server(f"s{i}", {"cpu": 64}, rack=r, uplink_gbps=u * bw * up.get(i, 1.0))
            for i, (u, r) in enumerate(zip(self.uplinks, self.racks, strict=True))
        )
        racks = {r: self.rack_up * bw for r in set(self.racks)}
        cl = Cluster(servers, Topology(self.intra * bw, 400.0 * bw, racks))
        arch = "allreduce" if self.kind in ("ring", "hetero_ra") else "ps"
        sync = "async" if self.kind == "ps_async" else "sync"
        worker = {"cpu": 1, "bw_gbps": self.worker_bw * bw}
        ps = {"cpu": 1, "bw_gbps": self.ps_bw * bw}
        job = JobSpec(
            job_id="x",
            arch=arch,
            sync=sync,
            compute_s=self.compute,
            update_s=self.update,
            gradient_mb=self.grad_mb * grad,
            worker=worker,
            ps=ps,
            chunks=64,
            global_batch=self.global_batch,
            batch_size=1 if self.global_batch else 32,
        )
        p = Placement.of(self.workers, self.ps if arch == "ps" else {})
        return self.family(), job, p, cl

    def time(self, **kw: object) -> float:
        fam, job, p, cl = self.build(**kw)  # type: ignore[arg-type]
        params = fam.prior(job, None, cl) * self.scales
        return sum(fam.predict(params, job, p, cl))


def random_case(kind: str, seed: int) -> Case:
    rng = np.random.default_rng(seed)
    n_servers = 6
    n_w = int(rng.integers(1, 9))
    n_s = int(rng.integers(1, 4))
    w_servers = rng.choice(n_servers, size=int(rng.integers(1, 4)), replace=False)
    workers: dict[int, int] = {}
    for i in range(n_w):
        s = int(w_servers[i % len(w_servers)])
        workers[s] = workers.get(s, 0) + 1
    ps: dict[int, int] = {}
    for _ in range(n_s):
        s = int(rng.integers(0, n_servers))
        ps[s] = ps.get(s, 0) + 1
    reserved = bool(rng.random() < 0.5)
    n_params = len(
        FAMILIES[{"hetero_ps": "hetero", "hetero_ra": "hetero"}.get(kind, kind)]().param_names
    )
    return Case(
        kind=kind,
        grad_mb=float(rng.uniform(1, 500)),
        compute=float(rng.uniform(0.01, 2.0)),
        update=float(rng.uniform(0.0, 0.2)),
        worker_bw=float(rng.uniform(0.5, 20)) if reserved or kind == "dps" else 0.0,
        ps_bw=float(rng.uniform(1, 40)),
        uplinks=[float(u) for u in rng.uniform(1, 40, n_servers)],
        racks=[f"r{int(r)}" for r in rng.integers(0, 3, n_servers)],
        intra=float(rng.uniform(20, 200)),
        rack_up=float(rng.uniform(2, 100)),
        workers=workers,
        ps=ps,
        scales=rng.uniform(0.5, 2.0, n_params),
        global_batch=int(rng.integers(64, 512)) if rng.random() < 0.3 else None,
    )


@pytest.mark.parametrize("kind", FAMILY_NAMES)
def test_monotone_in_bandwidth(kind: str) -> None:
    for seed in range(N_CASES):
        case = random_case(kind, seed)
        times = [case.time(bw=k) for k in (0.25, 0.5, 1.0, 2.0, 4.0, 16.0)]
        assert all(math.isfinite(t) and t > 0 for t in times)
        for slow, fast in itertools.pairwise(times):
            assert fast <= slow * (1 + 1e-12), (kind, seed, times)
        # Raising one server's uplink never slows the job down.
        for s in range(len(case.uplinks)):
            assert case.time(up={s: 3.0}) <= times[2] * (1 + 1e-12), (kind, seed, s)


@pytest.mark.parametrize("kind", FAMILY_NAMES)
def test_non_decreasing_in_gradient_size(kind: str) -> None:
    for seed in range(N_CASES):
        case = random_case(kind, seed)
        times = [case.time(grad=g) for g in (0.1, 0.5, 1.0, 2.0, 10.0)]
        for small, big in itertools.pairwise(times):
            assert big >= small * (1 - 1e-12), (kind, seed, times)
        # Communication is linear in gradient bytes when the placement is fixed.
        # (ring's reduction term E/G is not a transfer: left out.)
        comm = []
        for g in (1.0, 3.0):
            fam, job, p, cl = case.build(grad=g)
            params = fam.prior(job, None, cl) * case.scales
            params[[n == "reduce_s" for n in fam.param_names]] = 0.0
            comm.append(fam.design(job, p, cl)[1] @ params)
        assert comm[1] == pytest.approx(3 * comm[0], rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("seed", range(20))
def test_ring_grows_like_share_and_is_bounded(seed: int) -> None:
    rng = np.random.default_rng(1000 + seed)
    uplink = float(rng.uniform(1, 40))
    # One worker per server, all in one rack, equal uplinks: b_eff is the same for every w.
    cl = Cluster(
        tuple(Server(f"s{i}", {"cpu": 8}, uplink_gbps=uplink) for i in range(12)),
        Topology(float(rng.uniform(50, 200))),
    )
    job = JobSpec(
        job_id="r",
        arch="allreduce",
        compute_s=float(rng.uniform(0.01, 1)),
        update_s=float(rng.uniform(0, 0.1)),
        gradient_mb=float(rng.uniform(1, 500)),
        chunks=16,
    )
    fam = RingAllReduceModel()
    params = fam.prior(job, None, cl) * rng.uniform(0.5, 2.0, 3)

    def t(w: int) -> float:
        return sum(fam.predict(params, job, Placement.of(dict.fromkeys(range(w), 1)), cl))

    t1 = t(1)
    c = 2 * (t(2) - t1)  # (w-1)/w = 1/2 at w = 2
    bound = t1 + c  # w -> infinity
    assert t1 == pytest.approx(params[0])  # T_cmp only
    prev = t1
    for w in range(2, 13):
        tw = t(w)
        assert tw - t1 == pytest.approx((w - 1) / w * c, rel=1e-12)
        assert prev < tw < bound
        prev = tw


@pytest.mark.parametrize("seed", range(N_CASES))
def test_sync_colocation_never_slower(seed: int) -> None:
    rng = np.random.default_rng(2000 + seed)
    ext = float(rng.uniform(1, 20))
    intra = ext * float(rng.uniform(1.01, 20))
    reserved = bool(rng.random() < 0.5)
    cl = Cluster(
        tuple(Server(f"s{i}", {"cpu": 64}, uplink_gbps=ext) for i in range(4)),
        Topology(intra),
    )
    job = JobSpec(
        job_id="s",
        sync="sync",
        compute_s=float(rng.uniform(0.001, 1)),
        gradient_mb=float(rng.uniform(1, 500)),
        worker={"cpu": 1, "bw_gbps": ext if reserved else 0.0},
        ps={"cpu": 1, "bw_gbps": 4 * ext},
        chunks=32,
        global_batch=int(rng.integers(64, 256)) if rng.random() < 0.5 else None,
        batch_size=1,
    )
    n_w, n_s = int(rng.integers(1, 9)), int(rng.integers(1, 4))
    fam = SyncPSModel()
    local = Placement.of({0: n_w}, {0: n_s})
    spreads = [
        Placement.of({0: n_w}, {1: n_s}),
        Placement.of({0: max(1, n_w - 1), 2: 1}, {0: n_s}),
        Placement.of({1: n_w}, {0: 1, 1: n_s - 1}) if n_s > 1 else Placement.of({1: n_w}, {3: 1}),
    ]
    t_local = total(fam, job, local, cl)
    for sp in spreads:
        assert not sp.colocated
        if sp.n_workers == n_w and sp.n_ps == n_s:
            assert t_local < total(fam, job, sp, cl)


@pytest.mark.parametrize("seed", range(N_CASES))
def test_async_throughput_linear_without_ps_bottleneck(seed: int) -> None:
    rng = np.random.default_rng(3000 + seed)
    b, big_b = float(rng.uniform(0.5, 10)), float(rng.uniform(1, 40))
    job = JobSpec(
        job_id="a",
        sync="async",
        compute_s=float(rng.uniform(0.01, 2)),
        gradient_mb=float(rng.uniform(1, 500)),
        worker={"cpu": 1, "bw_gbps": b},
        ps={"cpu": 1, "bw_gbps": big_b},
        chunks=32,
    )
    cl = topo_cluster()
    est = RuntimeEstimator(cl)

    def place(y: int, z: int) -> Placement:
        return Placement.of({0: (y + 1) // 2, 1: y // 2}, {2: z})

    base = est.throughput(job, place(1, job.ps_needed(1)))
    prev = 0.0
    for y in range(1, 17):
        z = job.ps_needed(y)
        assert z * big_b >= y * b - 1e-9  # 001 (6): PS bandwidth covers the workers
        assert est.throughput(job, place(y, z)) == pytest.approx(y * base, rel=1e-12)
        # With a single PS the PS side saturates: sublinear, never decreasing.
        thr1 = est.throughput(job, place(y, 1))
        assert prev <= thr1 * (1 + 1e-12)
        assert thr1 <= y * base * (1 + 1e-12)
        prev = thr1
    cap = 1 * big_b * 1e9 / (2 * job.gradient_bytes * 8)  # Z*B / (2e) mini-batches per s
    assert est.throughput(job, place(64, 1)) <= cap * (1 + 1e-9)


@pytest.mark.parametrize("seed", range(N_CASES))
def test_hetero_ps_depends_on_placement_only_through_colocation(seed: int) -> None:
    case = random_case("hetero_ps", 4000 + seed)
    case.global_batch = None
    case.worker_bw = max(case.worker_bw, 1.0)  # M1: only the worker type's bandwidth enters
    fam, job, _, cl = case.build()
    ref = total(fam, job, Placement.of({0: 1}, {1: 1}), cl)
    for workers, ps in (({0: 3, 2: 2}, {4: 2}), ({5: 7}, {0: 1, 5: 1})):
        assert total(fam, job, Placement.of(workers, ps), cl) == pytest.approx(ref, rel=1e-12)
    t_local = total(fam, job, Placement.of({3: 5}, {3: 2}), cl)
    assert t_local == pytest.approx(case.compute + case.update, rel=1e-12)
    assert t_local <= ref
