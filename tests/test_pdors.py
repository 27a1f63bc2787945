"""PD-ORS (spec 000): the per-slot problem (Alg. 4) and its parts, on small real clusters."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mlsched.core import Cluster, JobSpec, Pool, ResourceVector, Server, Topology
from mlsched.core.job import Arch, SyncMode
from mlsched.perfmodel.estimator import RuntimeEstimator
from mlsched.scheduler import create
from mlsched.scheduler.pdors.constants import ConstantsEstimator
from mlsched.scheduler.pdors.needs import PdorsNeeds, per_worker_rates
from mlsched.scheduler.pdors.schedule import best_schedule
from mlsched.scheduler.pdors.slot import (
    Rounding,
    SlotPricer,
    gain_cover,
    gain_packing,
)


def machines(n: int, gpu: int = 8, cpu: int = 16) -> Cluster:
    return Cluster(
        tuple(
            Server(f"m{i}", ResourceVector({"gpu": gpu, "cpu": cpu}), pool=Pool.BOTH)
            for i in range(n)
        ),
        Topology(),
    )


def ps_job(cap: int = 8, ratio: float = 2.0) -> JobSpec:
    return JobSpec(
        "j",
        sync=SyncMode.SYNC,
        chunks=1,
        batches_per_chunk=1000,
        max_workers=cap,
        ps_ratio=ratio,
        worker=ResourceVector({"gpu": 1, "cpu": 2}),
        ps=ResourceVector({"cpu": 2}),
    )


def needs(
    cluster: Cluster, job: JobSpec, rate_int: float = 10.0, rate_ext: float = 4.0
) -> PdorsNeeds:
    return PdorsNeeds.of(job, cluster, (rate_int, rate_ext))


def pricer(
    cluster: Cluster,
    n: PdorsNeeds,
    *,
    used: np.ndarray | None = None,
    ln_prices: np.ndarray | None = None,
    seed: int = 0,
    rounding: Rounding | None = None,
    internal: bool = True,
) -> SlotPricer:
    cap = np.asarray(cluster.capacity, dtype=float)
    used = np.zeros_like(cap) if used is None else used
    ln_p = np.zeros_like(cap) if ln_prices is None else ln_prices
    hosts = np.arange(len(cluster))
    return SlotPricer(
        n,
        ln_p,
        cap - used,
        hosts,
        hosts,
        np.random.default_rng(seed),
        rounding or Rounding(),
        internal=internal,
    )


# Gain factor G_delta (E25), (E26) -------------------------------------------------------------
@pytest.mark.parametrize("delta", [0.02, 0.1, 0.5, 1.0])
@pytest.mark.parametrize("w", [5.0, 15.0, 40.0])
def test_gain_formulas_solve_their_chernoff_equations(delta: float, w: float) -> None:
    m_pack, m_cov = 401, 2
    g = gain_packing(delta, w, m_pack)
    assert 0 < g <= 1
    assert math.exp(-((1 / g - 1) ** 2) * g * w / 3) == pytest.approx(delta / (3 * m_pack))
    g = gain_cover(delta, w, m_cov)
    assert g > 1
    assert math.exp(-((1 - 1 / g) ** 2) * g * w / 2) == pytest.approx(delta / (3 * m_cov))


def test_gain_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="delta"):
        gain_packing(0.0, 5.0, 3)
    with pytest.raises(ValueError, match="W"):
        gain_cover(0.1, 0.0, 2)
    with pytest.raises(ValueError, match="g_delta"):
        Rounding(gain=0.0)


# Case 1: internal ------------------------------------------------------------------------------
def test_internal_case_takes_the_cheapest_server_that_fits_everything() -> None:
    cluster = machines(3)
    n = needs(cluster, ps_job())
    assert cluster.resource_names == ("cpu", "gpu")
    used = np.zeros((3, 2))
    used[0] = [0, 6]  # m0 has 2 GPUs left: 3 workers do not fit there
    # (cpu, gpu) prices: m0 cheapest, then m2, then m1.
    ln_p = np.log(np.array([[0.1, 0.1], [1.0, 5.0], [1.0, 2.0]]))
    choice = pricer(cluster, n, used=used, ln_prices=ln_p).theta(25.0)  # 3 workers at 10
    assert choice is not None and choice.internal
    assert choice.workers == {2: 3} and choice.ps == {2: 2}  # ceil(3 / 2) PSs
    assert choice.cost == pytest.approx(3 * (2 * 1.0 + 2.0) + 2 * (2 * 1.0))


def test_the_internal_mode_wins_when_it_is_much_faster_and_fits() -> None:
    """Spec §7's invariant: with b(i) >> b(e) and room on one machine, Alg. 4 co-locates."""
    cluster = machines(4)
    n = needs(cluster, ps_job(), rate_int=10.0, rate_ext=1.0)
    choice = pricer(cluster, n).theta(40.0)
    assert choice is not None and choice.internal and choice.n_workers == 4


