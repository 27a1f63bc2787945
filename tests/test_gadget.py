"""GADGET (spec 003): the pricing oracle, the LP over candidate rings, rounding, and the
policy through the real engine and simulator.

Small instances are solved by brute force here (every way to put each job's workers on
the servers), so the oracle's exactness, the LP's bound and the rounding's feasibility
are checked against an independent answer on several seeds.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from engine_helpers import make_engine

from mlsched.core import (
    Arch,
    Cluster,
    JobSpec,
    JobState,
    ResourceVector,
    Server,
    Topology,
    Utility,
    UtilityKind,
)
from mlsched.engine.engine import Engine
from mlsched.scheduler import create
from mlsched.scheduler.gadget import GadgetPolicy, RingJob, SlotProblem, lp_rs_mde
from mlsched.scheduler.gadget.config_lp import solve_config_lp
from mlsched.scheduler.gadget.embeddings import cheapest, embedding_of
from mlsched.scheduler.gadget.rounding import Ledger, round_embeddings, violation_factors
from mlsched.scheduler.gadget.tiers import solve_in_tiers

SEEDS = range(8)


def small_cluster(rng: np.random.Generator, servers: int = 4, racks: int = 2) -> Cluster:
    """Servers with 1-3 GPUs over racks; links small enough that hops compete."""
    out = tuple(
        Server(
            f"s{i}",
            ResourceVector({"gpu": int(rng.integers(1, 4))}),
            rack=f"r{i % racks}",
            uplink_gbps=float(rng.uniform(2.0, 6.0)),
        )
        for i in range(servers)
    )
    return Cluster(out, Topology(intra_server_gbps=100.0, rack_core_gbps=float(rng.uniform(2, 6))))


def random_jobs(rng: np.random.Generator, cluster: Cluster, n: int, k_max: int) -> list[RingJob]:
    gpu = np.zeros(len(cluster.resource_names))
    gpu[cluster.resource_names.index("gpu")] = 1.0
    jobs = []
    for j in range(n):
        increments = rng.uniform(0.5, 10.0, size=k_max)
        gains = tuple(float(g) for g in np.cumsum(increments))
        hop = float(rng.uniform(0.5, 4.0)) if rng.random() < 0.8 else 0.0
        jobs.append(RingJob(f"j{j}", gains, gpu, hop, tuple(range(len(cluster)))))
    return jobs


def embeddings_of(problem: SlotProblem, job: int) -> list:
    """Every embedding of every size of one job on its own (fits the free capacity)."""
    ring_job = problem.jobs[job]
    n = len(problem.cluster)
    out = []
    for counts in itertools.product(range(ring_job.max_ring + 1), repeat=n):
        k = sum(counts)
        if not 1 <= k <= ring_job.max_ring:
            continue
        e = embedding_of(problem, job, {s: c for s, c in enumerate(counts) if c})
        if not problem.check({ring_job.job_id: e.placement()}):
            out.append(e)
    return out


def brute_force(problem: SlotProblem) -> float:
    options = [[None, *embeddings_of(problem, j)] for j in range(len(problem.jobs))]
    best = 0.0
    for combo in itertools.product(*options):
        chosen = {problem.jobs[e.job].job_id: e.placement() for e in combo if e is not None}
        value = problem.value(chosen)
        if value > best and not problem.check(chosen):
            best = value
    return best


# The pricing oracle ----------------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
def test_cheapest_is_the_cheapest_embedding_of_each_size(seed: int) -> None:
    """At random prices the oracle's cost of each size equals the minimum over every
    embedding, and its embedding costs what it says. A pricing that forgot link charges,
    or the cross-rack case, or a server's room, fails on some seed."""
    rng = np.random.default_rng(seed)
    cluster = small_cluster(rng)
    problem = SlotProblem.full(cluster, random_jobs(rng, cluster, 1, 4))
    node_price = rng.uniform(0, 3, size=cluster.capacity.shape)
    link_price = rng.uniform(0, 3, size=len(cluster.links))
    job = problem.jobs[0]

    def cost(e: object) -> float:
        w = sum(c * float(node_price[s] @ job.demand) for s, c in e.workers)  # type: ignore[attr-defined]
        return w + job.hop_gbps * float(sum(link_price[i] for i in e.links))  # type: ignore[attr-defined]

    every = embeddings_of(problem, 0)
    found = cheapest(problem, 0, node_price, link_price, job.max_ring)
    for k in range(1, job.max_ring + 1):
        of_k = [cost(e) for e in every if e.size == k]
        entry = found[k - 1]
        if not of_k:
            assert entry is None
            continue
        assert entry is not None
        assert entry[1].size == k
        assert entry[0] == pytest.approx(min(of_k), abs=1e-9)
        assert cost(entry[1]) == pytest.approx(entry[0], abs=1e-9)


