"""Contract and property tests run against every policy in the registry.

The policy list is read from :func:`mlsched.scheduler.registry.registered` at collection
time, so a newly registered policy is checked without touching this file. Each property
runs the real engine and simulator on random clusters and workloads (see
``tests/strategies.py``) and checks, from the recorded per-slot allocations and progress
reports rather than from the engine's own checks:

* no server resource is over-allocated in any slot;
* a job runs only while it is active: never before its arrival (or admission), never after
  its completion slot, never when rejected;
* a job completes exactly when its work is done;
* the same seed gives the same result;
* liveness: a job admitted alone onto an empty cluster finishes (a policy that cannot run
  a job must reject it, not hold it forever).

A :class:`~mlsched.core.PolicyError` raised by the engine fails the property for that policy.
Hypothesis is derandomized, so CI sees the same examples every run;
``MLSCHED_PROPERTY_EXAMPLES`` scales the number of examples (default 1.0).
"""

from __future__ import annotations

import os
import re
from dataclasses import replace

import numpy as np
import pytest
from engine_helpers import make_engine
from hypothesis import HealthCheck, example, given, settings
from strategies import RecordedRun, Scenario, run_recorded, scenarios

from mlsched.core import Arch, Cluster, JobSpec, JobState, Pool, ResourceVector, Server
from mlsched.core.utility import Utility
from mlsched.scheduler import Policy, available, create, registered

