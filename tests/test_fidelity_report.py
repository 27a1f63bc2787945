"""The fidelity experiment's arithmetic: per-job errors, policy means, the ranking with ties,
the goals and the ablation, on runs the simulator makes (no root needed).

Plausible bugs this catches: an error divided by the simulated rather than the measured JCT,
a job unfinished on one side counted as exact (or left out of the median), a ranking read
from the wrong side, a tie on the testbed counted as a disagreement, the ablation reading
the main truth for every row, a results file with a non-JSON infinity, and pooled runs
whose means are taken per run (or from one run) rather than over all their jobs.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from mlsched.engine.builder import SimulationConfig, simulate
from mlsched.engine.results import RunResult
from mlsched.engine.simulator import TruthConfig
from mlsched.profiling.grid import cells_for_jobs
from mlsched.testbed.experiment import testbed_workload as _workload
from mlsched.testbed.fidelity.experiment import (
    FIDELITY_SPEC,
    SCALES,
    _finite,
    fidelity_jobs,
    profile_settings,
)
from mlsched.testbed.fidelity.report import (
    FidelityRun,
    ablation_rows,
    fidelity_checks,
    fidelity_report,
    pooled_checks,
    write_plots,
)

WORKLOAD = _workload(FIDELITY_SPEC, fidelity_jobs("smoke"), 10.0)


def _run(policy: str, truth: TruthConfig) -> RunResult:
    return simulate(WORKLOAD, SimulationConfig(policy, truth=truth), cache=False)


def _fidelity(policy: str, real: TruthConfig, **truths: TruthConfig) -> FidelityRun:
    return FidelityRun(policy, _run(policy, real), {k: _run(policy, t) for k, t in truths.items()})


def test_a_simulator_that_is_the_truth_meets_every_goal() -> None:
    truth = TruthConfig(startup_s=12.0, restart_s=15.0)
    runs = [_fidelity(p, truth, profile=truth) for p in ("fifo", "las2d")]
    checks = fidelity_checks(runs)
    assert all(c.passed for c in checks), [c.to_dict() for c in checks]
    assert all(r["error"] == 0.0 for run in runs for r in run.jobs())


def test_a_simulator_twice_too_fast_fails_the_job_and_policy_goals() -> None:
    real = TruthConfig(compute_scale=2.0, comm_scale=2.0, startup_s=12.0)
    fast = TruthConfig(startup_s=6.0)
    runs = [_fidelity(p, real, profile=fast) for p in ("fifo", "las2d")]
    checks = {c.name: c for c in fidelity_checks(runs)}
    assert not checks["per-job median |simulated - measured| / measured JCT <= 10%"].passed
    assert not checks["fifo: mean JCT within 10%"].passed
    for run in runs:
        for r in run.jobs():  # relative to the measured JCT, which is the longer one
            m, s = r["jct_measured_s"], r["jct_simulated_s"]
            assert s < m and r["error"] == pytest.approx((m - s) / m)


def test_an_unfinished_job_counts_as_an_infinite_error_and_json_writes_null() -> None:
    truth = TruthConfig(startup_s=12.0)
    run = _fidelity("fifo", truth, profile=truth)
    job = next(iter(run.simulated["profile"].records.values()))
    job.completion_time_s = None  # as if the simulation left it unfinished
    from mlsched.core.allocation import JobState

    job.state = JobState.RUNNING
    rows = {r["job_id"]: r for r in run.jobs()}
    assert math.isinf(rows[job.job_id]["error"])
    text = json.dumps(_finite(run.to_dict()), allow_nan=False)
    assert '"error": null' in text


def test_the_ranking_compares_sides_and_a_testbed_tie_matches_either_order() -> None:
    truth = TruthConfig(startup_s=12.0)
    runs = [_fidelity(p, truth, profile=truth) for p in ("fifo", "las2d")]
    m = {r.policy: r.means()[0] for r in runs}
    assert m["fifo"] != m["las2d"]
    # The simulated side swapped: the ranking differs unless the measured means tie.
    swapped = [
        FidelityRun(runs[0].policy, runs[0].measured, runs[1].simulated),
        FidelityRun(runs[1].policy, runs[1].measured, runs[0].simulated),
    ]
    gap = abs(m["fifo"] - m["las2d"]) / min(m.values())
    same = {c.name: c for c in fidelity_checks(swapped)}["the same ranking of policies by mean JCT"]
    assert same.passed == (gap <= 0.05), same.detail


def test_the_ablation_scores_each_truth_on_its_own() -> None:
    real = TruthConfig(startup_s=12.0, restart_s=15.0)
    runs = [
        _fidelity(p, real, profile=real, nostart=TruthConfig(restart_s=0.0))
        for p in ("fifo", "las2d")
    ]
    rows = {r["variant"]: r for r in ablation_rows(runs, None)}
    assert rows["simulator: profile"]["median_job_error"] == 0.0
    assert rows["simulator: nostart"]["median_job_error"] > 0.05
    unisolated = _fidelity("fifo", TruthConfig(startup_s=20.0), profile=real)
    rows2 = ablation_rows(runs, unisolated)
    assert rows2[-1]["variant"].startswith("testbed without CPU slices")
    assert rows2[-1]["median_job_error"] > 0.0


def test_the_report_plots_and_tables_what_it_measured(tmp_path: Path) -> None:
    truth = TruthConfig(startup_s=12.0)
    runs = [_fidelity(p, truth, profile=truth) for p in ("fifo", "las2d")]
    plots = write_plots(tmp_path, [r.to_dict() for r in runs])
    assert [p.name for p in plots] == ["fidelity_scatter.png", "fidelity_cdf.png"]
    assert all(p.stat().st_size > 5000 for p in plots)
    results = {
        "runs": [r.to_dict() for r in runs],
        "ablation": ablation_rows(runs, None),
        "checks": [c.to_dict() for c in fidelity_checks(runs)],
    }
    text = fidelity_report(_finite(results))
    assert "[PASS] the same ranking" in text and "mlp-ring-b" in text


def test_the_jobs_need_the_cells_the_profile_measures() -> None:
    for scale in SCALES:
        jobs = fidelity_jobs(scale)
        kinds = {c[1] for c in cells_for_jobs(jobs).cells()}
        assert kinds == {"ps_async", "ps_sync", "ring"}, scale
    models = {j["model"] for j in fidelity_jobs("default")}
    assert models == {"mlp", "resnet20", "vgg11-narrow"} and len(fidelity_jobs()) >= 8
    settings = profile_settings()
    assert (settings.device_cores, settings.ps_cores) == (0.25, 0.2)
    assert settings.ranks_per_node == FIDELITY_SPEC.gpus
    for job in fidelity_jobs():
        size = job["training"]["image_size"]
        assert settings.image_for(job["model"]) == size, job["job_id"]


def _results(scale: float) -> dict:
    """A results document whose every simulated JCT is ``scale`` times the measured."""
    rows = [
        {"job_id": f"j{i}", "policy": p, "jct_measured_s": 10.0 * (i + 1) * (2 if p == "b" else 1),
         "jct_simulated_s": 10.0 * (i + 1) * (2 if p == "b" else 1) * scale,
         "error": abs(scale - 1.0)}
        for p in ("a", "b") for i in range(4)
    ]  # fmt: skip
    return {"runs": [{"policy": p, "jobs": [r for r in rows if r["policy"] == p]} for p in "ab"]}


def test_pooled_runs_meet_a_goal_their_errors_cancel_in_and_miss_one_they_share() -> None:
    over, under = _results(1.12), _results(0.90)
    assert not all(c.passed for c in pooled_checks([over]))
    pooled = {c.name: c for c in pooled_checks([over, under])}
    # Means over both runs' jobs: 1.12 and 0.90 of the same JCTs average to 1.01.
    assert pooled["a: mean JCT within 10%"].passed
    assert "(1.0%)" in pooled["a: mean JCT within 10%"].detail
    assert (
        "over 16 job runs"
        in pooled["per-job median |simulated - measured| / measured JCT <= 10%"].detail
    )
    assert pooled["the same ranking of policies by mean JCT"].passed
    both_over = {c.name: c for c in pooled_checks([over, _results(1.15)])}
    assert not both_over["a: mean JCT within 10%"].passed
    assert not both_over["per-job median |simulated - measured| / measured JCT <= 10%"].passed
    unfinished = _results(1.0)
    unfinished["runs"][0]["jobs"][0].update(jct_simulated_s=None, error=None)  # as JSON has it
    checks = {c.name: c for c in pooled_checks([unfinished])}
    assert (
        "over 8 job runs"
        in checks["per-job median |simulated - measured| / measured JCT <= 10%"].detail
    )
