"""The best fixed price (spec 004 §3.7): the replay of the model, its search, and the
``bfp`` and ``top`` baselines that the simulator's runner completes from the whole trace."""

from __future__ import annotations

import numpy as np
import pytest

from mlsched.engine.builder import SimulationConfig, _with_oracle, simulate
from mlsched.perfmodel.estimator import RuntimeEstimator
from mlsched.scheduler.offline.fixed_price import best_fixed_prices, build_model, replay
from mlsched.scheduler.view import RunContext
from mlsched.workloads import Workload, load_workload


def small(seed: int = 0, **options: object) -> Workload:
    """A contended point: 2 worker types and 1 PS type on 4 servers, load 2 at price 0."""
    opts = {"servers": 4, "worker_types": 2, "ps_types": 1, **options}
    return load_workload("dps-paper", seed=seed, jobs=240, horizon=160, options=opts)


def context(w: Workload, seed: int = 0) -> RunContext:
    return RunContext(
        cluster=w.cluster,
        slot_seconds=w.slot_seconds,
        horizon=w.horizon_slots,
        seed=seed,
        runtime=RuntimeEstimator(w.cluster, w.runtime),
    )


def test_candidates_replayed_together_equal_each_replayed_alone() -> None:
    model = build_model(small().jobs, context(small()))
    rng = np.random.default_rng(1)
    prices = rng.uniform(0.05, 1.0, size=(12, len(model.columns)))
    together = replay(model, prices, keep=True)
    for g, row in enumerate(prices):
        alone = replay(model, row, keep=True)
        assert alone.profit[0] == pytest.approx(together.profit[g])
        assert np.array_equal(alone.accepted[0], together.accepted[g])  # type: ignore[index]


def test_the_replay_is_the_engine_run_of_bfp_job_for_job() -> None:
    """On the dps-paper model (disjoint typed slots, the dps runtime family, no noise) the
    replay admits, co-locates and earns exactly what the engine's bfp run does: same
    arrivals order, capacity check, PA order, runtimes and release slot (A30)."""
    w = small(seed=2)
    model = build_model(w.jobs, context(w, seed=2))
    found = best_fixed_prices(model, step=0.05)
    prices = np.array([found.prices[c] for c in model.columns])
    mine = replay(model, prices, keep=True)
    result = simulate(w, SimulationConfig("bfp", seed=2, policy_options={"prices": found.prices}))
    admitted = {j for j, r in result.records.items() if r.admitted_slot is not None}
    replayed = {model.job_ids[i] for i in np.flatnonzero(mine.accepted[0])}  # type: ignore[index]
    assert admitted == replayed and len(admitted) > 20
    colocated = {j for j in admitted if result.records[j].last_placement.colocated}  # type: ignore[union-attr]
    assert colocated == {model.job_ids[i] for i in np.flatnonzero(mine.colocated[0])}  # type: ignore[index]
    revenue = sum(r.price_paid for r in result.records.values())
    assert revenue == pytest.approx(mine.profit[0]) == pytest.approx(found.profit)
    rejected = sum(
        r.reject_kind is not None and r.reject_kind.value == "capacity"
        for r in result.records.values()
    )
    assert rejected > 0, "the point must be contended for the release timing to matter"


def test_no_move_on_the_grid_beats_the_prices_found() -> None:
    """Coordinate ascent stops where no single price on the grid does better, and random
    price vectors do no better either."""
    w = small(seed=1)
    model = build_model(w.jobs, context(w, seed=1))
    assert len(model.columns) == 3  # two worker types: coordinate ascent, not exhaustive
    found = best_fixed_prices(model, step=0.05)
    best = np.array([found.prices[c] for c in model.columns])
    grid = np.round(np.arange(1, 21) * 0.05, 10)
    for c in range(len(best)):
        moves = np.repeat(best[None, :], len(grid), axis=0)
        moves[:, c] = grid
        assert replay(model, moves).profit.max() <= found.profit + 1e-9
    others = np.random.default_rng(0).choice(grid, size=(300, len(best)))
    assert replay(model, others).profit.max() <= found.profit + 1e-9


def test_exhaustive_search_with_one_worker_and_one_ps_type() -> None:
    w = small(worker_types=1)
    model = build_model(w.jobs, context(w))
    found = best_fixed_prices(model, step=0.2)
    grid = np.round(np.arange(1, 6) * 0.2, 10)
    each = [replay(model, np.array([a, b])).profit[0] for a in grid for b in grid]
    assert found.profit == pytest.approx(max(each))


def test_with_ample_capacity_the_best_fixed_price_is_the_reference_value() -> None:
    """v = xi (pi^W d^W + pi^P d^P), xi ~ U[0, 2], capacity never binding (load 0.05):
    revenue peaks when each type's price is its pi (spec §7), so the best grid prices on a
    1,500-job trace lie within 0.1 of pi."""
    w = load_workload(
        "dps-paper",
        seed=4,
        jobs=1500,
        horizon=1500,
        options={"servers": 4, "worker_types": 1, "ps_types": 1, "load": 0.05},
    )
    model = build_model(w.jobs, context(w, seed=4))
    found = best_fixed_prices(model, step=0.05)
    reference = w.notes["reference_values"]
    for column, price in found.prices.items():
        assert abs(price - reference[column]) <= 0.1, (column, price, reference[column])


def test_the_runner_gives_bfp_and_top_what_they_need_from_the_trace() -> None:
    w = small()
    bfp = _with_oracle(w, SimulationConfig("bfp", seed=0))
    assert set(bfp["prices"]) == {"worker:w0", "worker:w1", "ps:p0"}
    given = {"prices": {"worker:w0": 0.3}}
    assert _with_oracle(w, SimulationConfig("bfp", policy_options=given)) == given
    top = _with_oracle(w, SimulationConfig("top", seed=0))
    for low, high in top["bounds"].values():
        assert 0 < low <= high <= 1
    assert _with_oracle(w, SimulationConfig("dps")) == {}
    with pytest.raises(ValueError, match=r"^step"):
        _with_oracle(w, SimulationConfig("bfp", policy_options={"step": -1}))