POLICIES = sorted(registered())
_SCALE = float(os.environ.get("MLSCHED_PROPERTY_EXAMPLES", "1.0"))
_PROPERTY = settings(
    max_examples=max(1, int(100 * _SCALE)),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
_DETERMINISM = settings(_PROPERTY, max_examples=max(1, int(30 * _SCALE)))
_LIVENESS = settings(_PROPERTY, max_examples=max(1, int(40 * _SCALE)))

# Policies with a known liveness bug (see test_a_lone_admitted_job_finishes): strict, so
# the entry must go when the bug is fixed.
_LIVENESS_BUGS: dict[str, str] = {}

#: A lone PS job that fits only as worker on s2 and PS on s1 (found by hypothesis).
_WORKER_HERE_PS_THERE = Scenario(
    cluster=Cluster(
        (
            Server("s0", ResourceVector({"cpu": 2, "bw_gbps": 5})),
            Server("s1", ResourceVector({"cpu": 2, "bw_gbps": 25})),
            Server("s2", ResourceVector({"cpu": 2, "bw_gbps": 40}), pool=Pool.WORKER),
        )
    ),
    jobs=(
        JobSpec(
            "j0",
            worker=ResourceVector({"cpu": 1, "bw_gbps": 6}),
            ps=ResourceVector({"cpu": 1, "bw_gbps": 20}),
        ),
    ),
    horizon=None,
    seed=0,
)
_TOL = 1e-6


# Contract ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", POLICIES)
def test_registered_policy_honours_the_interface(name: str) -> None:
    cls = registered()[name]
    assert issubclass(cls, Policy)
    assert cls.name == name
    assert cls.description.strip(), "a policy needs a one-line description"
    assert "\n" not in cls.description.strip()
    policy = create(name)
    assert isinstance(policy, cls)


@pytest.mark.parametrize("name", POLICIES)
def test_unknown_option_is_a_value_error(name: str) -> None:
    with pytest.raises(ValueError, match=re.escape(repr(name))):
        create(name, no_such_option_xyz=1)


def test_available_lists_every_registered_policy_with_its_description() -> None:
    assert available() == {n: cls.description for n, cls in registered().items()}


@pytest.mark.parametrize("name", POLICIES)
def test_a_released_job_frees_what_it_held(name: str, tiny_cluster: Cluster) -> None:
    """Each job needs the GPU server whole. The first is cancelled while running (the engine
    releases it from the policy; releasing an unknown job, twice, changes nothing); the
    second, submitted then, must run in the next slot. A policy that kept the first job's
    reservations would hold the second back for the first's whole planned run; one that
    kept allocating it would be refused by the engine (it is not active); one that tripped
    on the unknown id would raise. The jobs are of a kind the policy supports (PS jobs,
    else ring-all-reduce jobs)."""
    policy = create(name)
    arch = Arch.PS if Arch.PS in policy.archs else Arch.ALLREDUCE

    def job(job_id: str) -> JobSpec:
        return JobSpec(
            job_id,
            arch=arch,
            chunks=4,
            batches_per_chunk=1_500,  # ~60 slots on its one worker: still running at the cancel
            requested_workers=1,  # for the policies that fix the counts
            requested_ps=1,
            worker=ResourceVector({"gpu": 4, "cpu": 2}),
            ps=ResourceVector({"cpu": 1}),
            compute_s=0.1,
            gradient_mb=1.0,
            utility=Utility.constant(10.0),
        )

    # A batch policy runs an admitted job from a later round (doubling rounds: far later).
    wait = 5_000 if policy.batch_rounds else 1
    engine = make_engine(tiny_cluster, policy, slot_seconds=10.0, horizon=200 + 2 * wait)

    def step_until_running(job_id: str) -> None:
        for _ in range(wait):
            engine.step()
            if engine.records[job_id].state is JobState.RUNNING:
                return

    engine.submit(job("first"))
    step_until_running("first")
    assert engine.records["first"].state is JobState.RUNNING, engine.records["first"].reason
    assert set(engine.placements) == {"first"}
    engine.cancel("first")
    policy.release("never-seen")
    policy.release("never-seen")
    engine.submit(replace(job("second"), arrival_slot=engine.slot))
    step_until_running("second")
    assert engine.records["first"].state is JobState.CANCELLED
    assert engine.records["second"].state is JobState.RUNNING, engine.records["second"].reason
    assert set(engine.placements) == {"second"}


def test_unknown_policy_name_lists_the_known_and_the_module_form() -> None:
    with pytest.raises(
        ValueError, match=r"unknown policy 'no-such-policy'; known: .*fifo.*module:Class"
    ):
        create("no-such-policy")


# Invariants ----------------------------------------------------------------------------
def check_capacity(scenario: Scenario, run: RecordedRun) -> None:
    """Recompute every slot's usage from Placement.usage; compare with the capacity."""
    cluster = scenario.cluster
    specs = {j.job_id: j for j in scenario.jobs}
    for slot, allocation in sorted(run.allocations.items()):
        used = np.zeros_like(cluster.capacity)
        for job_id, placement in allocation.items():
            for server, amount in placement.usage(specs[job_id], cluster).items():
                used[server] += amount
        over = used - cluster.capacity
        if np.any(over > _TOL):
            s, r = np.argwhere(over > _TOL)[0]
            pytest.fail(
                f"slot {slot}: server {cluster.servers[s].name} over-allocated on "
                f"{cluster.resource_names[r]}: {used[s, r]:g} > {cluster.capacity[s, r]:g} "
                f"({ {j: p.describe() for j, p in allocation.items()} })"
            )


def check_only_active_jobs_run(scenario: Scenario, run: RecordedRun) -> None:
    records = run.result.records
    for slot, allocation in sorted(run.allocations.items()):
        for job_id in allocation:
            assert job_id in records, f"slot {slot}: unknown job {job_id} allocated"
            record = records[job_id]
            assert record.state is not JobState.REJECTED, f"slot {slot}: rejected job {job_id} ran"
            assert slot >= record.spec.arrival_slot, (
                f"slot {slot}: job {job_id} ran before its arrival slot {record.spec.arrival_slot}"
            )
            assert record.admitted_slot is not None and slot >= record.admitted_slot, (
                f"slot {slot}: job {job_id} ran before it was admitted"
            )
            if record.completion_slot is not None:
                assert slot <= record.completion_slot, (
                    f"slot {slot}: job {job_id} ran after completing in slot "
                    f"{record.completion_slot}"
                )


def check_completion(scenario: Scenario, run: RecordedRun) -> None:
    """DONE iff the work is done, in the slot where cumulative progress reaches it."""
    for job_id, record in run.result.records.items():
        total = record.spec.total_work
        slots = sorted(t for t, a in run.allocations.items() if job_id in a)
        cumulative = 0.0
        finished_in: int | None = None
        for t in slots:
            progress = run.reports[t].progress[job_id]
            if finished_in is None:
                assert cumulative < total, (
                    f"job {job_id}: slot {t} starts with all work done ({cumulative} of {total})"
                )
            cumulative += progress.units
            if progress.finished:
                finished_in = t
        if record.state is JobState.DONE:
            assert record.progress == total, f"job {job_id}: DONE at {record.progress}/{total}"
            assert cumulative == pytest.approx(total, rel=1e-9), (
                f"job {job_id}: reported units sum to {cumulative}, total work is {total}"
            )
            assert record.completion_slot == finished_in == slots[-1], (
                f"job {job_id}: completion slot {record.completion_slot}, finished report in "
                f"{finished_in}, last slot run {slots[-1]}"
            )
        else:
            assert record.progress < total, (
                f"job {job_id} is {record.state.value} with all its work done"
            )
            assert finished_in is None and record.completion_slot is None
            assert record.progress == pytest.approx(cumulative, rel=1e-9, abs=1e-9)


def check_rejections(scenario: Scenario, run: RecordedRun) -> None:
    for job_id, record in run.result.records.items():
        if record.state is JobState.REJECTED:
            assert record.reject_kind is not None
            assert record.progress == 0 and record.slots_run == 0, (
                f"rejected job {job_id} made progress"
            )


def outcome(run: RecordedRun) -> tuple[object, ...]:
    jobs = {
        j: (r.state, r.completion_slot, r.progress) for j, r in sorted(run.result.records.items())
    }
    allocations = {t: dict(sorted(a.items())) for t, a in sorted(run.allocations.items())}
    return jobs, allocations, run.result.slots


@pytest.mark.parametrize("name", POLICIES)
@_PROPERTY
@given(scenario=scenarios())
def test_policy_keeps_invariants(name: str, scenario: Scenario) -> None:
    run = run_recorded(scenario, name)
    check_capacity(scenario, run)
    check_only_active_jobs_run(scenario, run)
    check_completion(scenario, run)
    check_rejections(scenario, run)


@pytest.mark.parametrize("name", POLICIES)
@_DETERMINISM
@given(scenario=scenarios())
def test_same_seed_same_result(name: str, scenario: Scenario) -> None:
    first = outcome(run_recorded(scenario, name))
    second = outcome(run_recorded(scenario, name))
    assert first == second


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=_LIVENESS_BUGS[n]))
        if n in _LIVENESS_BUGS
        else n
        for n in POLICIES
    ],
)
@_LIVENESS
@example(scenario=_WORKER_HERE_PS_THERE)
@given(scenario=scenarios(max_jobs=1))
def test_a_lone_admitted_job_finishes(name: str, scenario: Scenario) -> None:
    run = run_recorded(replace(scenario, horizon=None), name, max_slots=400, stall_slots=100)
    (record,) = run.result.records.values()
    if record.state is not JobState.REJECTED:
        assert record.state is JobState.DONE, (
            f"{name} admitted {record.job_id} ({record.reason!r}) but it is "
            f"{record.state.value} after {run.result.slots} slots"
            + (" (the engine detected a stall)" if run.result.stalled else "")
        )


@pytest.mark.parametrize("name", POLICIES)
def test_a_lone_job_that_fits_is_admitted_and_finishes(name: str, tiny_cluster: Cluster) -> None:
    """The property above passes for a policy that rejects every lone job; this one does
    not: a small job of a kind the policy supports, worth more than it could cost, on an
    empty cluster that holds it whole, must be admitted and finish."""
    arch = Arch.PS if Arch.PS in create(name).archs else Arch.ALLREDUCE
    job = JobSpec(
        "lone",
        arch=arch,
        chunks=2,
        batches_per_chunk=50,
        requested_workers=1,  # for the policies that fix the counts
        requested_ps=1,
        worker=ResourceVector({"gpu": 1, "cpu": 2}),
        ps=ResourceVector({"cpu": 1}),
        compute_s=0.1,
        gradient_mb=1.0,
        utility=Utility.constant(10.0),
    )
    scenario = Scenario(cluster=tiny_cluster, jobs=(job,), horizon=None, seed=0)
    run = run_recorded(scenario, name, max_slots=20_000, stall_slots=100)
    (record,) = run.result.records.values()
    assert record.admitted_slot is not None, f"{name} rejected it: {record.reason!r}"
    assert record.state is JobState.DONE, (record.state.value, record.reason)
