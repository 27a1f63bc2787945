"""Spec 003's ring placement heuristic P0 and the ring variants of fifo, drf and tiresias.

P0 is checked on a five-server, two-rack cluster (rack a: a0 4 GPUs, a1 2, a2 1; rack b:
b0 8, b1 2; 10 Gbit/s server links, 20 Gbit/s rack links). The policies run through the
real engine and simulator; every slot's allocation is recorded and checked here, not only
by the engine: valid rings, link reservations within capacity, fixed counts, preemption.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from engine_helpers import FREE_RESTARTS, make_engine
from strategies import RecordingExecutor

from mlsched.core import (
    Arch,
    Cluster,
    JobSpec,
    JobState,
    Placement,
    Pool,
    ResourceVector,
    Server,
    Topology,
)
from mlsched.core.allocation import RejectKind
from mlsched.engine.engine import Engine
from mlsched.engine.simulator import SimulatedExecutor
from mlsched.scheduler import create
from mlsched.scheduler.baselines.common import fixed_counts
from mlsched.scheduler.ring_placement import RingLedger, p0_ring, ring_link_load
from mlsched.workloads import Workload
from mlsched.workloads.gadget import gadget_paper

A0, A1, A2, B0, B1 = range(5)
GPU = ResourceVector({"gpu": 1})


def two_racks(rack_gbps: float = 20.0, **servers: dict[str, object]) -> Cluster:
    shape = {"a0": ("a", 4), "a1": ("a", 2), "a2": ("a", 1), "b0": ("b", 8), "b1": ("b", 2)}
    out = []
    for name, (rack, gpus) in shape.items():
        extra: dict[str, object] = {"rack": rack, "uplink_gbps": 10.0, **servers.get(name, {})}
        out.append(Server(name, ResourceVector({"gpu": gpus}), **extra))  # type: ignore[arg-type]
    return Cluster(tuple(out), Topology(rack_uplink_gbps={"a": rack_gbps, "b": rack_gbps}))


def ring_job(job_id: str = "j", hop: float | None = 1.5, **kw: object) -> JobSpec:
    fields: dict[str, object] = {
        "arch": Arch.ALLREDUCE,
        "batches_per_chunk": 1000,
        "max_workers": 16,
        "worker": GPU,
        "hop_gbps": hop,
        "gradient_mb": 0.0,  # 600 iterations per worker per 60-s slot, wherever it runs
    }
    fields.update(kw)
    return JobSpec(job_id, **fields)  # type: ignore[arg-type]


def p0(cluster: Cluster, job: JobSpec, k: int, free: np.ndarray | None = None) -> Placement | None:
    cap = np.array(cluster.capacity, dtype=float) if free is None else free
    return p0_ring(cluster, cap, np.array(cluster.links.capacity), job, k)


def link_names(cluster: Cluster, load: dict[int, float]) -> dict[str, float]:
    return {cluster.links.links[i].name: g for i, g in load.items()}


def link_index(cluster: Cluster, name: str) -> int:
    return next(i for i, link in enumerate(cluster.links.links) if link.name == name)


# P0 -------------------------------------------------------------------------------------
def test_one_server_when_one_fits_all_the_best_fit() -> None:
    cluster = two_racks()
    job = ring_job()
    # k = 2: a1, b1 (2 GPUs) leave none spare; the lower index wins.
    assert p0(cluster, job, 2) == Placement(((A1, 2),), ring=(A1,))
    assert p0(cluster, job, 3) == Placement(((A0, 3),), ring=(A0,))
    assert p0(cluster, job, 1) == Placement(((A2, 1),), ring=(A2,))
    assert p0(cluster, job, 5) == Placement(((B0, 5),), ring=(B0,))


def test_racks_fill_most_free_first_and_the_ring_groups_them() -> None:
    cluster = two_racks()
    job = ring_job()
    # Rack b (10 free) before rack a (7); b0 before b1; then rack a's most free, a0.
    p = p0(cluster, job, 12)
    assert p is not None and p.ring == (B0, B1, A0)
    assert dict(p.workers) == {B0: 8, B1: 2, A0: 2}
    # Within a rack by free slots, not by index; ties by index; then the next rack.
    free = np.array(cluster.capacity, dtype=float)
    free[A0, 0], free[B0, 0] = 1, 1  # rack a: 1, 2, 1 (4); rack b: 1, 2 (3)
    p = p0(cluster, job, 6, free)
    assert p is not None and p.ring == (A1, A0, A2, B1)
    assert dict(p.workers) == {A1: 2, A0: 1, A2: 1, B1: 2}
    # The ring crosses each rack link once per direction: hops b0 -> b1 -> a0 -> b0.
    wide = p0(cluster, job, 12)
    assert wide is not None
    load = link_names(cluster, ring_link_load(cluster, job, wide))
    assert load["b/switch->core"] == load["a/switch->core"] == 1.5
    assert load["core->a/switch"] == load["core->b/switch"] == 1.5
    assert p0(cluster, job, 18) is None  # 17 GPUs in all


def test_a_too_small_link_refuses_the_ring_without_looking_elsewhere() -> None:
    cluster = two_racks(rack_gbps=2.0)
    assert p0(cluster, ring_job(hop=3.0), 12) is None  # the rack links carry 2 Gbit/s
    assert p0(cluster, ring_job(hop=1.5), 12) is not None
    assert p0(cluster, ring_job(hop=3.0), 9) == Placement(((B0, 8), (B1, 1)), ring=(B0, B1))
    # b0's up link has 2 Gbit/s left: P0 still picks b0 and b1, so the job waits.
    links = np.array(cluster.links.capacity)
    links[2 * B0] = 2.0
    free = np.array(cluster.capacity, dtype=float)
    assert p0_ring(cluster, free, links, ring_job(hop=3.0), 9) is None
    # No hop reservation: links are not looked at, even with none free.
    assert p0_ring(cluster, free, links * 0, ring_job(hop=None), 9) is not None


def test_p0_reads_its_inputs_only_and_respects_pools_and_gpu_types() -> None:
    cluster = two_racks(b0={"pool": Pool.PS}, a1={"gpu_type": "V100"}, b1={"gpu_type": "V100"})
    free = np.array(cluster.capacity, dtype=float)
    links = np.array(cluster.links.capacity)
    before = free.copy(), links.copy()
    p = p0_ring(cluster, free, links, ring_job(), 8)
    assert p is not None and B0 not in dict(p.workers)  # b0 hosts no workers
    assert np.array_equal(free, before[0]) and np.array_equal(links, before[1])
    typed = ring_job(gpu_type="V100")
    assert p0(cluster, typed, 4) == Placement(((A1, 2), (B1, 2)), ring=(A1, B1))
    assert p0(cluster, typed, 5) is None


def test_ring_ledger_takes_releases_and_steers_by_reservations() -> None:
    cluster = two_racks()
    ledger = RingLedger(cluster)
    job = ring_job(hop=4.0)
    p = ledger.place(job, 12)
    assert p is not None and ledger.free[B0, 0] == 0 and ledger.free[A0, 0] == 2
    assert ledger.link_free[link_index(cluster, "b/switch->core")] == pytest.approx(16.0)
    assert ledger.link_free[link_index(cluster, "a0->a/switch")] == pytest.approx(6.0)
    # A 7 Gbit/s ring a0 <-> b1 does not fit the 6 left on a0's up link: refused whole.
    refused = ring_job("k", hop=7.0)
    free = ledger.free.copy()
    assert not ledger.take(refused, Placement(((A0, 1), (B1, 1)), ring=(A0, B1)))
    assert np.array_equal(ledger.free, free)
    ledger.release(job, p)
    assert np.array_equal(ledger.free, cluster.capacity)
    assert np.allclose(ledger.link_free, cluster.links.capacity)
    # a1 reserved: a 2-worker job goes to b1 (spare room first), then to a1 when only it is left.
    ledger.reserve(job, Placement(((A1, 2),), ring=(A1,)))
    assert ledger.place(ring_job("x"), 2) == Placement(((B1, 2),), ring=(B1,))
    ledger.free[[A0, A2, B0], 0] = 0
    assert ledger.place(ring_job("y"), 2) == Placement(((A1, 2),), ring=(A1,))


@pytest.mark.parametrize("policy", ["fifo", "drf", "tiresias"])
def test_the_option_is_checked(policy: str) -> None:
    with pytest.raises(ValueError, match="placement"):
        create(policy, placement="rings")
    assert create(policy).placement == "default"  # type: ignore[attr-defined]


# Through the engine ------------------------------------------------------------------------
def run(
    cluster: Cluster, jobs: Sequence[JobSpec], policy: str, *, horizon: int = 60, **options: object
) -> tuple[Engine, RecordingExecutor]:
    executor = RecordingExecutor(SimulatedExecutor(cluster, 60.0, truth=FREE_RESTARTS))
    engine = make_engine(
        cluster,
        create(policy, **options),
        jobs,
        slot_seconds=60.0,
        horizon=horizon,
        executor=executor,
    )
    engine.run()
    return engine, executor


def check_slots(cluster: Cluster, jobs: dict[str, JobSpec], rec: RecordingExecutor) -> float:
    """Every recorded slot: valid rings, GPUs and links within capacity; the largest share of
    a link's capacity reserved in any slot."""
    peak = 0.0
    for allocation in rec.allocations.values():
        used = np.zeros(cluster.capacity.shape)
        links = np.zeros(len(cluster.links))
        for job_id, p in allocation.items():
            assert p.ring is not None and sorted(p.ring) == [s for s, _ in p.workers]
            for s, c in p.workers:
                used[s] += c * cluster.demand_array(jobs[job_id].worker)
            for link, gbps in ring_link_load(cluster, jobs[job_id], p).items():
                links[link] += gbps
        assert (used <= cluster.capacity + 1e-9).all()
        assert (links <= cluster.links.capacity + 1e-6).all()
        peak = max(peak, float((links / cluster.links.capacity).max()))
    return peak


