"""DPS (spec 004): the price grid, the bandit's index and statistics, exploration, capacity,
PA and random placement, the options, and a job admitted again after a reconfiguration."""

from __future__ import annotations

import math

import numpy as np
import pytest
from engine_helpers import make_engine

from mlsched.core import Cluster, JobSpec, JobState, ResourceVector, Server
from mlsched.core.job import Arch, SyncMode
from mlsched.engine.engine import Engine
from mlsched.scheduler import create
from mlsched.scheduler.baselines.taskfill import TaskFiller
from mlsched.scheduler.dps import DpsPolicy, price_grid, shape_of, theorem_delta
from mlsched.scheduler.dps.bandit import Arms
from mlsched.scheduler.dps.placement import pa, random_placement
from mlsched.workloads import load_workload
from mlsched.workloads.base import Workload

SLOT_S = 300.0


def typed_cluster(slots: list[tuple[int, int]]) -> Cluster:
    """Servers with (worker slots of type w0, PS slots of type p0)."""
    return Cluster(
        tuple(
            Server(f"s{i}", ResourceVector({"w0": x, "p0": z} if z else {"w0": x}))
            for i, (x, z) in enumerate(slots)
        )
    )


def typed_job(
    job_id: str, dw: int, dp: int, *, arrival: int = 0, rounds: int = 10, value: float | None = None
) -> JobSpec:
    return JobSpec(
        job_id,
        arrival_slot=arrival,
        arch=Arch.PS,
        sync=SyncMode.SYNC,
        epochs=rounds,
        chunks=dw,
        min_workers=dw,
        requested_workers=dw,
        requested_ps=dp,
        worker=ResourceVector({"w0": 1, "bw_gbps": 1.0}),
        ps=ResourceVector({"p0": 1, "bw_gbps": 10.0}),
        compute_s=1.0,
        gradient_mb=50.0,
        valuation=value,
    )


def engine_for(
    cluster: Cluster, policy: DpsPolicy, jobs: list[JobSpec], horizon: int | None = 400
) -> Engine:
    families = {"ps_sync": "dps"}
    engine = make_engine(
        cluster, policy, jobs, slot_seconds=SLOT_S, horizon=horizon, families=families
    )
    return engine


def workload_engine(w: Workload, policy: DpsPolicy) -> Engine:
    """An engine running a workload's jobs under ``policy``, as the simulator does."""
    engine = make_engine(
        w.cluster,
        policy,
        w.jobs,
        slot_seconds=w.slot_seconds,
        horizon=w.horizon_slots,
        families=w.runtime,
    )
    return engine


# The grid and the index ---------------------------------------------------------------------
@pytest.mark.parametrize("delta", [0.5, 0.2, 0.0607, 0.01])
def test_the_grid_is_geometric_within_delta_and_one(delta: float) -> None:
    grid = price_grid(delta)
    assert grid[0] == pytest.approx(delta) and grid[-1] <= 1.0
    assert np.allclose(grid[1:] / grid[:-1], 1 + delta)
    assert len(grid) == math.ceil(math.log(1 / delta) / math.log1p(delta))
    assert price_grid(delta, with_one=True)[-1] == 1.0


def test_theorem_two_step_and_its_clipping() -> None:
    # (T C)^(-1/3) (ln n)^(2/3): T = 1000, C = 150, n = 667.
    assert theorem_delta(1000, 150, 667) == pytest.approx(
        (1000 * 150) ** (-1 / 3) * math.log(667) ** (2 / 3)
    )
    policy = create("dps", delta_scale=1e3)  # a step >= 1 is clipped to 0.5 (two prices)
    cluster = typed_cluster([(4, 2)])
    engine_for(cluster, policy, [typed_job("a", 1, 1)]).step()  # type: ignore[arg-type]
    state = policy.types[("worker", "w0")]
    assert policy.arms(state).grid.tolist() == [0.5, 0.75]  # type: ignore[attr-defined]