def test_rings_are_grouped_by_rack_and_cross_each_link_once() -> None:
    rng = np.random.default_rng(0)
    cluster = small_cluster(rng, servers=4, racks=2)  # racks: r0 = {0, 2}, r1 = {1, 3}
    problem = SlotProblem.full(cluster, random_jobs(rng, cluster, 1, 4))
    problem = SlotProblem.full(
        cluster, [RingJob("x", (1.0,) * 4, problem.jobs[0].demand, 1.0, (0, 1, 2, 3))]
    )
    e = embedding_of(problem, 0, {0: 1, 1: 1, 2: 1, 3: 1})
    assert e.servers == (0, 2, 1, 3)
    assert sorted(cluster.links.hops_over(e.servers)) == [1.0] * len(cluster.links)


# The LP and the rounding --------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
def test_lp_bounds_the_optimum_and_the_rounding_fits(seed: int) -> None:
    """LP >= the brute-force optimum >= LP-RS-MDE's value, whose rings fit the servers and
    links (strict mode) and are valid; the LP of fixed sizes is at most the full LP."""
    rng = np.random.default_rng(100 + seed)
    cluster = small_cluster(rng, servers=3, racks=2)
    problem = SlotProblem.full(cluster, random_jobs(rng, cluster, 2, 3))
    best = brute_force(problem)
    solution = lp_rs_mde(problem, np.random.default_rng(seed), trials=20)
    assert problem.check(solution.placements) == []
    assert solution.lp_value >= best - 1e-6
    assert solution.reduced_lp_value <= solution.lp_value + 1e-6
    assert solution.value <= best + 1e-6
    assert solution.value == pytest.approx(problem.value(solution.placements))
    # On instances this small the greedy fill finds at least Lemma 7 x Thm 8's share.
    gamma = max(j.max_ring for j in problem.jobs)
    assert solution.value >= best / (3 * gamma) - 1e-9


def test_the_lp_converges_to_its_optimum() -> None:
    """Column generation stops because nothing prices out, not on its round limit, and
    more rounds do not raise the value (a pricing that missed columns would stop early)."""
    rng = np.random.default_rng(7)
    cluster = small_cluster(rng, servers=6, racks=3)
    problem = SlotProblem.full(cluster, random_jobs(rng, cluster, 6, 4))
    sizes = {i: list(range(1, 5)) for i in range(6)}
    loose = solve_config_lp(problem, sizes, gap=0.0)
    assert loose.converged
    capped = solve_config_lp(problem, sizes, max_rounds=1)
    assert capped.value <= loose.value + 1e-9


@pytest.mark.parametrize("seed", SEEDS)
def test_paper_mode_stays_within_its_violation_factors(seed: int) -> None:
    """Paper mode may over-load, but only within beta^r and gamma_E (T8b); a draw it
    accepts is worth at least alpha_V of LP*."""
    rng = np.random.default_rng(200 + seed)
    cluster = small_cluster(rng, servers=5, racks=2)
    problem = SlotProblem.full(cluster, random_jobs(rng, cluster, 6, 3))
    solution = lp_rs_mde(problem, np.random.default_rng(seed), trials=20, strict=False)
    used, link_used = problem.loads(solution.placements)
    assert np.all(used <= problem.capacity * solution.beta + 1e-6)
    assert np.all(link_used <= problem.link_capacity * solution.gamma + 1e-6)
    # GPUs are contended (beta > 1); gamma is 1 only when no candidate crosses a link.
    assert np.all(np.asarray(solution.beta) > 1.0) and solution.gamma >= 1.0
    if solution.accepted:
        assert solution.value >= solution.reduced_lp_value / 3 - 1e-6
    beta, gamma = violation_factors(problem, [])
    assert np.all(np.asarray(beta) == 1.0) and gamma == 1.0  # no candidates, no slack