def contended(seed: int) -> Workload:
    """gadget-paper at a tenth of its link speeds: server links 1-10 Gbit/s, hops up to 5."""
    return gadget_paper(seed=seed, jobs=40, servers=8, horizon=60, link_scale=0.1)


@pytest.mark.parametrize("seed", [3, 8])
@pytest.mark.parametrize("policy", ["fifo", "drf", "tiresias"])
def test_ring_variants_keep_links_and_rings_valid_and_finish_jobs(policy: str, seed: int) -> None:
    w = contended(seed)
    engine, rec = run(w.cluster, w.jobs, policy, placement="ring")
    jobs = {j.job_id: j for j in w.jobs}
    assert check_slots(w.cluster, jobs, rec) > 0.8  # links did constrain the placements
    records = engine.records.values()
    done = sum(r.state is JobState.DONE for r in records)
    assert done >= 30, f"{policy}: {done} done"
    # Every job offered a count: the fixed one for fifo and tiresias, up to N_i for drf.
    counts = {
        j: {p.n_workers for a in rec.allocations.values() for jj, p in a.items() if jj == j}
        for j in jobs
    }
    for job_id, seen in counts.items():
        job = jobs[job_id]
        if policy == "drf":
            assert seen <= set(range(1, job.worker_cap + 1))
        elif seen:
            assert seen == {fixed_counts(job, 0)[0]}


