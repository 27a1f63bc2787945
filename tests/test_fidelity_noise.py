"""The fidelity smaller form's regression check (``testbed/fidelity/noise.py``): bounds
from the spread of recorded real runs, and every regression the check exists for planted
in the simulator against those recordings (tests/data/fidelity-smoke: repeats of the form
recorded on the 2-core machine by ``scripts/record_fidelity.py``; no root needed here).

Plausible bugs this catches: a bound taken from the repeats' mean alone (or their largest
value), a standard deviation over n rather than n - 1 draws, a signed statistic whose
errors cancel read as a magnitude, the restarted jobs' statistic taken over every job, a
form with no restart passing the restart check, the ranking decided inside the noise, a
replay that simulates on another server numbering or profile than the run it replays, and
a check that misses any of :data:`PLANTS`: start-up a third off, restarts not charged,
communication dropped, compute 40 % off, the ranking reversed.
"""

from __future__ import annotations

import copy
import math
import statistics
from pathlib import Path
from typing import Any

import pytest
from scipy.stats import t

from mlsched.testbed.fidelity.noise import (
    FALSE_ALARM,
    MEASURES,
    PLANTS,
    STATISTICS,
    Bounds,
    check_run,
    job_costs,
    load_recordings,
    noise_bounds,
    own_costs,
    plant_table,
    recorded_bounds,
    regression_checks,
    run_statistics,
)

RECORDED = Path(__file__).parent / "data" / "fidelity-smoke"


def _row(job: str, policy: str, m: float, s: float, restarts: int = 0, it: float = 0.01,
         it_sim: float | None = None, started_sim: int = 0) -> dict[str, Any]:  # fmt: skip
    return {
        "job_id": job, "policy": policy, "jct_measured_s": m, "jct_simulated_s": s,
        "error": abs(s - m) / m, "signed_error": (s - m) / m, "restarts_measured": restarts,
        "restarts_simulated": restarts, "started_slot_measured": 0,
        "started_slot_simulated": started_sim, "placement_measured": "h0 ps h0",
        "placement_simulated": "h0 ps h0",
        "iteration_measured_s": it, "iteration_simulated_s": it if it_sim is None else it_sim,
    }  # fmt: skip


def _doc(shift: float = 0.0, restart_shift: float = 0.0, it_shift: float = 0.0,
         b_scale: float = 2.0, diverged: float = 0.0) -> dict[str, Any]:  # fmt: skip
    """Two policies of four jobs: ``a``'s jobs 20-50 s, ``b``'s ``b_scale`` times that;
    every simulated JCT ``1 + shift`` of the measured (the restarted job's ``1 +
    restart_shift`` more; ``a``'s first job ``diverged`` more, started a slot later in the
    simulator), every simulated iteration ``1 + it_shift`` of the measured."""
    runs = []
    for policy, scale in (("a", 1.0), ("b", b_scale)):
        rows = []
        for i in range(4):
            m = (20.0 + 10.0 * i) * scale
            restarts = 1 if i == 3 else 0
            late = policy == "a" and i == 0 and diverged != 0.0
            s = m * (1 + shift + (restart_shift if restarts else 0.0) + (diverged if late else 0))
            rows.append(_row(f"j{i}", policy, m, s, restarts, 0.01, 0.01 * (1 + it_shift),
                             started_sim=1 if late else 0))  # fmt: skip
        runs.append({"policy": policy, "jobs": rows})
    return {"runs": runs}


_WIDE = (-1.0, 1.0)
BOUNDS = Bounds(
    {"fresh": (-0.05, 0.05), "restarted": (-0.10, 0.10), "iteration": (-0.10, 0.10),
     **{f"own {k}": _WIDE for k in MEASURES}},
    spreads={"a": 0.0, "b": 0.1}, reach=2.0,  # a tie of 20 % between a and b
)  # fmt: skip


