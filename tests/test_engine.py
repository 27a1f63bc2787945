"""The engine's slot loop, driven one slot at a time with the real simulator.

Deliberately bad policies below are small :class:`Policy` subclasses that are never
registered; everything else (engine, simulator, runtime estimator, FIFO) is the real thing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np
import pytest
from engine_helpers import make_engine

from mlsched.core import (
    Admission,
    Allocation,
    Arch,
    Cluster,
    JobSpec,
    JobState,
    Placement,
    PolicyError,
    Pool,
    Quote,
    RejectKind,
    ResourceVector,
    Server,
    SpecError,
    SyncMode,
    Topology,
    Utility,
    UtilityKind,
)
from mlsched.engine.simulator import TruthConfig
from mlsched.perfmodel.estimator import RuntimeEstimator
from mlsched.scheduler import ClusterView, Policy, create
from mlsched.scheduler.baselines.fifo import FifoPolicy

SLOT_S = 10.0


def gpu_job(job_id: str, **kw: object) -> JobSpec:
    """A one-worker async PS job on the tiny cluster (GPU worker, PS on the PS server)."""
    fields: dict[str, object] = {
        "chunks": 2,
        "batches_per_chunk": 100,
        "requested_workers": 1,
        "requested_ps": 1,
        "worker": ResourceVector({"gpu": 1, "cpu": 2}),
        "ps": ResourceVector({"cpu": 1}),
        "compute_s": 0.1,
        "gradient_mb": 1.0,
    }
    fields.update(kw)
    return JobSpec(job_id, **fields)  # type: ignore[arg-type]


# Stepping ------------------------------------------------------------------------------
def test_step_runs_one_slot_at_a_time(tiny_cluster: Cluster) -> None:
    job = gpu_job("a", batches_per_chunk=120)  # 240 units
    engine = make_engine(tiny_cluster, create("fifo"))
    engine.submit(job)
    record_of = engine.records.get
    assert engine.slot == 0 and record_of("a") is None  # not arrived before the first step

    outcome = engine.step()
    report = outcome.report
    record = engine.records["a"]
    placement = record.last_placement
    assert placement is not None
    rate = RuntimeEstimator(tiny_cluster).throughput(job, placement) * SLOT_S
    assert report.slot == 0 and engine.slot == 1
    assert record.state is JobState.RUNNING and record.admitted_slot == record.started_slot == 0
    assert record.progress == pytest.approx(rate)
    assert report.progress["a"].units == pytest.approx(rate)
    # The step says what it decided: the admission, then the start.
    assert [(c.job_id, c.old, c.new) for c in outcome.changes] == [
        ("a", JobState.PENDING, JobState.ADMITTED),
        ("a", JobState.ADMITTED, JobState.RUNNING),
    ]
    assert [c.new for c in outcome.decided] == [JobState.ADMITTED]

    slots = 1
    while record.state is not JobState.DONE:
        engine.step()
        slots += 1
    assert slots == -(-job.total_work // rate)  # ceil: the slot where the work is done
    assert record.completion_slot == slots - 1 and record.progress == job.total_work
    offset = (job.total_work - rate * (slots - 1)) / (rate / SLOT_S)
    assert record.completion_time_s == pytest.approx((slots - 1) * SLOT_S + offset)
    assert engine.done()
    assert record.utility() == 1.0  # constant utility, paid on completion


def test_run_with_nothing_submitted_returns_at_once(tiny_cluster: Cluster) -> None:
    result = make_engine(tiny_cluster, create("fifo")).run()
    assert result.slots == 0 and not result.records and not result.stalled


# Bad policies --------------------------------------------------------------------------
class ScriptedPolicy(Policy):
    """Admits (or rejects) by a rule and allocates whatever a script returns."""

    name = "scripted-bad"
    description = "test double: returns a scripted allocation"

    def __init__(
        self,
        allocate: Callable[[int, ClusterView], object],
        admit: Callable[[JobSpec], Admission] | None = None,
    ) -> None:
        super().__init__()
        self._allocate = allocate
        self._admit = admit or (lambda job: Admission.admit())

    def on_arrival(self, job: JobSpec, view: ClusterView) -> Admission:
        return self._admit(job)

    def allocate(self, slot: int, view: ClusterView) -> Allocation:
        return self._allocate(slot, view)  # type: ignore[return-value]


def _fixed(placements: dict[str, Placement]) -> Callable[[int, ClusterView], Allocation]:
    return lambda slot, view: Allocation(slot, placements)


W0 = ((0, 1),)  # one worker on the GPU server
PS1 = ((1, 1),)  # one PS on the PS server

BAD_ALLOCATIONS = [
    pytest.param(
        [gpu_job("a")],
        _fixed({"ghost": Placement(W0, PS1)}),
        "'ghost' which is unknown",
        id="unknown-job",
    ),
    pytest.param(
        [gpu_job("a")],
        lambda slot, view: {"a": Placement(W0, PS1)},
        "expected an Allocation",
        id="not-an-allocation",
    ),
    pytest.param(
        [gpu_job("a", chunks=4, requested_workers=3), gpu_job("b", chunks=4, requested_workers=3)],
        _fixed({"a": Placement(((0, 3),), PS1), "b": Placement(((0, 2),), PS1)}),
        "over-allocated on gpu: uses 5 of 4",
        id="over-allocation-across-jobs",
    ),
    pytest.param(
        [gpu_job("a", worker=ResourceVector({"cpu": 17}))],
        _fixed({"a": Placement(W0, ((1, 1),))}),
        "server gpu0 over-allocated on cpu: uses 17 of 16",
        id="over-allocation-one-job",
    ),
    pytest.param(
        [gpu_job("a")],
        _fixed({"a": Placement(((1, 1),), PS1)}),
        "workers on server 1, which does not host workers",
        id="workers-on-ps-server",
    ),
    pytest.param(
        [gpu_job("a")],
        _fixed({"a": Placement(W0, ((0, 1),))}),
        "PSs on server 0, which does not host PSs",
        id="ps-on-worker-server",
    ),
    pytest.param(
        [gpu_job("a")],
        _fixed({"a": Placement(((7, 1),), PS1)}),
        "workers on server 7",
        id="server-out-of-range",
    ),
    pytest.param(
        [gpu_job("a", gpu_type="K80")],
        _fixed({"a": Placement(W0, PS1)}),
        "needs GPU type K80, server 0 has V100",
        id="wrong-gpu-type",
    ),
    pytest.param(
        [gpu_job("a", chunks=2)],
        _fixed({"a": Placement(((0, 3),), PS1)}),
        "got 3 workers, allowed 1..2",
        id="too-many-workers",
    ),
    pytest.param(
        [gpu_job("a", chunks=2, min_workers=2, requested_workers=2)],
        _fixed({"a": Placement(W0, PS1)}),
        "got 1 workers, allowed 2..2",
        id="too-few-workers",
    ),
    pytest.param(
        [gpu_job("a")],
        _fixed({"a": Placement(W0)}),
        "got no parameter server",
        id="ps-job-without-ps",
    ),
    pytest.param(
        [gpu_job("a", arch=Arch.ALLREDUCE)],
        _fixed({"a": Placement(W0, PS1)}),
        "all-reduce job 'a' got 1 PSs",
        id="allreduce-with-ps",
    ),
]


@pytest.mark.parametrize(("jobs", "allocate", "message"), BAD_ALLOCATIONS)
def test_bad_allocation_is_a_policy_error_naming_the_policy(
    tiny_cluster: Cluster,
    jobs: list[JobSpec],
    allocate: Callable[[int, ClusterView], object],
    message: str,
) -> None:
    engine = make_engine(tiny_cluster, ScriptedPolicy(allocate))
    engine.submit_all(jobs)
    with pytest.raises(PolicyError) as err:
        engine.step()
    assert err.value.policy == "scripted-bad"
    assert str(err.value).startswith("policy 'scripted-bad': ")
    assert message in str(err.value)


def test_allocating_to_a_rejected_job_is_a_policy_error(tiny_cluster: Cluster) -> None:
    policy = ScriptedPolicy(
        _fixed({"a": Placement(W0, PS1)}),
        admit=lambda job: Admission.reject(RejectKind.CAPACITY, "full"),
    )
    engine = make_engine(tiny_cluster, policy)
    engine.submit(gpu_job("a"))
    with pytest.raises(PolicyError, match="'a' which is rejected, not active"):
        engine.step()


def test_allocating_to_a_finished_job_is_a_policy_error(tiny_cluster: Cluster) -> None:
    engine = make_engine(tiny_cluster, ScriptedPolicy(_fixed({"a": Placement(W0, PS1)})))
    engine.submit(gpu_job("a", batches_per_chunk=1))  # done within slot 0
    engine.step()
    assert engine.records["a"].state is JobState.DONE
    with pytest.raises(PolicyError, match="slot 1: allocated to job 'a' which is done"):
        engine.step()


@pytest.mark.parametrize(
    ("admit", "message"),
    [
        pytest.param(
            lambda job: 1 / 0, "on_arrival failed: ZeroDivisionError", id="on-arrival-raises"
        ),
        pytest.param(lambda job: None, "on_arrival() returned", id="on-arrival-returns-none"),
    ],
)
def test_broken_on_arrival_is_a_policy_error(
    tiny_cluster: Cluster, admit: Callable[[JobSpec], Admission], message: str
) -> None:
    engine = make_engine(tiny_cluster, ScriptedPolicy(_fixed({}), admit=admit))
    engine.submit(gpu_job("a"))
    with pytest.raises(PolicyError, match="scripted-bad") as err:
        engine.step()
    assert message in str(err.value)


def test_a_job_that_moves_servers_with_the_same_counts_is_checked_again() -> None:
    """Slot 0 is valid; in slot 1 the small job keeps one worker but moves onto the server
    the big job fills. Counts unchanged is not placement unchanged: the engine must see the
    over-allocation (a shortcut on unchanged counts would let it through)."""
    gpu = ResourceVector({"gpu": 4, "cpu": 8})
    cluster = Cluster(
        (Server("s0", gpu, pool=Pool.WORKER), Server("s1", gpu, pool=Pool.WORKER)), Topology()
    )

    def ring(job_id: str, gpus: int) -> JobSpec:
        return JobSpec(
            job_id,
            arch=Arch.ALLREDUCE,
            chunks=1,
            batches_per_chunk=10_000,
            requested_workers=1,
            worker=ResourceVector({"gpu": gpus, "cpu": 1}),
        )

    def script(slot: int, view: ClusterView) -> Allocation:
        small = ((1, 1),) if slot == 0 else ((0, 1),)
        return Allocation(slot, {"big": Placement(((0, 1),)), "small": Placement(small)})

    engine = make_engine(cluster, ScriptedPolicy(script))
    engine.submit(ring("big", 4))
    engine.submit(ring("small", 1))
    engine.step()
    assert engine.records["small"].state is JobState.RUNNING
    with pytest.raises(PolicyError, match="slot 1: server s0 over-allocated on gpu: uses 5 of 4"):
        engine.step()


def test_a_job_dropped_from_the_allocation_frees_what_it_held() -> None:
    """One 4-GPU server; slot 0 runs job a on all of it, slot 1 preempts a for b. The engine
    must release a's booking when a leaves the allocation (keeping it would refuse b as an
    over-allocation, and leak capacity for the rest of the run)."""
    cluster = Cluster(
        (Server("s0", ResourceVector({"gpu": 4, "cpu": 8}), pool=Pool.WORKER),), Topology()
    )
    jobs = {
        name: JobSpec(
            name,
            arch=Arch.ALLREDUCE,
            chunks=1,
            batches_per_chunk=10_000,
            requested_workers=1,
            worker=ResourceVector({"gpu": 4, "cpu": 2}),
        )
        for name in ("a", "b")
    }

    def script(slot: int, view: ClusterView) -> Allocation:
        return Allocation(slot, {"a" if slot == 0 else "b": Placement(((0, 1),))})

    engine = make_engine(cluster, ScriptedPolicy(script))
    engine.submit_all(jobs.values())
    engine.step()
    engine.step()
    want = jobs["b"].worker.to_array(cluster.resource_names)
    np.testing.assert_array_equal(engine.used[0], want)
    assert set(engine.placements) == {"b"}


def test_on_a_live_cluster_a_job_the_policy_cannot_take_is_rejected_alone(
    tiny_cluster: Cluster,
) -> None:
    class Picky(FifoPolicy):
        def on_arrival(self, job: JobSpec, view: ClusterView) -> Admission:
            if job.job_id.startswith("boom"):
                raise ValueError("cannot plan this one")
            return super().on_arrival(job, view)

    engine = make_engine(tiny_cluster, Picky(), slot_seconds=SLOT_S, reject_on_policy_error=True)
    engine.submit(gpu_job("boom-1"))
    engine.submit(gpu_job("fine"))
    engine.step()
    assert engine.records["boom-1"].state is JobState.REJECTED
    assert "cannot plan this one" in engine.records["boom-1"].reason
    assert engine.records["fine"].state is JobState.RUNNING


# Arrivals ------------------------------------------------------------------------------
class RecordingFifo(FifoPolicy):
    """FIFO that records what it hears (not registered)."""

    def __init__(self) -> None:
        super().__init__()
        self.arrivals: list[tuple[int, str, float | None]] = []
        self.quote_responses: list[tuple[str, bool]] = []
        self.released: list[str] = []
        self.probe: Placement | None = None  # when set: record view.runtime's prediction
        self.predicted: dict[str, float] = {}

    def on_arrival(self, job: JobSpec, view: ClusterView) -> Admission:
        self.arrivals.append((view.slot, job.job_id, job.valuation))
        if self.probe is not None:
            self.predicted[job.job_id] = view.runtime.iteration_time(job, self.probe)
        return super().on_arrival(job, view)

    def on_quote_response(self, job_id: str, accepted: bool, view: ClusterView) -> None:
        self.quote_responses.append((job_id, accepted))

    def release(self, job_id: str) -> None:
        self.released.append(job_id)
        super().release(job_id)


def test_arrivals_come_in_slot_order_then_submission_order(tiny_cluster: Cluster) -> None:
    policy = RecordingFifo()
    engine = make_engine(tiny_cluster, policy)
    for job_id, slot in (("late", 3), ("early", 1), ("early-too", 1), ("first", 0)):
        engine.submit(gpu_job(job_id, arrival_slot=slot, batches_per_chunk=1))
    for _ in range(4):
        engine.step()
    assert [(t, j) for t, j, _ in policy.arrivals] == [
        (0, "first"),
        (1, "early"),
        (1, "early-too"),
        (3, "late"),
    ]
    assert engine.records["late"].admitted_slot == 3


def test_a_job_submitted_after_its_arrival_slot_arrives_now(tiny_cluster: Cluster) -> None:
    policy = RecordingFifo()
    engine = make_engine(tiny_cluster, policy)
    engine.step()
    engine.step()
    engine.submit(gpu_job("past", arrival_slot=0))
    engine.step()
    assert policy.arrivals == [(2, "past", None)]
    assert engine.records["past"].admitted_slot == 2


@pytest.mark.parametrize("when", ["pending", "arrived"])
def test_duplicate_job_ids_are_refused(tiny_cluster: Cluster, when: str) -> None:
    engine = make_engine(tiny_cluster, create("fifo"))
    engine.submit(gpu_job("a", arrival_slot=5))
    if when == "arrived":
        engine.run(until=6)
    with pytest.raises(SpecError, match="'job_id'"):
        engine.submit(gpu_job("a"))


# Quotes --------------------------------------------------------------------------------
class QuotingFifo(RecordingFifo):
    """Quotes a flat price of 10 to every job it admits."""

    def on_arrival(self, job: JobSpec, view: ClusterView) -> Admission:
        admission = super().on_arrival(job, view)
        return Admission.admit(quote=Quote(10.0)) if admission.is_admitted() else admission


@pytest.mark.parametrize(
    ("valuation", "accepted"),
    [
        pytest.param(5.0, False, id="below-price-declines"),
        pytest.param(10.0, True, id="at-price-accepts"),
        pytest.param(50.0, True, id="above-price-accepts"),
        pytest.param(None, True, id="no-valuation-accepts"),
    ],
)
def test_quote_is_answered_by_the_users_private_valuation(
    tiny_cluster: Cluster, valuation: float | None, accepted: bool
) -> None:
    policy = QuotingFifo()
    engine = make_engine(tiny_cluster, policy)
    engine.submit(gpu_job("j", valuation=valuation))
    engine.step()
    record = engine.records["j"]
    assert policy.arrivals == [(0, "j", None)]  # the valuation stays private
    assert policy.quote_responses == [("j", accepted)]
    assert record.quote == Quote(10.0)
    if accepted:
        assert record.state is JobState.RUNNING and record.price_paid == 10.0
        assert policy.released == []
    else:
        assert record.state is JobState.REJECTED
        assert record.reject_kind is RejectKind.DECLINED
        assert record.price_paid == 0.0 and record.slots_run == 0
        assert policy.released == ["j"]
        assert "j" not in engine.view()


# Horizon and stalls --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("utility", "earns"),
    [
        pytest.param(Utility.constant(5.0), False, id="constant"),
        pytest.param(Utility.sigmoid(10.0, 0.1, 5.0), False, id="sigmoid"),
        pytest.param(Utility(UtilityKind.SQRT, {"scale": 1.0}), True, id="sqrt-progress"),
    ],
)
def test_horizon_stops_the_run_and_unfinished_jobs_earn_by_their_utility(
    tiny_cluster: Cluster, utility: Utility, earns: bool
) -> None:
    engine = make_engine(tiny_cluster, create("fifo"), horizon=3)
    engine.submit(gpu_job("long", batches_per_chunk=10_000, utility=utility))
    result = engine.run()
    record = result.records["long"]
    assert result.slots == 3 and not result.stalled
    assert record.state is JobState.RUNNING and 0 < record.progress < record.spec.total_work
    if earns:  # progress utilities pay mu(progress) whether or not the job finished
        assert record.utility() == pytest.approx(record.progress**0.5)
    else:  # duration utilities pay only on completion
        assert record.utility() == 0.0


class IdlePolicy(Policy):
    """Admits every job and never allocates anything."""

    name = "idle"
    description = "test double: admits, never allocates"

    def on_arrival(self, job: JobSpec, view: ClusterView) -> Admission:
        return Admission.admit()

    def allocate(self, slot: int, view: ClusterView) -> Allocation:
        return Allocation(slot)


def test_stall_is_detected_when_nothing_is_allocated(
    tiny_cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    engine = make_engine(tiny_cluster, IdlePolicy(), stall_slots=5)
    engine.submit(gpu_job("waiting", arrival_slot=2))
    with caplog.at_level(logging.WARNING, logger="mlsched.engine.engine"):
        result = engine.run()
    assert result.stalled
    assert result.slots == 3 + 5  # the arrival resets the idle count
    assert result.records["waiting"].state is JobState.ADMITTED
    assert "stalled at slot 8 with 1 active jobs" in caplog.text


def test_a_livelock_stalls_where_a_long_start_up_does_not() -> None:
    """Preemptive LAS whose start-up outlasts the slot moves every job before it ever
    iterates (each slot's newcomer has less attained service): allocated every slot, no
    progress, for ever, which the engine ends as a stall. FIFO with the same start-up
    keeps its jobs placed, pays it once and finishes."""
    import dataclasses

    from mlsched.engine.builder import SimulationConfig, simulate
    from mlsched.testbed.experiment import testbed_workload
    from mlsched.testbed.fidelity.experiment import FIDELITY_SPEC, fidelity_jobs

    workload = testbed_workload(FIDELITY_SPEC, fidelity_jobs("default"), 10.0)
    truth = TruthConfig(startup_s=30.0, restart_s=25.0)  # three slots, then two and a half
    las = simulate(workload, SimulationConfig("tiresias", truth=truth, stall_slots=20),
                   cache=False)  # fmt: skip
    assert las.stalled and las.slots < 60
    assert all(r.progress == 0 for r in las.records.values())
    assert sum(r.restarts for r in las.records.values()) > 8
    one = dataclasses.replace(workload, jobs=workload.jobs[:1])
    fifo = simulate(one, SimulationConfig("fifo", truth=truth, stall_slots=4), cache=False)
    assert not fifo.stalled  # three slots of start-up with nothing else to do: no stall
    assert all(r.state is JobState.DONE for r in fifo.records.values())


def test_a_horizon_runs_to_its_end_instead_of_stalling(tiny_cluster: Cluster) -> None:
    engine = make_engine(tiny_cluster, IdlePolicy(), horizon=12, stall_slots=5)
    engine.submit(gpu_job("waiting"))
    result = engine.run()
    assert result.slots == 12 and not result.stalled


# Model refinement ----------------------------------------------------------------------
KINDS = [
    pytest.param({"arch": Arch.PS, "sync": SyncMode.ASYNC}, id="ps-async"),
    pytest.param({"arch": Arch.PS, "sync": SyncMode.SYNC}, id="ps-sync"),
    pytest.param(
        {"arch": Arch.ALLREDUCE, "requested_workers": 2, "requested_ps": None},
        id="allreduce-2-workers",
    ),
]


@pytest.mark.parametrize("kind", KINDS)
def test_measurements_refit_the_model_the_policy_plans_with(
    tiny_cluster: Cluster, kind: dict[str, object]
) -> None:
    """With a truth twice as slow to compute, the first prediction is off by about -50%;
    after one measured slot the estimate is within 5%, and a fresh job of the same model
    sees the refitted value through the policy's view."""
    policy = RecordingFifo()
    engine = make_engine(tiny_cluster, policy, truth=TruthConfig(compute_scale=2.0))
    spec = {
        "model": "vgg16",
        "compute_s": 0.5,
        "gradient_mb": 0.01,
        "batches_per_chunk": 2_000,
        **kind,
    }
    engine.submit(gpu_job("first", **spec))
    for _ in range(4):
        engine.step()
    placement = engine.records["first"].last_placement
    assert placement is not None
    nominal = RuntimeEstimator(tiny_cluster)
    compute, comm = nominal.iteration_parts(engine.records["first"].spec, placement)
    true_s = 2.0 * compute + comm

    errors = [e for e in engine.model_errors if e.job_id == "first"]
    assert [e.slot for e in errors] == [0, 1, 2, 3]
    assert errors[0].relative == pytest.approx(-0.5, abs=0.01)
    assert errors[0].measured_s == pytest.approx(true_s)
    assert all(abs(e.relative) < 0.01 for e in errors[1:])
    fitted = engine.runtime.iteration_time(engine.records["first"].spec, placement)
    assert fitted == pytest.approx(true_s, rel=0.05)

    fresh = gpu_job("fresh", **{**spec, "arrival_slot": 4})
    engine.submit(fresh)
    policy.probe = placement
    engine.step()
    assert policy.predicted["fresh"] == pytest.approx(true_s, rel=0.05)
    assert nominal.iteration_time(fresh, placement) == pytest.approx(true_s / 2, rel=0.01)


def test_engine_counts_restarts_and_their_cost(tiny_cluster: Cluster) -> None:
    one, two = Placement(W0, PS1), Placement(((0, 2),), PS1)
    script = {0: one, 1: one, 2: two, 4: two}  # move in slot 2, pause in 3, resume in 4

    def allocate(slot: int, view: ClusterView) -> Allocation:
        return Allocation(slot, {"a": script[slot]} if slot in script else {})

    engine = make_engine(tiny_cluster, ScriptedPolicy(allocate), truth=TruthConfig(restart_s=3.0))
    engine.submit(gpu_job("a", batches_per_chunk=100_000))
    states = []
    for _ in range(5):
        engine.step()
        states.append(engine.records["a"].state)
    record = engine.records["a"]
    assert states == [JobState.RUNNING] * 3 + [JobState.PAUSED, JobState.RUNNING]
    assert record.restarts == 1  # the engine counts placement changes, not resumes
    assert record.restart_s == 6.0  # the simulator charges the move and the resume
    assert record.slots_run == 4 and record.worker_slots == 1 + 1 + 2 + 2