# Case 2: external ------------------------------------------------------------------------------
def _check_feasible(
    cluster: Cluster, n: PdorsNeeds, choice, units: float, used: np.ndarray
) -> None:  # type: ignore[no-untyped-def]
    load = used.copy()
    for h, k in choice.workers.items():
        load[h] += n.alpha * k
    for h, k in choice.ps.items():
        load[h] += n.beta * k
    assert np.all(load <= np.asarray(cluster.capacity) + 1e-9)
    rate = n.rate_int if choice.internal else n.rate_ext
    assert choice.n_workers * rate >= units - 1e-9
    assert choice.n_workers <= n.cap
    assert sum(choice.ps.values()) >= n.ps_for(choice.n_workers)


@pytest.mark.parametrize("seed", range(8))
def test_rounded_external_choice_is_feasible_and_never_beats_the_exact_one(seed: int) -> None:
    """Random residual capacity and prices: every rounded choice fits, covers the work and
    has its PSs; an exact MILP is never more expensive (it is optimal over the same set)."""
    rng = np.random.default_rng(seed)
    cluster = machines(5, gpu=4, cpu=8)
    n = needs(cluster, ps_job(cap=12, ratio=3.0), rate_int=10.0, rate_ext=5.0)
    used = np.zeros((5, 2))
    used[:, 0] = rng.integers(0, 6, 5)  # cpu
    used[:, 1] = rng.integers(0, 4, 5)  # gpu
    ln_p = np.log(rng.uniform(0.1, 10.0, (5, 2)))
    units = float(rng.integers(10, 40))
    rounded = pricer(cluster, n, used=used, ln_prices=ln_p, seed=seed, internal=False)
    exact = pricer(
        cluster, n, used=used, ln_prices=ln_p, internal=False, rounding=Rounding(exact=True)
    )
    a, b = rounded.theta(units), exact.theta(units)
    assert (a is None) == (b is None) or a is None  # rounding may fail where a point exists
    if b is None:
        return
    _check_feasible(cluster, n, b, units, used)
    if a is not None:
        _check_feasible(cluster, n, a, units, used)
        assert a.cost >= b.cost - 1e-9 * max(1.0, b.cost)


@pytest.mark.parametrize("seed", range(8))
def test_a_scaled_down_rounding_covers_only_when_violations_are_accepted(seed: int) -> None:
    """G_delta = 0.3 scales the LP's workers to about a third of D before rounding, so no
    draw covers the work: redrawn (A14) the slot has no choice; accepted as the paper does
    for Fig. 11, the choice is the draw doing the most work, fewer workers than D but at
    least one, and it still fits every server."""
    cluster = machines(3, gpu=4, cpu=16)
    n = needs(cluster, ps_job(cap=10, ratio=2.0), rate_int=6.0, rate_ext=5.0)
    ext = {"internal": False, "seed": seed}
    redraw = pricer(cluster, n, rounding=Rounding(gain=0.3), **ext).theta(40.0)
    accept = pricer(cluster, n, rounding=Rounding(gain=0.3, cover="accept"), **ext).theta(40.0)
    assert redraw is None
    assert accept is not None and 1 <= accept.n_workers < 8 and accept.ps
    load = np.zeros((3, 2))
    for h, k in accept.workers.items():
        load[h] += n.alpha * k
    for h, k in accept.ps.items():
        load[h] += n.beta * k
    assert np.all(load <= np.asarray(cluster.capacity) + 1e-9)
    with pytest.raises(ValueError, match="cover"):
        Rounding(cover="ignore")


def test_external_case_spreads_what_one_machine_cannot_hold() -> None:
    cluster = machines(3, gpu=4, cpu=16)
    n = needs(cluster, ps_job(cap=10, ratio=2.0), rate_int=6.0, rate_ext=5.0)
    # 7 workers co-located or 8 spread: no server holds 7 GPUs.
    choice = pricer(cluster, n).theta(40.0)
    assert choice is not None and not choice.internal
    assert choice.n_workers == 8 and sum(choice.ps.values()) >= 4
    _check_feasible(cluster, n, choice, 40.0, np.zeros((3, 2)))