def _failed(
    doc: dict[str, Any], bounds: Bounds = BOUNDS, own: dict[str, Any] | None = None
) -> list[str]:
    names = [*STATISTICS, "ranking"]
    checks = regression_checks(doc, bounds, _doc() if own is None else own)
    return [names[i] for i, c in enumerate(checks) if not c.passed]


def test_each_statistic_past_its_bound_fails_its_own_check() -> None:
    assert _failed(_doc(shift=0.03)) == []
    assert _failed(_doc(shift=0.07)) == ["fresh"]  # every job 7 % one way
    assert _failed(_doc(shift=-0.07)) == ["fresh"]  # an interval holds both ways
    # Only the restarted jobs off: their own check, where the mean over all of them holds.
    assert _failed(_doc(restart_shift=0.15)) == ["restarted"]
    assert _failed(_doc(it_shift=0.12)) == ["iteration"]
    assert _failed(_doc(it_shift=-0.12)) == ["iteration"]
    # A job the simulator started a slot later is off by its queue, not by the costs: the
    # jobs that started alike leave it out.
    assert _failed(_doc(diverged=0.6)) == []
    assert run_statistics(_doc(diverged=0.6))["bias"] == pytest.approx(0.6 / 8)
    # An interval off zero: a run on the other side of zero fails though its size passes.
    off = Bounds({**BOUNDS.intervals, "fresh": (0.02, 0.10)}, BOUNDS.spreads, BOUNDS.reach)
    assert _failed(_doc(shift=0.04), off) == []
    assert _failed(_doc(shift=-0.04), off) == ["fresh"]
    stats = run_statistics(_doc(shift=0.03, restart_shift=0.15))
    assert stats["bias"] == pytest.approx(0.03 + 0.15 / 4)
    assert stats["restarted"] == pytest.approx(0.18)
    assert stats["fresh"] == pytest.approx(0.03)
    # The run simulated with its own costs is bounded apart, by its own intervals.
    tight = Bounds({**BOUNDS.intervals, "own fresh": (-0.01, 0.01)}, BOUNDS.spreads, 2.0)
    assert _failed(_doc(), tight, own=_doc(shift=0.005)) == []
    assert _failed(_doc(), tight, own=_doc(shift=0.03)) == ["own fresh"]
    assert _failed(_doc(shift=0.03), tight, own=_doc()) == []  # the profile's side holds 5 %


def test_no_restart_or_no_job_alike_fails_the_check_that_needs_it() -> None:
    doc = _doc()
    for run in doc["runs"]:
        for row in run["jobs"]:
            row["restarts_measured"] = 0
            row["placement_simulated"] = "h0+h1 ps h0"  # spread where the testbed had one host
    checks = dict(zip([*STATISTICS, "ranking"], regression_checks(doc, BOUNDS, doc), strict=True))
    assert not checks["restarted"].passed
    assert "restart costs unchecked" in checks["restarted"].detail
    assert not checks["fresh"].passed and "start-up costs unchecked" in checks["fresh"].detail
    assert not checks["iteration"].passed and "compute unchecked" in checks["iteration"].detail
    assert not checks["own restarted"].passed and not checks["own fresh"].passed


def test_the_ranking_is_decided_only_beyond_the_noise() -> None:
    def flipped(b_scale: float) -> dict[str, Any]:
        doc = _doc(b_scale=b_scale)
        for row in doc["runs"][1]["jobs"]:  # b simulated a third as long as measured
            row["jct_simulated_s"] = row["jct_measured_s"] / (b_scale * 1.5)
        return doc

    ranking = regression_checks(flipped(2.0), BOUNDS, _doc())[-1]
    assert not ranking.passed and "1 pair(s) apart" in ranking.detail
    # Measured 15 % apart with a 20 % tie: the order is the noise's, either one passes.
    tied = regression_checks(flipped(1.15), BOUNDS, _doc())[-1]
    assert tied.passed and "0 pair(s) apart" in tied.detail