def test_strict_repair_drops_the_least_valuable_job() -> None:
    """Two single-server rings drawn onto one 1-GPU server: the repair keeps the one worth
    more, and the fill then puts the other on the free server."""
    cluster = Cluster(
        (Server("a", ResourceVector({"gpu": 1})), Server("b", ResourceVector({"gpu": 1}))),
        Topology(),
    )
    gpu = np.ones(1)
    problem = SlotProblem.full(
        cluster,
        [RingJob("cheap", (1.0,), gpu, 0.0, (0, 1)), RingJob("dear", (5.0,), gpu, 0.0, (0, 1))],
    )
    from mlsched.scheduler.gadget.rounding import Candidates

    on_a = [embedding_of(problem, j, {0: 1}) for j in (0, 1)]
    on_b = [embedding_of(problem, j, {1: 1}) for j in (0, 1)]
    candidates = [
        Candidates(0, 1.0, (on_a[0], on_b[0]), (0.999, 0.001)),
        Candidates(1, 5.0, (on_a[1],), (1.0,)),
    ]
    rng = np.random.default_rng(0)
    rounded = round_embeddings(problem, candidates, 6.0, rng, trials=1, strict=True, fill=False)
    assert set(rounded.chosen) == {1}
    filled = round_embeddings(
        problem, candidates, 6.0, np.random.default_rng(0), trials=1, strict=True
    )
    assert filled.chosen[0].servers == (1,) and filled.chosen[1].servers == (0,)
    ledger = Ledger(problem)
    for e in filled.chosen.values():
        ledger.add(e)
    assert ledger.over() == (set(), set())


# The policy -------------------------------------------------------------------------------
def two_rack_cluster() -> Cluster:
    servers = tuple(
        Server(f"{rack}{i}", ResourceVector({"gpu": 2}), rack=rack, uplink_gbps=10.0)
        for rack in ("a", "b")
        for i in range(2)
    )
    return Cluster(servers, Topology(intra_server_gbps=100.0, rack_core_gbps=4.0))


def ring(job_id: str, arrival: int = 0, **kw: object) -> JobSpec:
    fields: dict[str, object] = {
        "arch": Arch.ALLREDUCE,
        "arrival_slot": arrival,
        "chunks": 1,
        "batches_per_chunk": 4000,
        "max_workers": 4,
        "worker": ResourceVector({"gpu": 1}),
        "compute_s": 0.1,
        "gradient_mb": 0.0,
        "hop_gbps": 3.0,
        "utility": Utility(
            UtilityKind.SIGMOID_PROGRESS, {"priority": 10, "sensitivity": 0.01, "expected": 2000}
        ),
    }
    fields.update(kw)
    return JobSpec(job_id, **fields)  # type: ignore[arg-type]


def run(cluster: Cluster, jobs: list[JobSpec], policy: GadgetPolicy, slots: int = 60) -> Engine:
    engine = make_engine(cluster, policy, slot_seconds=10.0, horizon=slots)
    engine.submit_all(jobs)
    engine.run()
    return engine


def test_gadget_runs_rings_within_links_and_finishes_jobs() -> None:
    """Four jobs of up to 4 workers reserving 3 Gbit/s per hop on a cluster whose rack
    uplinks carry 4: at most one ring may cross racks per slot. The engine refuses any
    over-reserved link or invalid ring, so a finished run is the check; every job ends."""
    policy = GadgetPolicy(trials=10)
    jobs = [ring(f"j{i}", arrival=i) for i in range(4)]
    engine = run(two_rack_cluster(), jobs, policy)
    assert all(engine.records[j.job_id].state is JobState.DONE for j in jobs)
    assert policy.decisions and all(d.value <= d.lp_value + 1e-6 for d in policy.decisions)
    # Some slot had more jobs than it could place: the links or GPUs were binding.
    assert any(d.placed < d.jobs for d in policy.decisions)


