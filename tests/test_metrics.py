"""Metrics on a small hand-built RunResult, checked against values worked out by hand."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from mlsched.controller.pricing import market, quote_fields
from mlsched.core.allocation import JobState, Quote, RejectKind
from mlsched.core.job import JobSpec
from mlsched.core.utility import Utility
from mlsched.engine.engine import JobRecord, ModelError, RunResult
from mlsched.engine.summary import job_rows, summarize

SLOT_S = 100.0


def _record(
    job_id: str,
    arrival: int,
    utility: Utility,
    state: JobState,
    *,
    weight: float = 1.0,
    completion_slot: int | None = None,
    completion_time_s: float | None = None,
    restarts: int = 0,
    quote: float | None = None,
) -> JobRecord:
    spec = JobSpec(
        job_id=job_id,
        utility=utility,
        arrival_slot=arrival,
        weight=weight,
        epochs=2,
        chunks=1,
        batches_per_chunk=5,
    )
    rec = JobRecord(
        spec, state=state, restarts=restarts, quote=Quote(quote) if quote is not None else None
    )
    if state is not JobState.REJECTED:
        rec.admitted_slot = arrival
    if state is JobState.DONE:
        rec.completion_slot = completion_slot
        rec.completion_time_s = completion_time_s
        rec.progress = spec.total_work
    elif state is JobState.RUNNING:
        rec.progress = 4.0
    else:
        rec.reject_kind = RejectKind.CAPACITY
    return rec


@pytest.fixture
def result() -> RunResult:
    records = [
        # a: x = 2 - 0 = 2 slots > target 1 -> missed; sigmoid with decay 0 pays 10 / 2 = 5
        _record(
            "a",
            0,
            Utility.sigmoid(priority=10, decay=0, target=1),
            JobState.DONE,
            weight=2,
            completion_slot=2,
            completion_time_s=250.0,
            restarts=1,
            quote=3.0,
        ),
        # b: JCT 400 - 100 = 300 s; constant 4; no target
        _record(
            "b", 1, Utility.constant(4), JobState.DONE, completion_slot=3, completion_time_s=400.0
        ),
        # c: admitted, not completed -> missed, utility 0, still pays its quote
        _record(
            "c",
            2,
            Utility(kind="step", params={"value": 9, "deadline": 5}),
            JobState.RUNNING,
            restarts=2,
            quote=5.0,
        ),
        # d: rejected: no utility, its quote is not revenue
        _record("d", 3, Utility.constant(1), JobState.REJECTED, quote=7.0),
    ]
    return RunResult(
        policy="hand",
        records={r.job_id: r for r in records},
        slots=5,
        slot_seconds=SLOT_S,
        resource_names=("cpu", "gpu"),
        utilization=np.array([[0.5, 0.2], [0.3, 0.4]]),
        model_errors=[ModelError("a", 0, 1.1, 1.0), ModelError("b", 1, 0.8, 1.0)],
        wall_seconds=1.5,
    )


def test_counts_and_utility(result: RunResult):
    s = summarize(result)
    assert (s.jobs, s.admitted, s.completed, s.rejected) == (4, 3, 2, 1)
    assert s.admitted_fraction == 0.75 and s.completed_fraction == 0.5
    assert s.total_utility == pytest.approx(9.0)


def test_jct_statistics(result: RunResult):
    s = summarize(result)
    # JCTs: a 250 - 0 = 250 s, b 400 - 100 = 300 s
    assert s.avg_jct_s == pytest.approx(275.0)
    assert s.median_jct_s == pytest.approx(275.0)
    assert s.p99_jct_s == pytest.approx(250 + 0.99 * 50)
    assert s.avg_jct_slots == pytest.approx(2.75)
    assert s.p99_jct_slots == pytest.approx(2.995)


def test_weighted_completion_and_makespan(result: RunResult):
    s = summarize(result)
    assert s.weighted_completion_s == pytest.approx(2 * 250 + 1 * 400)
    assert s.weighted_flow_s == pytest.approx(2 * 250 + 1 * 300)
    assert s.makespan_s == pytest.approx(400.0)
    assert s.makespan_slots == 4


def test_weighted_completion_time_charges_unfinished_jobs_the_horizon(result: RunResult):
    # a done in slot 2 (w 2), b in slot 3; c running and d rejected charged slots run (5)
    assert summarize(result).weighted_completion_time == pytest.approx(2 * 3 + 4 + 5 + 5)
    result.horizon = 20
    assert summarize(result).weighted_completion_time == pytest.approx(2 * 3 + 4 + 20 + 20)
    # Finishing c instead of leaving it unfinished never scores worse.
    c = result.records["c"]
    c.state, c.completion_slot = JobState.DONE, 19
    assert summarize(result).weighted_completion_time == pytest.approx(2 * 3 + 4 + 20 + 20)


def test_utilization_misses_revenue_error_restarts(result: RunResult):
    s = summarize(result)
    assert s.utilization == pytest.approx({"cpu": 0.4, "gpu": 0.3})
    assert s.deadline_misses == 2
    assert s.revenue == pytest.approx(8.0)
    assert s.model_error == pytest.approx(0.15)
    assert s.restarts == 3
    assert s.wall_seconds == 1.5 and summarize(result, wall_seconds=9).wall_seconds == 9


def test_to_dict_is_json_ready(result: RunResult):
    d = summarize(result).to_dict()
    assert json.loads(json.dumps(d))["total_utility"] == pytest.approx(9.0)
    assert {"avg_jct_s", "p99_jct_s", "makespan_s", "utilization", "revenue"} <= set(d)


def test_job_rows(result: RunResult):
    rows = {r["job_id"]: r for r in job_rows(result)}
    assert list(rows) == ["a", "b", "c", "d"]
    assert rows["a"]["jct_s"] == 250.0 and rows["a"]["missed_target"] is True
    assert rows["a"]["utility"] == pytest.approx(5.0) and rows["a"]["price_paid"] == 3.0
    assert rows["b"]["jct_slots"] == 3.0 and rows["b"]["missed_target"] is False
    assert rows["c"]["progress"] == pytest.approx(0.4) and rows["c"]["jct_s"] is None
    assert rows["d"]["admitted"] is False and rows["d"]["price_paid"] == 0.0
    assert rows["d"]["reject_kind"] == "capacity" and rows["d"]["price"] == 7.0


def test_empty_result():
    empty = RunResult(
        policy="none",
        records={},
        slots=0,
        slot_seconds=60.0,
        resource_names=("cpu",),
        utilization=np.zeros((0, 1)),
    )
    s = summarize(empty)
    assert (s.jobs, s.completed, s.total_utility) == (0, 0, 0.0)
    assert s.avg_jct_s is None and s.p99_jct_s is None and s.model_error is None
    assert s.utilization == {"cpu": 0.0} and s.makespan_s == 0.0


def test_profit_is_revenue_and_acceptance_counts_quotes_put_to_users(result: RunResult):
    """a and c accepted their quotes; d's price came with a capacity rejection, so it was
    never put to its user. Once d declines instead, 2 of 3 quotes were accepted. The
    controller's totals (``mlsched status``) read the same records the same way."""
    s = summarize(result)
    assert s.profit == s.revenue == pytest.approx(8.0)  # no spec has a cost model
    assert (s.quotes, s.acceptance_rate) == (2, 1.0)
    result.records["d"].reject_kind = RejectKind.DECLINED
    s = summarize(result)
    assert (s.quotes, s.acceptance_rate) == (3, pytest.approx(2 / 3))
    assert market(result.records.values()) == {"revenue": 8.0, "quotes": 3, "quotes_accepted": 2}
    assert quote_fields(result.records["d"])["quote_decision"] == "declined"
    assert quote_fields(result.records["b"]) == {}  # no price, no price fields
    b = summarize(replace(result, records={"b": result.records["b"]}))
    assert (b.quotes, b.acceptance_rate) == (0, None)


@pytest.mark.parametrize("seed", range(8))
def test_percentile_is_numpys_to_the_last_bit(seed: int) -> None:
    """The summary's percentile (no masked-array import) equals np.percentile's default
    exactly: ties, odd and even counts, one value, the ends. Which bug fails it: an
    interpolation from the wrong end (numpy's _lerp switches at 0.5), an index off by one."""
    from mlsched.engine.summary import percentile

    rng = np.random.default_rng(seed)
    for n in (1, 2, 3, 10, 101, 1000):
        values = rng.lognormal(3.0, 2.0, n).tolist()
        values += values[: n // 4]  # ties
        for q in (0, 1, 25, 50, 99, 99.9, 100, float(rng.uniform(0, 100))):
            assert percentile(values, q) == float(np.percentile(values, q)), (n, q)
    assert np.isnan(percentile([1.0, float("nan")], 50))