def _arms(**kw: object) -> Arms:
    opts: dict[str, object] = dict(expected=10, capacity=20, max_demand=4, horizon=100, eta=1.0)
    opts.update(kw)
    arms = Arms(np.array([0.25, 0.5, 1.0]), **opts)  # type: ignore[arg-type]
    arms.offered(1, 2)
    arms.offered(1, 0)
    arms.offered(1, 2)
    arms.offered(2, 0)
    return arms


def test_the_index_by_hand() -> None:
    """N = (0, 3, 1), S = (0, 4, 0), D = 4, eta = 1, n = 10: Q^U = D min(1, q + 1/(1+N) +
    sqrt(q/(1+N))) = (4, 3.48803, 2); the demand bound n p Q^U = (10, 17.4402, 20) is the
    smaller while no job has completed (mu^U = T: p C T = (500, 1000, 2000))."""
    arms = _arms()
    assert arms.offers.tolist() == [0, 3, 1] and arms.sold.tolist() == [0, 4, 0]
    assert arms.sale_rate_ucb() == pytest.approx([4.0, 3.488034, 2.0], rel=1e-6)
    assert arms.index() == pytest.approx([10.0, 17.44017, 20.0], rel=1e-6)
    choice = arms.choose()
    assert (choice.arm, choice.price, choice.term) == (2, 1.0, "demand")


def test_the_capacity_bound_takes_over_once_runtimes_are_learnt() -> None:
    """C = 1, T = 10, three jobs of 9 slots: mu-hat = 1, mu^U = 10 (0.1 + 1/4 + sqrt(0.1/4))
    = 5.08114; the paper's bound p C mu^U. The renewal bound p C T / tau^L, tau^L the mean
    runtime less its radius in slots: 9 - (1/4 + sqrt(9/4)) = 7.25."""
    arms = _arms(capacity=1, horizon=10)
    for _ in range(3):
        arms.finished(9)
    assert arms.free_time_ucb() == pytest.approx(5.081139, rel=1e-6)
    assert arms.index() == pytest.approx([1.270285, 2.540569, 5.081139], rel=1e-6)
    assert arms.choose().term == "capacity"
    renewal = _arms(capacity=1, horizon=10, capacity_term="renewal")
    for _ in range(3):
        renewal.finished(9)
    assert renewal.runtime_lcb() == pytest.approx(7.25)
    assert renewal.index() == pytest.approx([0.344828, 0.689655, 1.379310], rel=1e-5)
    choice = renewal.choose()
    # The bounds cross at n* = n capacity / demand = 10 x 1.37931 / 20 jobs.
    assert choice.term == "capacity" and choice.threshold == pytest.approx(0.689655, rel=1e-5)


def test_the_renewal_bound_binds_under_load_with_short_runtimes() -> None:
    """Runtimes of 0.02 T after 100 completions (the default scale's regime): the renewal
    bound sets the price once the type expects more jobs than its capacity turns over,
    n Q^U > C T / tau^L, and not below. With the radius on mu/T instead, tau^L was 1 slot
    and the bound never bound."""

    def arms(expected: int) -> Arms:
        a = Arms(np.array([0.25, 0.5, 1.0]), expected=expected, capacity=20, max_demand=4,
                 horizon=1000, eta=math.log(2000), capacity_term="renewal")  # fmt: skip
        for _ in range(100):
            a.offered(2, 2)
            a.finished(20)
        return a

    assert 15 < arms(2000).runtime_lcb() < 20
    busy, light = arms(2000).choose(), arms(50).choose()
    assert busy.term == "capacity" and light.term == "demand"
    assert 50 < busy.threshold < 2000


def test_the_literal_radius_is_not_scaled_to_the_demand() -> None:
    arms = _arms(radius_scale="literal")  # Q^U = (1, 4/3 + 1/4 + sqrt(1/3), 1/2)
    assert arms.sale_rate_ucb() == pytest.approx([1.0, 2.160684, 0.5], rel=1e-6)
    assert arms.choose().arm == 1


