"""The simulated executor: progress, restart charges, noise and finish offsets.

The expected figures come from a separate :class:`RuntimeEstimator` with no measurements
(the simulator's truth is that model, scaled by :class:`TruthConfig`).
"""

from __future__ import annotations

import pytest

from mlsched.core import (
    Allocation,
    Arch,
    Cluster,
    JobSpec,
    Placement,
    Pool,
    ResourceVector,
    Server,
    SpecError,
    SyncMode,
)
from mlsched.engine.executor import SlotReport
from mlsched.engine.simulator import SimulatedExecutor, TruthConfig
from mlsched.perfmodel.estimator import RuntimeEstimator

SLOT_S = 60.0


@pytest.fixture
def cluster() -> Cluster:
    """Three GPU servers (two racks) that host workers and PSs."""
    return Cluster(
        tuple(
            Server(
                f"s{i}",
                ResourceVector({"gpu": 4, "cpu": 16}),
                pool=Pool.BOTH,
                rack=f"r{i // 2}",
                uplink_gbps=10.0,
            )
            for i in range(3)
        )
    )


def _job(job_id: str = "j", **kw: object) -> JobSpec:
    fields: dict[str, object] = {
        "chunks": 4,
        "batches_per_chunk": 10_000,
        "worker": ResourceVector({"gpu": 1}),
        "ps": ResourceVector({"cpu": 1}),
        "compute_s": 0.2,
        "gradient_mb": 20.0,
        "update_s": 0.01,
    }
    fields.update(kw)
    return JobSpec(job_id, **fields)  # type: ignore[arg-type]


A = Placement(((0, 2),), ((0, 1),))  # co-located
B = Placement(((0, 1), (2, 1)), ((1, 1),))  # spread over both racks

JOBS = [
    pytest.param(_job(), A, id="ps-async-colocated"),
    pytest.param(_job(), B, id="ps-async-spread"),
    pytest.param(_job(sync=SyncMode.SYNC), B, id="ps-sync"),
    pytest.param(
        _job(sync=SyncMode.SYNC, global_batch=256, batch_size=32), B, id="ps-sync-global-batch"
    ),
    pytest.param(_job(arch=Arch.ALLREDUCE), Placement(((0, 2), (1, 2))), id="ring"),
    pytest.param(_job(arch=Arch.ALLREDUCE), Placement(((1, 1),)), id="ring-one-worker"),
]


def _run(
    executor: SimulatedExecutor,
    slot: int,
    job: JobSpec,
    placement: Placement | None,
    remaining: float | None = None,
) -> SlotReport:
    alloc = Allocation(slot, {job.job_id: placement} if placement is not None else {})
    executor.apply(
        slot,
        alloc,
        {job.job_id: job},
        {job.job_id: job.total_work if remaining is None else remaining},
    )
    return executor.collect(slot)


@pytest.mark.parametrize(("job", "placement"), JOBS)
@pytest.mark.parametrize("scale", [1.0, 2.0], ids=["truth=spec", "compute-x2"])
def test_progress_is_throughput_times_slot_time(
    cluster: Cluster, job: JobSpec, placement: Placement, scale: float
) -> None:
    model = RuntimeEstimator(cluster)
    compute, comm = model.iteration_parts(job, placement)
    iter_s = scale * compute + comm
    per_iter = model.units_per_iteration(job, placement)
    sim = SimulatedExecutor(cluster, SLOT_S, truth=TruthConfig(compute_scale=scale))
    report = _run(sim, 0, job, placement)
    progress = report.progress[job.job_id]
    assert progress.units == pytest.approx(per_iter / iter_s * SLOT_S)
    if scale == 1.0:
        assert progress.units == pytest.approx(model.throughput(job, placement) * SLOT_S)
    assert not progress.finished and progress.finish_offset_s is None
    (m,) = report.measurements
    assert m.iteration_time_s == pytest.approx(iter_s)
    assert (m.compute_time_s, m.comm_time_s) == pytest.approx((scale * compute, comm))
    assert m.iterations == pytest.approx(progress.units / per_iter)
    assert m.bytes_sent == pytest.approx(m.iterations * 2 * job.gradient_bytes)
    assert m.placement == placement and m.slot == 0


def test_comm_scale_slows_only_communication(cluster: Cluster) -> None:
    job = _job()
    compute, comm = RuntimeEstimator(cluster).iteration_parts(job, B)
    sim = SimulatedExecutor(cluster, SLOT_S, truth=TruthConfig(comm_scale=3.0))
    (m,) = _run(sim, 0, job, B).measurements
    assert (m.compute_time_s, m.comm_time_s) == pytest.approx((compute, 3 * comm))


RESTART_S = 5.0
C = Placement(((0, 2),), ((1, 1),))  # A's workers, its PS moved