def test_fifo_backfills_and_never_moves_a_started_job() -> None:
    cluster = two_racks()
    jobs = [
        ring_job("first", requested_workers=15, batches_per_chunk=15 * 100 * 4),
        ring_job("big", requested_workers=4, arrival_slot=1),
        ring_job("small", requested_workers=2, arrival_slot=1, batches_per_chunk=200),
    ]
    engine, rec = run(cluster, jobs, "fifo", placement="ring")
    starts = {j: min(t for t, a in rec.allocations.items() if j in a) for j in ("big", "small")}
    first_done = engine.records["first"].completion_slot
    assert first_done is not None and starts["small"] == 1 and starts["big"] > first_done
    placements = {a["first"] for a in rec.allocations.values() if "first" in a}
    assert len(placements) == 1 and engine.records["first"].restarts == 0
    assert all(r.state is JobState.DONE for r in engine.records.values())


def test_drf_fills_progressively_and_rings_stay_inside_small_links() -> None:
    cluster = two_racks(rack_gbps=1.0)
    jobs = [ring_job(f"j{i}", hop=2.0, max_workers=16, batches_per_chunk=10**6) for i in range(2)]
    _, rec = run(cluster, jobs, "drf", horizon=2, placement="ring")
    first = rec.allocations[0]
    # Equal dominant shares, so 17 GPUs split 9/8 or so, but a ring cannot cross the 1 Gbit/s
    # rack links: each job stays in one rack (b: 10 GPUs, a: 7).
    racks = [{cluster.servers[s].rack for s, _ in p.workers} for p in first.values()]
    assert all(len(r) == 1 for r in racks) and {next(iter(r)) for r in racks} == {"a", "b"}
    assert sorted(p.n_workers for p in first.values()) == [7, 10]