def test_ties_go_to_the_larger_price() -> None:
    arms = Arms(np.array([0.2, 0.4]), expected=5, capacity=10, max_demand=2, horizon=10, eta=0.0)
    arms.offered(0, 2)
    arms.offered(1, 1)  # Q-hat 2 and 1: p Q-hat is 0.4 for both
    assert arms.choose().arm == 1


def test_one_type_learns_the_revenue_maximising_price() -> None:
    """Spec §7's ground truth: v = xi pi d with xi ~ U[0, 2] and ample capacity; revenue
    per offer p P(xi >= p / pi) peaks at p = pi. After 5,000 offers the price offered most
    is within one level of the grid price nearest pi (the curve is flat at its top)."""
    rng = np.random.default_rng(0)
    grid, pi = price_grid(0.1), 0.5
    arms = Arms(
        grid, expected=5000, capacity=10**6, max_demand=10, horizon=1000, eta=math.log(5000)
    )
    for _ in range(5000):
        choice = arms.choose()
        d, xi = int(rng.integers(1, 11)), float(rng.uniform(0, 2))
        arms.offered(choice.arm, d if choice.price <= xi * pi else 0)
    nearest = int(np.argmin(np.abs(grid - pi)))
    assert abs(int(np.argmax(arms.offers)) - nearest) <= 1, arms.offers


# The policy in the engine ---------------------------------------------------------------------
def test_every_offer_counts_and_only_sales_add_units() -> None:
    """Users who decline everything (valuation 1e-9): each priced offer adds one to N(p) of
    both arms and nothing to S(p) (A7); zero-price offers touch no arm (A32)."""
    jobs = [typed_job(f"j{i}", 1, 1, arrival=i, value=1e-9) for i in range(30)]
    policy = create("dps", explore_fraction=0.1)
    assert isinstance(policy, DpsPolicy)
    engine_for(typed_cluster([(4, 2)]), policy, jobs).run()
    priced = [d for d in policy.decisions if d.phase == "exploit"]
    assert len(priced) == 27 and all(d.accepted is False for d in priced)
    for role in ("worker", "ps"):
        arms = policy.arms(policy.types[(role, "w0" if role == "worker" else "p0")])
        assert arms.offers.sum() == 27 and arms.sold.sum() == 0


@pytest.mark.parametrize(
    ("scheme", "same"), [("dps-simple", {"explore_fraction": 0.0}), ("rs", {"placement": "random"})]
)
def test_a_variant_by_name_is_dps_with_its_option(scheme: str, same: dict[str, object]) -> None:
    """``dps-simple`` and ``rs`` run exactly as ``dps`` with the option their scheme fixes
    (every offer and every answer the same), other options pass through, and they differ
    from plain ``dps`` on this workload."""
    w = load_workload("dps-paper", seed=1, jobs=120, horizon=200, options={"servers": 3})
    runs = {}
    for name, options in ((scheme, {}), ("dps", same), ("dps", {})):
        policy = create(name, eta_scale=0.5, **options)
        assert isinstance(policy, DpsPolicy)
        workload_engine(w, policy).run()
        key = (name, tuple(options))
        runs[key] = [(d.phase, d.charge, d.servers, d.accepted) for d in policy.decisions]
    variant, twin, plain = runs.values()
    assert variant == twin and variant != plain


def test_exactly_floor_theta_n_jobs_explore_at_price_zero() -> None:
    """40 jobs of one type pair, theta = 0.26: the first floor(10.4) = 10 arrivals are
    offered 0 (capacity never binds: one short job at a time), the rest a price."""
    jobs = [typed_job(f"j{i:02d}", 1, 1, arrival=3 * i, rounds=1) for i in range(40)]
    policy = create("dps", explore_fraction=0.26)
    assert isinstance(policy, DpsPolicy)
    result = engine_for(typed_cluster([(2, 2)]), policy, jobs).run()
    phases = [d.phase for d in policy.decisions]
    assert phases == ["explore"] * 10 + ["exploit"] * 30
    assert all(result.records[f"j{i:02d}"].quote.total == 0 for i in range(10))  # type: ignore[union-attr]
    stats = policy.stats()
    assert stats["worker:w0"]["zero_price_offers"] == 10 and stats["ps:p0"]["priced_offers"] == 30