def _patterned_pricer(seed: int, *, servers: int = 12, gpu: int = 4, cpu: int = 8):  # type: ignore[no-untyped-def]
    """Identical machines in three random states (residual capacity and prices), so that
    servers fall into classes of several members; tight enough that the cheapest class
    often cannot hold everything."""
    rng = np.random.default_rng(seed)
    cluster = machines(servers, gpu=gpu, cpu=cpu)
    n = needs(cluster, ps_job(cap=12, ratio=3.0), rate_int=10.0, rate_ext=5.0)
    patterns_used = np.column_stack([rng.integers(0, cpu - 2, 3), rng.integers(0, gpu - 1, 3)])
    patterns_used[0] = 0  # one empty state
    patterns_ln = np.log(rng.uniform(0.1, 10.0, (3, 2)))
    state = rng.integers(0, 3, servers)
    used = patterns_used[state].astype(float)
    ln_p = patterns_ln[state]
    return cluster, n, used, pricer(cluster, n, used=used, ln_prices=ln_p, seed=seed)


@pytest.mark.parametrize("seed", range(10))
def test_the_lp_over_server_classes_has_the_per_server_optimum(seed: int) -> None:
    """Aggregating interchangeable servers is exact for EXT's LP relaxation: its optimum
    (by the floor placement or HiGHS over the classes) costs what HiGHS finds server by
    server, for every worker count."""
    _, n, _, p = _patterned_pricer(seed)
    assert len(p._classes(True).members) < len(p._classes(False).members)
    for d in range(1, n.cap + 1):
        agg, ref = p.external_lp(d), p.external_lp(d, aggregate=False)
        assert (agg is None) == (ref is None)
        if agg is not None and ref is not None:
            assert agg[0] == pytest.approx(ref[0], rel=1e-7, abs=1e-9)


def test_both_ways_of_solving_the_class_lp_are_exercised() -> None:
    """The floor placement settles some of the instances above and HiGHS the others."""
    settled = {True: 0, False: 0}
    for seed in range(10):
        _, n, _, p = _patterned_pricer(seed)
        classes = p._classes(True)
        for d in range(1, n.cap + 1):
            if classes.can_host(d, n.ps_for(d)):
                settled[classes.floor_placement(d, n.ps_for(d)) is not None] += 1
    assert settled[True] > 0 and settled[False] > 0


def _rounded_up_fits(
    n: PdorsNeeds, w: float, s: float, servers: int, room: tuple[np.ndarray, float, float]
) -> bool:
    """Whether (ceil(w / servers), ceil(s / servers)) fits a server with ``room`` =
    (residual capacity, worker cap, PS cap)."""
    free, w_cap, s_cap = room
    up_w = math.ceil(w / servers - 1e-9)
    up_s = math.ceil(s / servers - 1e-9)
    load = n.alpha * up_w + n.beta * up_s
    return bool(np.all(load <= free + 1e-9) and up_w <= w_cap and up_s <= s_cap)


