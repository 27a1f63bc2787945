"""What the estimator's versions promise: a job's predictions change only with its own
parameters or the cluster, steady jobs of one key each re-enter their own sample, and
policies keep rates while their jobs' model stands."""

from __future__ import annotations

import dataclasses

import pytest
from test_estimator import CL, SCENARIOS, Truth, feed

from mlsched.core.allocation import Placement
from mlsched.core.job import JobSpec
from mlsched.perfmodel import (
    RuntimeEstimator,
)


def test_steady_jobs_of_one_key_each_re_enter_their_own_sample() -> None:
    """Two steady jobs share a profile key (one window) on different placements, measured
    alternately and noiselessly. Each repeat must re-enter that job's sample (its own design
    rows and times), not the window's last one, which is the other job's; a changed
    measurement must enter as a new sample and mark the key for a refit."""
    job = SCENARIOS["ps_sync"][1]
    twin = JobSpec.from_dict({**job.to_dict(), "job_id": "twin"})
    pa, pb = Placement.of({0: 2}, {1: 1}), Placement.of({2: 1, 3: 1}, {0: 1})  # 0.16, 0.4
    est = RuntimeEstimator(CL, window=6)
    truth = Truth(noise=0.0)
    expected = []
    for slot in range(5):
        for j, p in ((job, pa), (twin, pb)):
            m = truth.measure(j, p, slot)
            est.observe(m, j)
            expected.append((m.compute_time_s, m.comm_time_s, est._entry(j, p).dc.tolist()))
        est.refit()
    key = est.key(job, pa)
    assert est.key(twin, pb) == key
    window = [(s.compute, s.comm, s.dc.tolist()) for s in est._keys[key].samples]
    assert window == expected[-6:]
    assert window[-1] != window[-2]  # the two jobs' samples differ: the test can tell them
    for j, p in ((job, pa), (twin, pb)):
        assert est.iteration_time(j, p) == pytest.approx(truth.time(j, p), rel=1e-9)
    fit = est.fits[key]
    slower = Truth(compute_x=2.3, noise=0.0)
    est.observe(slower.measure(job, pa, 5), job)
    assert key in est._dirty
    est.refit()
    assert est.fits[key] is not fit
    assert est.iteration_time(job, pa) > truth.time(job, pa)


def test_a_jobs_version_changes_with_its_own_parameters_and_the_cluster_only() -> None:
    """What a policy's per-job rate memo keys on (RuntimeModel.job_version): refitting
    another job's profile leaves it, refitting the job's own (any hardware) or changing the
    cluster changes it. A version that stayed while the prediction moved would keep stale
    rates in hetero's and GADGET's memos."""
    mine = SCENARIOS["ps_async"][1]
    other = dataclasses.replace(mine, job_id="o", model="other-model")
    p = Placement.of({0: 2}, {1: 1})
    est = RuntimeEstimator(CL)
    est.iteration_time(mine, p)
    est.iteration_time(other, p)
    v_mine, v_other = est.job_version(mine), est.job_version(other)
    feed(est, Truth(seed=1), other, [p])
    est.refit()
    assert est.job_version(other) != v_other
    assert est.job_version(mine) == v_mine and est.iteration_time(mine, p) == pytest.approx(0.52)
    before = est.iteration_time(mine, p)
    feed(est, Truth(seed=2), mine, [p])
    est.refit()
    assert est.iteration_time(mine, p) != before and est.job_version(mine) != v_mine
    v_mine = est.job_version(mine)
    est.set_cluster(CL)
    assert est.job_version(mine) != v_mine


def test_policies_keep_rates_while_their_jobs_model_stands() -> None:
    from mlsched.scheduler.rate_memo import RateMemo

    class View:
        def __init__(self, runtime: RuntimeEstimator) -> None:
            self.runtime = runtime

    job = SCENARIOS["ps_async"][1]
    est = RuntimeEstimator(CL)
    memo, view = RateMemo(), View(est)
    memo.of(job, view)["k"] = 1.0  # type: ignore[arg-type]
    assert memo.of(job, view) == {"k": 1.0}  # type: ignore[arg-type]
    feed(est, Truth(seed=1), job, [Placement.of({0: 2}, {1: 1})])
    est.refit()
    assert memo.of(job, view) == {}  # type: ignore[arg-type]