# (placement per slot or None for a pause, expected restart charge per running slot)
RESTART_CASES = [
    pytest.param([A, A, A], [0, 0, 0], id="steady"),
    pytest.param([A, B, B], [0, RESTART_S, 0], id="re-layout"),
    pytest.param([A, C], [0, RESTART_S], id="ps-moved"),
    pytest.param([A, None, A], [0, None, RESTART_S], id="resume-after-pause"),
    pytest.param([None, None, A], [None, None, 0], id="first-start-is-free"),
    pytest.param(
        [A, None, None, B, A], [0, None, None, RESTART_S, RESTART_S], id="pause-then-moves"
    ),
]


@pytest.mark.parametrize(("placements", "restarts"), RESTART_CASES)
def test_restart_cost_is_charged_on_re_layout_and_resume(
    cluster: Cluster, placements: list[Placement | None], restarts: list[float | None]
) -> None:
    job = _job()
    model = RuntimeEstimator(cluster)
    sim = SimulatedExecutor(cluster, SLOT_S, truth=TruthConfig(restart_s=RESTART_S))
    for slot, (placement, restart) in enumerate(zip(placements, restarts, strict=True)):
        report = _run(sim, slot, job, placement)
        if placement is None:
            assert job.job_id not in report.progress
            continue
        progress = report.progress[job.job_id]
        rate = model.throughput(job, placement)
        assert progress.restart_s == restart
        assert progress.units == pytest.approx(rate * (SLOT_S - restart))
        (m,) = report.measurements
        assert m.restart_s == restart


def test_restart_longer_than_a_slot_makes_no_progress(cluster: Cluster) -> None:
    job = _job()
    sim = SimulatedExecutor(cluster, SLOT_S, truth=TruthConfig(restart_s=2 * SLOT_S))
    _run(sim, 0, job, A)
    report = _run(sim, 1, job, B)
    assert report.progress[job.job_id].units == 0.0
    assert report.measurements == []  # nothing ran, nothing measured


def _units(seed: int, noise: float, slots: int = 5) -> list[float]:
    cluster = Cluster((Server("s", ResourceVector({"gpu": 4, "cpu": 16})),))
    job = _job()
    sim = SimulatedExecutor(cluster, SLOT_S, truth=TruthConfig(noise=noise), seed=seed)
    return [_run(sim, t, job, A).progress[job.job_id].units for t in range(slots)]


def test_noise_is_deterministic_per_seed() -> None:
    assert _units(7, 0.2) == _units(7, 0.2)
    assert _units(7, 0.2) != _units(8, 0.2)
    assert len(set(_units(7, 0.2))) == 5  # varies from slot to slot


def test_no_noise_means_nominal_progress_whatever_the_seed() -> None:
    assert _units(1, 0.0) == _units(2, 0.0)
    assert len(set(_units(1, 0.0))) == 1


@pytest.mark.parametrize(
    ("restart", "fraction"),
    [
        pytest.param(0.0, 0.25, id="quarter-slot"),
        pytest.param(0.0, 1.0, id="exactly-one-slot"),
        pytest.param(RESTART_S, 0.5, id="half-after-restart"),
    ],
)
def test_finish_offset_within_the_slot(cluster: Cluster, restart: float, fraction: float) -> None:
    job = _job()
    model = RuntimeEstimator(cluster)
    rate = model.throughput(job, B)
    sim = SimulatedExecutor(cluster, SLOT_S, truth=TruthConfig(restart_s=restart))
    _run(sim, 0, job, A)  # run once so that slot 1's move to B is a restart
    remaining = rate * (SLOT_S - restart) * fraction
    progress = _run(sim, 1, job, B, remaining).progress[job.job_id]
    assert progress.finished and progress.units == remaining
    assert progress.finish_offset_s == pytest.approx(restart + remaining / rate)
    assert progress.restart_s == restart


def test_work_just_beyond_the_slot_does_not_finish(cluster: Cluster) -> None:
    job = _job()
    rate = RuntimeEstimator(cluster).throughput(job, A)
    sim = SimulatedExecutor(cluster, SLOT_S)
    progress = _run(sim, 0, job, A, rate * SLOT_S * 1.001).progress[job.job_id]
    assert not progress.finished and progress.units == pytest.approx(rate * SLOT_S)


def test_measure_false_reports_progress_without_measurements(cluster: Cluster) -> None:
    sim = SimulatedExecutor(cluster, SLOT_S, truth=TruthConfig(measure=False))
    report = _run(sim, 0, _job(), A)
    assert report.progress["j"].units > 0 and report.measurements == []


@pytest.mark.parametrize("slot", [1, 5])
def test_collect_without_apply_is_an_error(cluster: Cluster, slot: int) -> None:
    sim = SimulatedExecutor(cluster, SLOT_S)
    _run(sim, 0, _job(), A)
    with pytest.raises(RuntimeError, match=f"collect\\({slot}\\) without apply"):
        sim.collect(slot)


@pytest.mark.parametrize(
    ("field", "value"),
    [("compute_scale", 0.0), ("comm_scale", -1.0), ("noise", -0.1), ("restart_s", -1.0)],
)
def test_truth_config_refuses_bad_values(field: str, value: float) -> None:
    with pytest.raises(SpecError) as err:
        TruthConfig(**{field: value})  # type: ignore[arg-type]
    assert err.value.field == f"truth.{field}"