def test_bounds_are_a_prediction_interval_over_the_repeats() -> None:
    shifts = [0.01, -0.02, 0.04, 0.0, 0.02]
    repeats = [(_doc(shift=x, b_scale=2.0 + x), _doc(shift=x / 10)) for x in shifts]
    bounds = noise_bounds(repeats)
    n = len(shifts)
    k = t.ppf(1 - FALSE_ALARM / (len(STATISTICS) + 1) / 2, n - 1) * math.sqrt(1 + 1 / n)
    assert bounds.repeats == n
    mean, reach = statistics.fmean(shifts), k * statistics.stdev(shifts)
    assert bounds.intervals["fresh"] == pytest.approx((mean - reach, mean + reach))
    lo, hi = bounds.intervals["own fresh"]  # the own costs' side from the pair's second
    assert (lo, hi) == pytest.approx(((mean - reach) / 10, (mean + reach) / 10))
    assert "bias" not in bounds.intervals  # reported, not bounded
    # b's measured mean moves with its scale, a's not at all: the tie is b's spread alone.
    b_means = [35.0 * (2.0 + x) for x in shifts]
    spread = statistics.stdev(b_means) / statistics.fmean(b_means)
    assert bounds.spreads["a"] == 0.0 and bounds.spreads["b"] == pytest.approx(spread)
    assert bounds.tie("a", "b") == pytest.approx(k * spread)
    assert bounds.tie("b", "b") == pytest.approx(k * spread * math.sqrt(2))
    with pytest.raises(ValueError, match="at least 3"):
        noise_bounds(repeats[:2])
    no_restart = _doc()
    for run in no_restart["runs"]:
        for row in run["jobs"]:
            row["restarts_measured"] = 0
    with pytest.raises(ValueError, match="restarted not measured"):
        noise_bounds([*repeats, (no_restart, no_restart)])


# -- the recorded runs ---------------------------------------------------------------------

RECORDINGS = load_recordings(RECORDED) if RECORDED.is_dir() else []


@pytest.fixture(scope="module")
def bounds() -> Bounds:
    """The bounds from the recordings as recorded: the simulator of their day."""
    return recorded_bounds(RECORDINGS)


def test_own_costs_are_the_medians_the_run_measured_per_cell() -> None:
    """Per cell, over its jobs' runs of every policy: the median start-up and restart
    measured, and the median iteration of those on one server (compute and communication
    in the profile's proportion); a cost not measured stays the profile's. Plausible bugs:
    a spread job's iteration (links included) taken in, a mean for a median, a cell
    keyed by the job rather than by model, kind and workers."""
    rec = RECORDINGS[0]
    result = copy.deepcopy(dict(rec.result))
    measured = {  # per policy's run: (job, start-up, restart, iteration, placement)
        0: [("mlp-a", 10.0, None, 0.020, "h0 ps h0"), ("mlp-d", 16.0, 30.0, 0.030, "h1 ps h1")],
        1: [("mlp-a", 13.0, 20.0, 0.026, "h2 ps h2"), ("mlp-d", 11.0, None, 0.9, "h0+h1 ps h0")],
    }
    for k, rows in measured.items():
        by_id = {row["job_id"]: row for row in result["runs"][k]["jobs"]}
        for row in by_id.values():
            row.update(startup_measured_s=None, restart_measured_s=None)
        for job, start, restart, it, where in rows:
            by_id[job].update(startup_measured_s=start, restart_measured_s=restart,
                              iteration_measured_s=it, placement_measured=where)  # fmt: skip
    own = own_costs(result, rec.profile)
    cell, was = own.cell("mlp", "ps_async", 1, "cpu"), rec.profile.cell("mlp", "ps_async", 1, "cpu")
    assert cell is not None and was is not None
    assert cell.startup_s == pytest.approx(statistics.median([10.0, 16.0, 13.0, 11.0]))
    assert cell.restart_s == pytest.approx(25.0)
    assert cell.iteration_s == pytest.approx(0.026)  # 0.020, 0.030, 0.026 on one server
    assert was.compute_s and was.comm_s and cell.compute_s and cell.comm_s
    assert cell.compute_s / cell.comm_s == pytest.approx(was.compute_s / was.comm_s)
    assert cell.compute_s + cell.comm_s == pytest.approx(0.026)
    # The other cells' jobs measured no start-up or restart: those stay the profile's.
    for kind in ("ps_sync", "ring"):
        mine, theirs = own.cell("mlp", kind, 2, "cpu"), rec.profile.cell("mlp", kind, 2, "cpu")
        assert mine is not None and theirs is not None
        assert (mine.startup_s, mine.restart_s) == (theirs.startup_s, theirs.restart_s)
    # Each job of a run is simulated with what it measured itself in that run, and with
    # the cell's medians where it measured nothing (mlp-a restarted only in the second).
    first = job_costs(result, result["runs"][0], rec.profile)["mlp-a"].cell(
        "mlp", "ps_async", 1, "cpu"
    )
    assert first is not None
    assert (first.startup_s, first.restart_s) == (10.0, pytest.approx(25.0))
    assert first.iteration_s == pytest.approx(0.020)
    spread = job_costs(result, result["runs"][1], rec.profile)["mlp-d"].cell(
        "mlp", "ps_async", 1, "cpu"
    )
    assert spread is not None and spread.startup_s == 11.0
    assert spread.iteration_s == pytest.approx(0.026)  # spread: the cell's one-server median