@pytest.mark.parametrize("seed", range(8))
def test_the_class_split_fills_the_fewest_servers_within_their_capacity(seed: int) -> None:
    """Each class's LP amounts go onto its first servers in equal shares: they sum to the
    class's amounts, never exceed a server's capacity or task caps, and use the fewest
    servers on which the shares rounded up still fit."""
    rng = np.random.default_rng(100 + seed)
    cluster, n, used, p = _patterned_pricer(seed, servers=16, gpu=8, cpu=16)
    free = np.asarray(cluster.capacity, dtype=float) - used
    classes = p._classes(True)
    for _ in range(20):
        need_s = int(rng.integers(1, n.ps_for(n.cap) + 1))
        s_caps = classes.s_caps(need_s)
        w = np.zeros(len(classes.members))
        s = np.zeros(len(classes.members))
        for c in range(len(classes.members)):  # a random point of size x one server's set
            w0 = rng.uniform(0, classes.w_fit[c])
            room = classes.free[c] - classes.alpha * w0
            with np.errstate(divide="ignore"):
                s_room = np.min(np.where(classes.beta > 0, room / classes.beta, np.inf))
            s0 = rng.uniform(0, max(0.0, min(s_caps[c], s_room)))
            t = rng.uniform(0, classes.size[c])
            w[c], s[c] = t * w0, t * s0
        servers, ws, ss = classes.split(w, s, need_s)
        assert len(set(servers.tolist())) == len(servers)
        label = {int(h): c for c, members in enumerate(classes.members) for h in members}
        for c, members in enumerate(classes.members):
            mine = np.isin(servers, members)
            assert ws[mine].sum() == pytest.approx(w[c] if w[c] >= 1e-9 else 0.0)
            assert ss[mine].sum() == pytest.approx(s[c] if s[c] >= 1e-9 else 0.0)
            k = int(mine.sum())
            assert list(servers[mine]) == list(members[:k])  # fill-first, in index order
            if k == 0:
                continue
            room = (free[members[0]], classes.w_fit[c], s_caps[c])
            # Every rounding of a share fits its server, with as few servers as that
            # allows; only a class too small for that uses all of its servers.
            assert _rounded_up_fits(n, w[c], s[c], k, room) or k == len(members)
            if k > 1 and _rounded_up_fits(n, w[c], s[c], k, room):
                assert not _rounded_up_fits(n, w[c], s[c], k - 1, room)
        for h, wh, sh in zip(servers, ws, ss, strict=True):
            c = label[int(h)]
            assert np.all(n.alpha * wh + n.beta * sh <= free[h] + 1e-9)
            assert wh <= classes.w_fit[c] + 1e-9 and sh <= s_caps[c] + 1e-9


@pytest.mark.parametrize("seed", range(8))
def test_rounded_choices_on_server_classes_are_feasible(seed: int) -> None:
    cluster, n, used, p = _patterned_pricer(seed)
    for units in (10.0, 25.0, 40.0, 55.0):
        choice = p.theta(units)
        if choice is not None:
            _check_feasible(cluster, n, choice, units, used)


def test_impossible_slots_and_the_batch_cap() -> None:
    cluster = machines(2, gpu=4)
    n = needs(cluster, ps_job(cap=4), rate_int=10.0, rate_ext=5.0)
    p = pricer(cluster, n)
    assert p.theta(0.0) is not None and p.theta(0.0).cost == 0.0  # type: ignore[union-attr]
    assert p.theta(41.0) is None  # 5 workers even co-located: above F = 4
    full = pricer(cluster, n, used=np.asarray(cluster.capacity, dtype=float))
    assert full.theta(1.0) is None


def test_theta_is_memoised_by_worker_count() -> None:
    """A12: one randomised answer per worker count, so the DP sees one theta."""
    cluster = machines(3, gpu=4)
    n = needs(cluster, ps_job(cap=10), rate_int=10.0, rate_ext=5.0)
    p = pricer(cluster, n, internal=False)
    assert p.theta(36.0) is p.theta(40.0)  # both 8 workers at the external rate


def test_prices_far_apart_in_magnitude_still_order_correctly() -> None:
    """Prices spanning 600 orders of magnitude (A3): computed from logarithms, the cheap
    server is chosen and the cost is the tiny one, not 0 or inf."""
    cluster = machines(2)
    n = needs(cluster, ps_job(cap=2))
    ln_p = np.array([[-700.0, -700.0], [700.0, 700.0]])
    choice = pricer(cluster, n, ln_prices=ln_p).theta(10.0)
    assert choice is not None and choice.workers == {0: 1}
    assert 0 < choice.cost < 1e-290


# Alg. 2-3: the DP over slots ---------------------------------------------------------------------
def _slot_pricers(cluster: Cluster, n: PdorsNeeds, ln_by_slot: list[float]) -> list[SlotPricer]:
    """One deterministic pricer per slot (exact EXT), each slot's prices uniform at ln p."""
    shape = np.asarray(cluster.capacity).shape
    return [
        pricer(cluster, n, ln_prices=np.full(shape, ln), rounding=Rounding(exact=True))
        for ln in ln_by_slot
    ]