def test_occupancy_never_exceeds_capacity_and_matches_the_placements() -> None:
    """A contended run (load 4 at price 0): after every slot each type's occupancy y is the
    tasks of that type its running jobs hold, and y <= C; a job that does not fit gets no
    offer (phase full, rejected for capacity)."""
    w = load_workload(
        "dps-paper",
        seed=3,
        jobs=150,
        horizon=80,
        options={
            "servers": 3,
            "worker_types": 2,
            "ps_types": 1,
            "load": 4.0,
            "max_workers": 8,
            "max_ps": 4,
            "worker_slots": 8,
            "ps_slots": 4,
        },
    )
    policy = create("dps")
    assert isinstance(policy, DpsPolicy)
    engine = workload_engine(w, policy)
    while not engine.done():
        engine.step()
        for (role, name), state in policy.types.items():
            held = sum(
                (p.n_workers if role == "worker" else p.n_ps)
                for j, p in engine.placements.items()
                if shape_of(engine.records[j].spec, w.cluster, 0).type_of(role) == name  # type: ignore[union-attr]
            )
            assert held == state.occupied <= state.capacity, (role, name)
    full = [d for d in policy.decisions if d.phase == "full"]
    assert full, "the point is contended"
    assert all(engine.records[d.job_id].reject_kind.value == "capacity" for d in full)  # type: ignore[union-attr]


def test_a_job_admitted_again_keeps_its_price_and_is_not_offered_again() -> None:
    policy = create("dps", explore_fraction=0.0)
    cluster = typed_cluster([(4, 2), (4, 2)])
    engine = engine_for(
        cluster, policy, [typed_job("a", 2, 1, rounds=5000, value=100.0)], horizon=None
    )  # type: ignore[arg-type]
    engine.step()
    quote = engine.records["a"].quote
    assert engine.records["a"].state is JobState.RUNNING and quote is not None and quote.total > 0
    fresh = create("dps", explore_fraction=0.0)
    assert engine.reconfigure(cluster, fresh) == []
    engine.step()
    assert engine.records["a"].state is JobState.RUNNING and engine.records["a"].quote == quote
    (decision,) = fresh.decisions  # type: ignore[attr-defined]
    assert decision.phase == "readmit" and not fresh.types[("worker", "w0")].arrivals  # type: ignore[attr-defined]


# Placement ------------------------------------------------------------------------------------
def _shape(cluster: Cluster, dw: int, dp: int):  # type: ignore[no-untyped-def]
    shape = shape_of(typed_job("x", dw, dp), cluster, 0)
    assert not isinstance(shape, str)
    return shape


def test_pa_puts_a_job_whole_on_the_largest_server_that_holds_it() -> None:
    """(X, Z) = s0 (3, 1), s1 (5, 0), s2 (4, 2): PA's order is s1, s2, s0; a 3 + 1 job goes
    whole on s2 (worst fit; best fit: s0)."""
    cluster = typed_cluster([(3, 1), (5, 0), (4, 2)])
    placed = pa(TaskFiller(cluster), _shape(cluster, 3, 1))
    assert placed is not None and placed.workers == ((2, 3),) and placed.ps == ((2, 1),)
    best = pa(TaskFiller(cluster), _shape(cluster, 3, 1), best_fit=True)
    assert best is not None and best.workers == ((0, 3),) and best.colocated