def test_a_lone_job_keeps_its_servers() -> None:
    """Alone, a job gets the same ring size every slot; it must keep its servers (no
    restart), whichever of the equal rings the rounding drew."""
    policy = GadgetPolicy(trials=5)
    engine = run(two_rack_cluster(), [ring("solo", batches_per_chunk=8_000)], policy)
    record = engine.records["solo"]
    assert record.state is JobState.DONE
    assert record.restarts == 0


def test_a_saturated_job_still_gains_and_finishes_without_the_fill() -> None:
    """Past its sigmoid's expected iterations a job's gains are tiny (e^-20 to e^-200) but
    positive, and objective (10) counts every positive gain: alone on the cluster the LP
    gives it GPUs and it finishes with or without idle_fill. A cutoff on small gains (what
    the policy once had: 1e-7) would pause it for good."""
    job = ring("sat", batches_per_chunk=20_000, min_workers=2)
    for fill in (True, False):
        record = run(two_rack_cluster(), [job], GadgetPolicy(trials=5, idle_fill=fill)).records
        assert record["sat"].state is JobState.DONE, fill


def test_gains_hundreds_of_orders_apart_are_each_counted_in_tiers() -> None:
    """Two jobs whose best rings (6 workers each) do not fit the 8 GPUs together: one at
    its sigmoid's rise, one so far below it that its gains underflow to 0.0 (only their
    logarithms, about -700, say they are positive). The one at its rise gets its ring; the
    other's positive gain still takes the 2 GPUs left (one LP over both would see it as 0:
    the tiers solve it on what the first left)."""
    cluster = two_rack_cluster()
    gpu = np.ones(1)
    everyone = tuple(range(4))
    rise = RingJob("rise", tuple(0.5 * k for k in range(1, 7)), gpu, 0.0, everyone)
    logs = tuple(-700.0 + math.log(k) for k in range(1, 7))
    far = RingJob("far", (0.0,) * 6, gpu, 0.0, everyone, log_gains=logs)
    problem = SlotProblem.full(cluster, [far, rise])
    solution = solve_in_tiers(
        problem, lambda p: lp_rs_mde(p, np.random.default_rng(0), trials=5), max_jobs=10
    )
    assert {j: p.n_workers for j, p in solution.placements.items()} == {"rise": 6, "far": 2}
    assert problem.check(solution.placements) == [] and solution.value == pytest.approx(3.0)


def test_a_log_gain_is_exact_where_the_difference_underflows_or_cancels() -> None:
    """The gains GADGET's LP sees: ln(mu(b) - mu(a)) matches the direct difference where
    that is accurate, and stays finite (and right, by the sigmoid's tail e^-s(x-e)) where
    the difference is 0.0: far below the rise, and far past it."""
    u = Utility(
        UtilityKind.SIGMOID_PROGRESS, {"priority": 10, "sensitivity": 0.05, "expected": 3000}
    )
    for a, b in ((2900, 3000), (2999, 3001), (0, 1e5), (0, 500)):
        assert math.exp(u.log_increment(a, b)) == pytest.approx(u(b) - u(a), rel=1e-9)
    assert u(100) - u(0) == 0.0 or u(100) - u(0) < 1e-60
    below = u.log_increment(0, 100)  # mu(100) ~ 10 e^{-0.05 * 2900}
    assert below == pytest.approx(math.log(10) - 0.05 * 2900, abs=0.01)
    assert u(10_050) - u(10_000) == 0.0
    past = u.log_increment(10_000, 10_050)  # 10 (e^{-350} - e^{-352.5})
    assert past == pytest.approx(math.log(10) - 350 + math.log1p(-math.exp(-2.5)), abs=1e-6)
    assert u.log_increment(5, 5) == -math.inf and u.log_increment(6, 5) == -math.inf