def test_tiresias_lets_the_least_served_job_preempt() -> None:
    cluster = Cluster((Server("s", ResourceVector({"gpu": 4}), rack="a"),))
    jobs = [
        ring_job("old", requested_workers=4, batches_per_chunk=10**6),
        ring_job("new", requested_workers=4, arrival_slot=2, batches_per_chunk=10**6),
    ]
    _, rec = run(cluster, jobs, "tiresias", horizon=6, placement="ring")
    holder = [next(iter(rec.allocations[t])) for t in range(6)]
    assert holder[:2] == ["old", "old"] and holder[2] == "new"
    assert set(holder[2:]) == {"old", "new"}  # attained service evens out


def test_a_finished_ring_gives_its_links_back_to_the_engine() -> None:
    """Two 3-worker jobs on three 2-GPU servers with 3 Gbit/s links: GPUs fit both, but the
    second ring's 2.5 Gbit/s hop would share y's up link with the first's, so it waits, and
    starts on the first's links when the first completes: the engine must free them then."""
    servers = tuple(Server(n, ResourceVector({"gpu": 2}), rack="a", uplink_gbps=3.0) for n in "xyz")
    cluster = Cluster(servers)
    jobs = [ring_job(f"j{i}", hop=2.5, requested_workers=3, batches_per_chunk=1800) for i in (0, 1)]
    engine, rec = run(cluster, jobs, "fifo", horizon=20, placement="ring")
    assert all(r.state is JobState.DONE for r in engine.records.values())
    assert [list(rec.allocations[t]) for t in (0, 1)] == [["j0"], ["j1"]]
    assert rec.allocations[1]["j1"] == rec.allocations[0]["j0"]  # on the very same links


@pytest.mark.parametrize("policy", ["fifo", "drf", "tiresias"])
def test_ring_mode_rejects_what_p0_never_places(policy: str) -> None:
    cluster = two_racks(rack_gbps=1.0)
    ps = JobSpec("ps", worker=GPU, ps=ResourceVector({"gpu": 0}))
    wide = ring_job("wide", hop=2.0, requested_workers=12, min_workers=12)
    engine, _ = run(cluster, [ps, wide], policy, horizon=3, placement="ring")
    for job_id in ("ps", "wide"):
        record = engine.records[job_id]
        assert record.state is JobState.REJECTED and record.reject_kind is RejectKind.INFEASIBLE


@pytest.mark.parametrize("policy", ["fifo", "drf", "tiresias"])
def test_a_cancelled_ring_frees_its_servers_and_links_for_the_next_slot(policy: str) -> None:
    """Two 3-worker rings whose hops cannot share the 3 Gbit/s links: one runs in slot 1
    (tiresias runs the newcomer), the other waits until the running one is cancelled, then
    starts in the next slot, and the engine holds only its hops."""
    servers = tuple(Server(n, ResourceVector({"gpu": 2}), rack="a", uplink_gbps=3.0) for n in "xyz")
    cluster = Cluster(servers)
    jobs = [
        ring_job(
            f"j{i}",
            hop=2.5,
            requested_workers=3,
            max_workers=3,
            min_workers=3,
            arrival_slot=i,
            batches_per_chunk=10**6,
        )
        for i in (0, 1)
    ]
    engine = make_engine(cluster, create(policy, placement="ring"), jobs, slot_seconds=60.0)
    engine.step()
    engine.step()
    (running,) = engine.placements  # one ring at a time (tiresias: j1, least served)
    assert running == ("j1" if policy == "tiresias" else "j0")
    engine.cancel(running)
    assert not engine.link_used.any()
    engine.step()
    assert set(engine.placements) == {"j0", "j1"} - {running}
    assert engine.link_used.max() == pytest.approx(2.5)