def test_pa_spreads_over_the_fewest_servers_in_its_order_and_gives_back_exactly() -> None:
    """A 7 + 2 job fits no server: workers fill s1 (5) then s2 (2), PSs skip s1 (none) and
    take s2's 2. Released, the free capacity is what it was; a job too big takes nothing."""
    cluster = typed_cluster([(3, 1), (5, 0), (4, 2)])
    filler = TaskFiller(cluster)
    before = filler.free.copy()
    shape = _shape(cluster, 7, 2)
    placed = pa(filler, shape)
    assert placed is not None and placed.workers == ((1, 5), (2, 2)) and placed.ps == ((2, 2),)
    for s, c in placed.workers:
        filler.give(s, shape.worker, c)
    for s, c in placed.ps:
        filler.give(s, shape.ps, c)
    assert np.array_equal(filler.free, before)
    assert pa(filler, _shape(cluster, 13, 1)) is None and np.array_equal(filler.free, before)


def test_random_placement_uses_only_free_slots_and_is_seeded() -> None:
    cluster = typed_cluster([(3, 1), (5, 0), (4, 2)])
    shape = _shape(cluster, 6, 2)
    placed = [
        random_placement(TaskFiller(cluster), shape, np.random.default_rng(7)) for _ in range(2)
    ]
    assert placed[0] == placed[1] and placed[0] is not None
    assert placed[0].n_workers == 6 and placed[0].n_ps == 2
    assert all(c <= cluster.capacity[s, 1] for s, c in placed[0].workers)
    assert all(s in (0, 2) for s, _ in placed[0].ps)  # s1 has no PS slot


# Options --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "options", "field"),
    [
        ("dps", {"explore_fraction": 1.5}, "explore_fraction"),
        ("dps", {"explore_fraction": True}, "explore_fraction"),
        ("dps", {"delta_scale": 0}, "delta_scale"),
        ("dps", {"eta_scale": float("nan")}, "eta_scale"),
        ("dps", {"radius_scale": "wide"}, "radius_scale"),
        ("dps", {"capacity_term": "both"}, "capacity_term"),
        ("dps", {"grid_top": "yes"}, "grid_top"),
        ("dps", {"placement": "spread"}, "placement"),
        ("dps", {"price_scale": 0}, "price_scale"),
        ("dps", {"window": 0}, "window"),
        ("dps-simple", {"explore_fraction": 0.1}, "explore_fraction"),
        ("rs", {"placement": "pa"}, "placement"),
        ("top", {"expected_jobs": 2.5}, "expected_jobs"),
        ("bfp", {"prices": {"w0": 0.5}}, "prices"),
        ("bfp", {"prices": {"worker:w0": 1.5}}, "prices['worker:w0']"),
        ("bfp", {"prices": -1}, "prices"),
        ("bfp", {"step": 0}, "step"),
        ("bfp", {"sweeps": 0}, "sweeps"),
        ("top", {"lower": 0}, "lower"),
        ("top", {"lower": 0.5, "upper": 0.2}, "upper"),
        ("top", {"bounds": {"ps:p0": [0.5, 0.2]}}, "bounds['ps:p0'][1]"),
        ("top", {"bounds": {"ps:p0": 0.5}}, "bounds['ps:p0']"),
    ],
)
def test_a_bad_option_is_refused_by_name(name: str, options: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=rf"^{__import__('re').escape(field)}"):
        create(name, **options)


def test_the_unit_value_range_sets_the_valuations_and_is_checked() -> None:
    """``pi_low``/``pi_high`` draw the reference unit values (the experiment's U[0.2, 0.5]):
    every valuation lies within 2 pi_high of its demand; a range upside down is refused
    naming its field."""
    opts = {"servers": 3, "pi_low": 0.2, "pi_high": 0.25}
    w = load_workload("dps-paper", seed=1, jobs=120, horizon=200, options=opts)
    for j in w.jobs:
        units = j.requested_workers + j.requested_ps  # type: ignore[operator]
        assert 0 < j.valuation <= 2 * 0.25 * units + 1e-9  # type: ignore[operator]
    with pytest.raises(Exception, match="pi_high"):
        load_workload(
            "dps-paper", seed=1, jobs=10, horizon=20, options={"pi_low": 0.5, "pi_high": 0.4}
        )