def _brute_force(
    pricers: list[SlotPricer], utility, levels: int, step: float
) -> tuple[float, int, tuple[int, ...]]:  # type: ignore[no-untyped-def]
    """Best (payoff, completion, levels per slot) over every split of the levels."""
    import itertools

    best = (-math.inf, -1, ())
    for split in itertools.product(range(levels + 1), repeat=len(pricers)):
        if sum(split) != levels:
            continue
        cost = 0.0
        for p, j in zip(pricers, split, strict=True):
            c = p.theta(j * step)
            cost += math.inf if c is None else c.cost
        last = max(i for i, j in enumerate(split) if j)
        payoff = utility(last) - cost
        if payoff > best[0] or (payoff == best[0] and last < best[1]):
            best = (payoff, last, split)
    return best


@pytest.mark.parametrize(
    "ln_by_slot",
    [[0.0, 0.0, 0.0], [2.0, 0.0, -1.0], [-3.0, 1.0, 0.5], [0.0, 3.0, 0.0]],
    ids=["flat", "falling", "cheap-first", "dear-middle"],
)
def test_the_dp_finds_the_brute_force_optimum(ln_by_slot: list[float]) -> None:
    """Three slots, six levels, prices per slot differing: the DP's payoff, completion and
    split equal an exhaustive search (with exact per-slot costs, so theta is fixed)."""
    cluster = machines(2, gpu=4, cpu=16)
    n = needs(cluster, ps_job(cap=6, ratio=2.0), rate_int=3.0, rate_ext=2.0)
    n = PdorsNeeds(**{**n.__dict__, "work": 24.0})
    pricers = _slot_pricers(cluster, n, ln_by_slot)

    def utility(i: int) -> float:
        return 200.0 - 40.0 * i

    search = best_schedule(n, lambda i: pricers[i], utility, span=3, levels=6)
    payoff, last, split = _brute_force(pricers, utility, 6, 4.0)
    assert search.best is not None
    assert search.best.payoff == pytest.approx(payoff)
    assert search.best.completion == last
    assert len(search.best.slots) == last + 1
    done = sum(
        c.n_workers * (n.rate_int if c.internal else n.rate_ext) for c in search.best.slots if c
    )
    assert done >= n.work - 1e-9  # the schedule does all the work
    assert search.best.cost == pytest.approx(
        sum(pricers[i].theta(j * 4.0).cost for i, j in enumerate(split) if j)  # type: ignore[union-attr]
    )


def test_no_schedule_when_utility_cannot_pay_or_time_is_short() -> None:
    cluster = machines(2, gpu=4)
    n = needs(cluster, ps_job(cap=4), rate_int=10.0, rate_ext=5.0)
    n = PdorsNeeds(**{**n.__dict__, "work": 200.0})  # 5 slots at 4 co-located workers
    pricers = _slot_pricers(cluster, n, [0.0] * 10)
    short = best_schedule(n, lambda i: pricers[i], lambda i: 1e6, span=4, levels=10)
    assert short.best is None and short.best_payoff == -math.inf
    poor = best_schedule(n, lambda i: pricers[i], lambda i: 1.0, span=10, levels=10)
    assert poor.best is None and poor.best_payoff < 0 and poor.exhausted
    # Utility falls to 0 after slot 5: nothing later can pay, the search stops there.
    cliff = best_schedule(n, lambda i: pricers[i], lambda i: 1e3 if i < 6 else 0.0, 10, 10)
    assert cliff.best is not None and cliff.examined == 6 and not cliff.exhausted
    rich = best_schedule(n, lambda i: pricers[i], lambda i: 1e6 - i, span=10, levels=10)
    assert rich.best is not None and rich.best.completion == 4  # d_min = 5 slots


# Price constants (E19)-(E22) -----------------------------------------------------------------------
def test_constants_follow_the_formulas() -> None:
    """Two jobs on resources (cpu, gpu, disk): U^r, L and mu as (E20)-(E22) compute them
    directly; a resource no job uses takes the largest U (A2); prices run from L to U^r."""
    est = ConstantsEstimator(3, slots=20, total_capacity=1000.0)
    a = np.array([3.0, 1.0, 0.0])  # alpha + beta of job a
    b = np.array([2.0, 0.0, 0.0])
    est.add(a, worker_slots=40, u_best=50.0, u_end=5.0)
    est.add(b, worker_slots=10, u_best=8.0, u_end=0.5)
    c = est.constants()
    assert c is not None
    u_cpu = max(50.0 / 3.0, 8.0 / 2.0)
    u_gpu = 50.0 / 1.0
    assert np.exp(c.ln_high) == pytest.approx([u_cpu, u_gpu, max(u_cpu, u_gpu)])
    mu = max(20 * 1000.0 / (40 * 4.0), 20 * 1000.0 / (10 * 2.0))
    low = min(5.0 / (2 * mu) / (40 * 4.0), 0.5 / (2 * mu) / (10 * 2.0))
    assert math.exp(c.ln_low) == pytest.approx(low)
    cap = np.array([[10.0, 4.0, 1.0]])
    assert np.exp(c.log_prices(np.zeros((1, 3)), cap))[0] == pytest.approx([low] * 3)
    assert np.exp(c.log_prices(cap, cap))[0] == pytest.approx(np.exp(c.ln_high))
    half = np.exp(c.log_prices(cap / 2, cap))[0, 0]
    assert half == pytest.approx(math.sqrt(low * u_cpu))  # geometric in between (E19)