def test_the_recordings_are_repeats_of_the_form_with_restarts(
    bounds: Bounds,
) -> None:
    assert len(RECORDINGS) >= 5
    for rec in RECORDINGS:
        policies = [run["policy"] for run in rec.result["runs"]]
        assert policies == ["las2d", "tiresias"], rec.name
        restarts = sum(r["restarts_measured"] for run in rec.result["runs"] for r in run["jobs"])
        assert restarts > 0, rec.name


@pytest.mark.parametrize("rec", RECORDINGS, ids=[r.name for r in RECORDINGS])
def test_the_simulator_as_it_is_passes_on_every_recorded_run(rec: Any, bounds: Bounds) -> None:
    checks = check_run(rec, bounds)
    failed = [c.to_dict() for c in checks if not c.passed]
    assert not failed, failed


#: Per plant, the share of the recorded runs the check must fail on, as measured (11 runs,
#: docs/testing.md's table): every one. A check that loses power fails here.
DETECTED = dict.fromkeys(PLANTS, 1.0)


@pytest.mark.parametrize("plant", list(PLANTS))
def test_each_planted_regression_fails_the_check_on_the_recorded_runs(
    plant: str, bounds: Bounds
) -> None:
    assert set(DETECTED) == set(PLANTS)
    failed = []
    for rec in RECORDINGS:
        checks = check_run(rec, bounds, plant)
        if not all(c.passed for c in checks):
            failed.append(rec.name)
        ranking = checks[-1]
        if PLANTS[plant].reverse_policies and "0 pair(s)" not in ranking.detail:
            assert not ranking.passed, (rec.name, ranking.detail)  # decided: must differ
    assert len(failed) >= DETECTED[plant] * len(RECORDINGS), (plant, failed)


def test_the_plant_table_counts_what_failed(bounds: Bounds) -> None:
    rows = {r["plant"]: r for r in plant_table(RECORDINGS[:2], bounds)}
    assert rows["none (the simulator as it is)"]["failed"] == 0
    assert all(rows[p]["failed"] == 2 for p, share in DETECTED.items() if share == 1.0)
    _, hi = rows["restart not charged"]["own restarted"]
    assert hi < bounds.intervals["own restarted"][0]  # every run's below the interval
