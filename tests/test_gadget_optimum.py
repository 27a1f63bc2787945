"""The exact per-slot optimum of spec 003 (GADGET's G-VNE, §3.3/§3.7) against brute force.

Every solution is checked with :meth:`SlotProblem.check` (server and link capacities,
rings over the placed servers) and valued with :meth:`SlotProblem.value`. The brute force
tries every worker count per server per job *and every ring order*, so it also checks the
module's claim that the ring grouped by rack is the best order on a two-tier tree.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Sequence

import numpy as np
import pytest

from mlsched.core import Cluster, Placement, ResourceVector, Server, Topology
from mlsched.scheduler.gadget.problem import RingJob, SlotProblem
from mlsched.scheduler.offline.gadget_optimum import SlotOptimum, slot_optimum, slot_relaxation
from mlsched.scheduler.solvers.highs import SolveStatus

LIMIT_S = 20.0
TOL = 1e-6


def make_cluster(
    servers: Sequence[tuple[str, str, int, float]], rack_gbps: dict[str, float]
) -> Cluster:
    """Servers as (name, rack, GPUs, uplink Gbit/s); rack uplinks per rack."""
    return Cluster(
        tuple(
            Server(name, ResourceVector({"gpu": gpus, "cpu": 8}), rack=rack, uplink_gbps=up)
            for name, rack, gpus, up in servers
        ),
        Topology(intra_server_gbps=100.0, rack_uplink_gbps=rack_gbps),
    )


def ring_job(
    cluster: Cluster,
    job_id: str,
    gains: Iterable[float],
    hop_gbps: float,
    hosts: Sequence[int] | None = None,
    gpu: int = 1,
    cpu: int = 1,
) -> RingJob:
    demand = cluster.demand_array(ResourceVector({"gpu": gpu, "cpu": cpu}))
    hosts = tuple(range(len(cluster.servers))) if hosts is None else tuple(hosts)
    return RingJob(job_id, tuple(float(g) for g in gains), demand, float(hop_gbps), hosts)


def solve(problem: SlotProblem, **kw: float) -> SlotOptimum:
    """Solve and check what every solution must satisfy."""
    result = slot_optimum(problem, time_limit_s=kw.pop("time_limit_s", LIMIT_S), **kw)
    assert problem.check(result.placements) == []
    assert problem.value(result.placements) == pytest.approx(result.value, abs=TOL)
    if result.placements:
        assert result.value == pytest.approx(result.objective, abs=1e-6)
    assert result.bound >= result.value - TOL
    rack_of = problem.links.rack_of
    for placement in result.placements.values():
        ring = placement.ring
        assert ring is not None
        # Grouped by rack, racks and servers in index order.
        assert list(ring) == sorted(ring, key=lambda s: (rack_of[s], s))
    return result


# --- brute force ---------------------------------------------------------------------


def worker_vectors(hosts: Sequence[int], most: int) -> Iterator[dict[int, int]]:
    """Every {server: workers} over ``hosts`` with 1..most workers in all."""
    for counts in itertools.product(range(most + 1), repeat=len(hosts)):
        if 1 <= sum(counts) <= most:
            yield {s: c for s, c in zip(hosts, counts, strict=True) if c}


def ring_orders(servers: Sequence[int]) -> Iterator[tuple[int, ...]]:
    """Every distinct directed ring over ``servers`` (the first server fixed)."""
    first, *rest = sorted(servers)
    for perm in itertools.permutations(rest):
        yield (first, *perm)


def brute_force(problem: SlotProblem) -> tuple[float, dict[str, Placement]]:
    """The best value over every worker count per server per job and every ring order."""
    options: list[list[tuple[float, np.ndarray, np.ndarray, Placement | None]]] = []
    zero = (np.zeros_like(problem.capacity, dtype=float), np.zeros(len(problem.links)))
    for job in problem.jobs:
        opts: list[tuple[float, np.ndarray, np.ndarray, Placement | None]] = [(0.0, *zero, None)]
        for workers in worker_vectors(job.hosts, job.max_ring):
            for ring in ring_orders(list(workers)):
                placement = Placement(tuple(workers.items()), ring=ring)
                alone = {job.job_id: placement}
                if problem.check(alone):
                    continue
                used, link_used = problem.loads(alone)
                opts.append((job.gain(placement.n_workers), used, link_used, placement))
        options.append(opts)
    best_value, best = 0.0, {}

    def walk(i: int, value: float, used: np.ndarray, link_used: np.ndarray, chosen: dict) -> None:
        nonlocal best_value, best
        if i == len(options):
            if value > best_value + TOL:
                best_value, best = value, dict(chosen)
            return
        for gain, u, lu, placement in options[i]:
            total, link_total = used + u, link_used + lu
            if (total - problem.capacity > TOL).any():
                continue
            if (link_total - problem.link_capacity > TOL).any():
                continue
            if placement is not None:
                chosen[problem.jobs[i].job_id] = placement
            walk(i + 1, value + gain, total, link_total, chosen)
            chosen.pop(problem.jobs[i].job_id, None)

    walk(0, 0.0, *zero, {})
    return best_value, best


def tiny_problem(seed: int) -> SlotProblem:
    """3-4 servers in 2 racks (numbered across racks), 1-3 jobs, rings up to 3, tight
    links and some capacity already taken."""
    rng = np.random.default_rng(seed)
    n_servers = int(rng.integers(3, 5))
    racks = ("a", "b")
    servers = [
        (
            f"s{i}",
            racks[int(rng.integers(2)) if i >= 2 else i],
            int(rng.integers(1, 3)),
            float(rng.choice([2.0, 3.0, 4.0])),
        )
        for i in range(n_servers)
    ]
    cluster = make_cluster(servers, {r: float(rng.choice([1.0, 2.0, 4.0])) for r in racks})
    jobs = []
    for j in range(int(rng.integers(1, 4))):
        q = int(rng.integers(1, 4))
        gains = np.cumsum(rng.uniform(0.1, 3.0, q))
        hosts = sorted(
            rng.choice(n_servers, size=int(rng.integers(2, n_servers + 1)), replace=False)
        )
        jobs.append(
            ring_job(
                cluster,
                f"j{j}",
                gains,
                float(rng.choice([0.0, 1.0, 2.0, 2.0, 3.0])),
                hosts=[int(h) for h in hosts],
                cpu=int(rng.integers(1, 4)),
            )
        )
    capacity = cluster.capacity.astype(float).copy()
    cpu = cluster.resource_names.index("cpu")
    capacity[:, cpu] -= rng.integers(0, 7, n_servers)  # cpu already in use
    links = cluster.links.capacity.copy()
    links -= rng.choice([0.0, 1.0], len(links))
    return SlotProblem(cluster, tuple(jobs), capacity, links)


@pytest.mark.parametrize("seed", range(16))
def test_matches_brute_force(seed: int) -> None:
    problem = tiny_problem(seed)
    expected, witness = brute_force(problem)
    assert problem.check(witness) == []
    assert problem.value(witness) == pytest.approx(expected)
    result = solve(problem)
    assert result.proven
    assert result.status == SolveStatus.OPTIMAL.value
    assert result.value == pytest.approx(expected, abs=1e-6)
    assert result.value <= slot_relaxation(problem, time_limit_s=LIMIT_S) + TOL


def test_brute_force_sees_links() -> None:
    """The tiny instances are not all slack: links change the optimum on some of them."""
    changed = 0
    for seed in range(16):
        problem = tiny_problem(seed)
        free = SlotProblem(
            problem.cluster, problem.jobs, problem.capacity, np.full(len(problem.links), 1e9)
        )
        changed += slot_optimum(problem, time_limit_s=LIMIT_S).value < (
            slot_optimum(free, time_limit_s=LIMIT_S).value - TOL
        )
    assert changed >= 2


# --- links ---------------------------------------------------------------------------


def rack_cluster(rack_gbps: float) -> Cluster:
    """Rack a: a0 (2 GPUs), a1 (1 GPU); rack b: b0 (2 GPUs); numbered a0, b0, a1."""
    return make_cluster(
        [("a0", "a", 2, 10.0), ("b0", "b", 2, 10.0), ("a1", "a", 1, 10.0)],
        {"a": rack_gbps, "b": rack_gbps},
    )


A0, B0, A1 = 0, 1, 2


def test_small_rack_uplink_keeps_the_ring_in_one_rack() -> None:
    # 4 workers need rack b: its 4 Gbit/s uplink cannot carry a 5 Gbit/s ring.
    cluster = rack_cluster(4.0)
    problem = SlotProblem.full(cluster, [ring_job(cluster, "j", (1, 2, 3, 4), 5.0)])
    result = solve(problem)
    assert result.proven
    assert result.value == pytest.approx(3.0)
    placement = result.placements["j"]
    assert dict(placement.workers) == {A0: 2, A1: 1}
    assert placement.ring == (A0, A1)


def test_big_rack_uplink_allows_the_cross_rack_ring() -> None:
    cluster = rack_cluster(6.0)
    problem = SlotProblem.full(cluster, [ring_job(cluster, "j", (1, 2, 3, 4), 5.0)])
    result = solve(problem)
    assert result.value == pytest.approx(4.0)
    placement = result.placements["j"]
    assert placement.n_workers == 4
    assert B0 in placement.ring  # type: ignore[operator]
    assert placement.ring[0] == A0 or placement.ring[0] == A1  # type: ignore[index]


def test_a_job_that_only_pays_across_racks_is_dropped() -> None:
    cluster = rack_cluster(4.0)
    job = ring_job(cluster, "j", (0, 0, 0, 10), 5.0)
    problem = SlotProblem.full(cluster, [job])
    result = solve(problem)
    assert result.value == 0.0
    assert result.placements == {}
    assert result.proven


@pytest.mark.parametrize(("uplink", "expected"), [(6.0, 6.0), (20.0, 10.0)])
def test_server_uplink_limits_multi_server_rings(uplink: float, expected: float) -> None:
    # Three 2-GPU servers, two jobs that want rings of 3: both rings need two servers, so
    # one server carries both; a 6 Gbit/s uplink carries only one 5 Gbit/s ring, and the
    # other job settles for 2 workers on one server.
    cluster = make_cluster([(f"a{i}", "a", 2, uplink) for i in range(3)], {"a": 100.0})
    jobs = [ring_job(cluster, f"j{i}", (1, 1, 5), 5.0) for i in range(2)]
    result = solve(SlotProblem.full(cluster, jobs))
    assert result.value == pytest.approx(expected)
    multi = [p for p in result.placements.values() if len(p.workers) > 1]
    assert len(multi) == (1 if uplink < 10 else 2)


def test_jobs_without_hop_reservation_ignore_links() -> None:
    cluster = rack_cluster(4.0)
    no_links = np.zeros(len(cluster.links))
    free = ring_job(cluster, "free", (1, 2, 3, 4, 5), 0.0)
    problem = SlotProblem(cluster, (free,), cluster.capacity, no_links)
    result = solve(problem)
    assert result.value == pytest.approx(5.0)
    assert dict(result.placements["free"].workers) == {A0: 2, B0: 2, A1: 1}
    # The same job with a reservation may only use one server.
    held = ring_job(cluster, "held", (1, 2, 3, 4, 5), 1.0)
    result = solve(SlotProblem(cluster, (held,), cluster.capacity, no_links))
    assert result.value == pytest.approx(2.0)
    assert len(result.placements["held"].workers) == 1


def test_negative_free_link_capacity_counts_as_none() -> None:
    cluster = rack_cluster(100.0)
    links = np.full(len(cluster.links), -1.0)
    job = ring_job(cluster, "j", (1, 2, 3), 1.0)
    result = slot_optimum(
        SlotProblem(cluster, (job,), cluster.capacity, links), time_limit_s=LIMIT_S
    )
    assert result.value == pytest.approx(2.0)
    assert len(result.placements["j"].workers) == 1


# --- bounds, limits, edge cases ------------------------------------------------------


def medium_problem(seed: int, n_servers: int = 9, n_jobs: int = 6) -> SlotProblem:
    rng = np.random.default_rng(seed)
    servers = [
        (f"s{i}", f"r{i % 3}", int(rng.choice([1, 2, 4])), float(rng.uniform(4, 12)))
        for i in range(n_servers)
    ]
    cluster = make_cluster(servers, {f"r{r}": float(rng.uniform(5, 20)) for r in range(3)})
    jobs = [
        ring_job(
            cluster,
            f"j{j}",
            np.sqrt(np.arange(1, 6)) * rng.uniform(1, 3),
            float(rng.choice([0.0, 2.0, 4.0])),
        )
        for j in range(n_jobs)
    ]
    return SlotProblem.full(cluster, jobs)


@pytest.mark.parametrize("seed", range(3))
def test_optimum_never_exceeds_the_lp_relaxation(seed: int) -> None:
    problem = medium_problem(seed)
    result = solve(problem)
    relaxed = slot_relaxation(problem, time_limit_s=LIMIT_S)
    assert result.value <= relaxed + TOL
    assert result.bound <= sum(max(j.gains) for j in problem.jobs) + TOL


@pytest.mark.parametrize("bad", [0, 0.0, -1.0, math.nan, math.inf, True, "5"])
def test_bad_time_limit_raises(bad: object) -> None:
    problem = medium_problem(0, n_servers=3, n_jobs=1)
    with pytest.raises(ValueError, match="time_limit_s"):
        slot_optimum(problem, time_limit_s=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="time_limit_s"):
        slot_relaxation(problem, time_limit_s=bad)  # type: ignore[arg-type]
    # Even with nothing to solve.
    with pytest.raises(ValueError, match="time_limit_s"):
        slot_optimum(SlotProblem.full(problem.cluster, []), time_limit_s=bad)  # type: ignore[arg-type]


def test_bad_gap_raises() -> None:
    problem = medium_problem(0, n_servers=3, n_jobs=1)
    with pytest.raises(ValueError, match="mip_rel_gap"):
        slot_optimum(problem, time_limit_s=LIMIT_S, mip_rel_gap=-0.1)


def test_a_tiny_time_limit_still_returns_a_valid_schedule() -> None:
    problem = medium_problem(1, n_servers=30, n_jobs=20)
    result = solve(problem, time_limit_s=1e-3)
    assert result.status in {s.value for s in SolveStatus}
    if not result.proven:
        assert result.status != SolveStatus.OPTIMAL.value


def test_gap_option_is_passed_through() -> None:
    problem = medium_problem(2)
    exact = solve(problem)
    loose = solve(problem, mip_rel_gap=0.5)
    assert loose.value >= 0.5 * exact.value - TOL


def test_empty_problem() -> None:
    cluster = rack_cluster(4.0)
    result = slot_optimum(SlotProblem.full(cluster, []), time_limit_s=LIMIT_S)
    assert (result.value, result.bound, result.proven, dict(result.placements)) == (
        0.0,
        0.0,
        True,
        {},
    )
    assert slot_relaxation(SlotProblem.full(cluster, []), time_limit_s=LIMIT_S) == 0.0


def test_unplaceable_jobs_are_reported() -> None:
    cluster = rack_cluster(4.0)
    big = ring_job(cluster, "big", (1, 2), 0.0, gpu=3)  # no server has 3 GPUs
    nowhere = ring_job(cluster, "nowhere", (1,), 0.0, hosts=())
    ok = ring_job(cluster, "ok", (1,), 0.0)
    result = solve(SlotProblem.full(cluster, [big, nowhere, ok]))
    assert result.unplaceable == ("big", "nowhere")
    assert set(result.placements) == {"ok"}
    assert result.value == pytest.approx(1.0)


def test_duplicate_job_ids_are_refused() -> None:
    cluster = rack_cluster(4.0)
    job = ring_job(cluster, "j", (1,), 0.0)
    with pytest.raises(ValueError, match="twice"):
        slot_optimum(SlotProblem.full(cluster, [job, job]), time_limit_s=LIMIT_S)


def test_bad_host_index_is_refused() -> None:
    cluster = rack_cluster(4.0)
    job = ring_job(cluster, "j", (1,), 0.0, hosts=(7,))
    with pytest.raises(ValueError, match="host 7"):
        slot_optimum(SlotProblem.full(cluster, [job]), time_limit_s=LIMIT_S)