def test_constants_floor_and_degenerate_jobs() -> None:
    est = ConstantsEstimator(2, slots=10, total_capacity=100.0, l_floor_ratio=1e-3)
    assert est.constants() is None
    est.add(np.array([1.0, 0.0]), worker_slots=5, u_best=0.0, u_end=0.0)  # earns nothing
    assert est.constants() is None
    est.add(np.array([1.0, 1.0]), worker_slots=5, u_best=10.0, u_end=1e-60)
    c = est.constants()
    assert c is not None and math.exp(c.ln_low) == pytest.approx(1e-3 * 10.0)
    with pytest.raises(ValueError, match="l_floor_ratio"):
        ConstantsEstimator(2, slots=10, total_capacity=1.0, l_floor_ratio=1.0)


def test_utility_floor_bounds_the_horizon_utility_in_l_only() -> None:
    """A time-critical job earns e^-100 at the horizon: without a floor L follows it down;
    with ``utility_floor`` 1 L is computed as if it earned 1 there, U is unchanged."""

    def constants(floor: float) -> tuple[np.ndarray, float]:
        est = ConstantsEstimator(2, slots=10, total_capacity=100.0, utility_floor=floor)
        est.add(np.array([1.0, 1.0]), worker_slots=5, u_best=10.0, u_end=math.exp(-100))
        c = est.constants()
        assert c is not None
        return c.ln_high, c.ln_low

    high0, low0 = constants(0.0)
    high1, low1 = constants(1.0)
    assert np.array_equal(high0, high1)
    mu = 10 * 100.0 / (5 * 2.0)
    assert low0 == pytest.approx(-100 - math.log(2 * mu * 5 * 2.0))
    assert low1 == pytest.approx(-math.log(2 * mu * 5 * 2.0))
    with pytest.raises(ValueError, match="utility_floor"):
        ConstantsEstimator(2, slots=10, total_capacity=1.0, utility_floor=-1.0)
    with pytest.raises(ValueError, match="utility_floor"):
        create("pd_ors", utility_floor=math.inf)


# Rates from the runtime model (E5) -------------------------------------------------------------------
def test_per_worker_rates_follow_the_sync_ps_model() -> None:
    """(E5) at the job's ratio (2 workers per PS): one iteration is compute + push/pull of
    the gradient over one PS link, at 100 Gbit/s inside a server or the worker's reserved
    1 Gbit/s across; a synchronous worker does one unit per iteration."""
    cluster = Cluster(
        tuple(
            Server(f"m{i}", ResourceVector({"gpu": 8, "cpu": 16, "bw_gbps": 10}), pool=Pool.BOTH)
            for i in range(2)
        ),
        Topology(intra_server_gbps=100.0),
    )
    job = JobSpec(
        "j",
        sync=SyncMode.SYNC,
        max_workers=8,
        ps_ratio=2.0,
        compute_s=0.1,
        gradient_mb=100.0,
        worker=ResourceVector({"gpu": 1, "cpu": 1, "bw_gbps": 1.0}),
        ps=ResourceVector({"cpu": 1, "bw_gbps": 2.0}),
    )
    rate_int, rate_ext = per_worker_rates(job, RuntimeEstimator(cluster), 60.0, len(cluster))
    bits = 2 * 100e6 * 8  # push and pull, one PS for two workers
    assert rate_int == pytest.approx(60.0 / (0.1 + bits / 100e9))
    assert rate_ext == pytest.approx(60.0 / (0.1 + bits / 1e9))
    with pytest.raises(ValueError, match="A29"):
        per_worker_rates(JobSpec("ring", arch=Arch.ALLREDUCE), RuntimeEstimator(cluster), 60.0, 2)