def test_ps_jobs_are_infeasible_and_options_are_checked() -> None:
    policy = create("gadget")
    engine = run(two_rack_cluster(), [JobSpec("ps", worker=ResourceVector({"gpu": 1}))], policy)  # type: ignore[arg-type]
    assert engine.records["ps"].state is JobState.REJECTED
    assert "ring-all-reduce" in engine.records["ps"].reason
    bad_options = (
        {"trials": 0},
        {"alpha_v": 0},
        {"alpha_v": 1.5},
        {"fill": "yes"},
        {"idle_fill": 1},
        {"max_lp_jobs": 0},
        {"x": 1},
    )
    for bad in bad_options:
        with pytest.raises((ValueError, TypeError), match=next(iter(bad))):
            create("gadget", **bad)


def test_a_job_larger_than_the_cluster_is_infeasible() -> None:
    policy = GadgetPolicy()
    engine = run(two_rack_cluster(), [ring("big", min_workers=9, max_workers=9)], policy)
    record = engine.records["big"]
    assert record.state is JobState.REJECTED and "holds 8" in record.reason
    assert not policy.decisions


@pytest.mark.parametrize(
    "utility",
    [
        Utility(UtilityKind.SQRT, {"scale": 2.0}),
        Utility(UtilityKind.LOG1P, {"scale": 5.0}),
        Utility(UtilityKind.ENERGY, {"value": 1.0, "cost": 1e-4}),
        Utility(UtilityKind.SIGMOID_PROGRESS, {"priority": 10, "sensitivity": 0.01, "expected": 9}),
    ],
    ids=["sqrt", "log-fairness", "energy", "sigmoid"],
)
def test_every_utility_family_is_scheduled_to_completion(utility: Utility) -> None:
    """Spec 003's families (C sqrt(k), log(1 + k), value minus quadratic energy, and the
    experiments' sigmoid): three jobs competing for the cluster each finish, and each is
    worth its utility at its full work (utility paid on progress)."""
    jobs = [ring(f"j{i}", arrival=i, utility=utility, batches_per_chunk=3000) for i in range(3)]
    engine = run(two_rack_cluster(), jobs, GadgetPolicy(trials=5))
    for job in jobs:
        record = engine.records[job.job_id]
        assert record.state is JobState.DONE
        assert record.utility() == pytest.approx(utility(job.total_work))


def test_when_every_best_ring_fits_no_lp_is_solved() -> None:
    """Two jobs whose best rings (3 and 2 workers) fit the 8-GPU cluster together: the
    optimum is each at its best gain, found without an LP (no columns); a saturated
    sigmoid's tiny gains still count (its smallest ring: the first of its best gain); a
    job that gains nothing at all is not placed."""
    cluster = two_rack_cluster()
    gpu = np.ones(1)
    everyone = tuple(range(4))
    jobs = [
        RingJob("a", (1.0, 2.0, 3.0), gpu, 3.0, everyone),
        RingJob("b", (4.0, 5.0, 5.0), gpu, 3.0, everyone),
        RingJob("flat", (1e-15, 1e-15), gpu, 3.0, everyone),
        RingJob("done", (0.0, 0.0), gpu, 3.0, everyone),
    ]
    problem = SlotProblem.full(cluster, jobs)
    solution = lp_rs_mde(problem, np.random.default_rng(0))
    assert solution.columns == 0 and solution.value == solution.lp_value == 8.0 + 1e-15
    sizes = {j: p.n_workers for j, p in solution.placements.items()}
    assert sizes == {"a": 3, "b": 2, "flat": 1}
    assert problem.check(solution.placements) == []


def test_jobs_beyond_max_lp_jobs_take_only_what_is_left() -> None:
    """Two jobs whose best rings (6 workers each) do not fit the 8 GPUs together: with
    max_lp_jobs=1 one LP takes one job, and the other is solved next on what that ring
    leaves: both run, with or without the idle fill."""
    jobs = [ring("big", max_workers=6), ring("small", max_workers=6)]
    for fill in (True, False):
        policy = GadgetPolicy(trials=5, max_lp_jobs=1, idle_fill=fill)
        capped = run(two_rack_cluster(), jobs, policy, slots=1)
        assert all(capped.records[j.job_id].slots_run == 1 for j in jobs), fill
