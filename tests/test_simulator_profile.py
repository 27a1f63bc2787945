"""The simulator's truth from a measured profile, and the start-up and restart it charges.

Plausible bugs this catches: the first slot of a job charged nothing (a job's processes
start before they iterate), a start-up longer than a slot forgotten after one slot, a
restart charged as a start-up or the reverse, a stale start-up carried into a restart, the
cell's compute not scaled by batch and image size, a spread placement given loopback's
communication, the wrong worker count's cell or its communication unscaled, a job without a
cell silently given another model's, and a default that preempts for free.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

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
    SyncMode,
)
from mlsched.engine.executor import SlotReport
from mlsched.engine.simulator import DEFAULT_RESTART_S, SimulatedExecutor, TruthConfig
from mlsched.perfmodel.estimator import RuntimeEstimator
from mlsched.perfmodel.profile import Cell, Profile
from mlsched.perfmodel.profiled import ProfileLookup, profile_kind

SLOT_S = 10.0
COLOCATED = Placement(((0, 2),), ((0, 1),))
SPREAD = Placement(((0, 1), (1, 1)), ((0, 1),))


@pytest.fixture
def cluster() -> Cluster:
    return Cluster(
        tuple(
            Server(
                f"s{i}",
                ResourceVector({"gpu": 4, "cpu": 8}),
                pool=Pool.BOTH,
                gpu_type="cpu",
                rack="r0",
                uplink_gbps=1.0,
            )
            for i in range(2)
        )
    )


def _job(job_id: str = "j", **kw: object) -> JobSpec:
    fields: dict[str, object] = {
        "model": "resnet20",
        "chunks": 2,
        "batches_per_chunk": 100_000,
        "batch_size": 16,
        "worker": ResourceVector({"gpu": 1}),
        "ps": ResourceVector({"cpu": 1}),
        "compute_s": 0.01,  # the spec's guess: the profile says otherwise
        "gradient_mb": 1.1,
        "training": {"image_size": 16},
    }
    fields.update(kw)
    return JobSpec(job_id, **fields)  # type: ignore[arg-type]


def _cell(kind: str, workers: int, compute: float, comm: float, **kw: object) -> Cell:
    return Cell(
        model="resnet20", kind=kind, workers=workers, device_type="cpu",
        iteration_s=compute + comm, compute_s=compute, comm_s=comm, **kw,  # type: ignore[arg-type]
    )  # fmt: skip


PROFILE = Profile(
    machine={"hostname": "m1"},
    device={"type": "cpu"},
    settings={"batch_size": 32, "image_size": 32},
    cells=(
        _cell("ps_async", 1, 0.40, 0.00, startup_s=4.0, restart_s=6.0),
        _cell("ps_async", 2, 0.50, 0.10, startup_s=5.0, restart_s=7.0),
        _cell("ring", 2, 0.60, 0.20, startup_s=9.0, restart_s=12.0),
        _cell("ring", 4, 0.70, 0.30),  # no start-up measured: the truth's default
    ),
)


def _run(sim: SimulatedExecutor, slot: int, job: JobSpec, p: Placement | None) -> SlotReport:
    sim.apply(slot, Allocation(slot, {job.job_id: p} if p else {}), {job.job_id: job},
              {job.job_id: job.total_work})  # fmt: skip
    return sim.collect(slot)


def _iteration(report: SlotReport) -> tuple[float, float]:
    (m,) = report.measurements
    return m.compute_time_s, m.comm_time_s


def test_a_profiled_job_iterates_at_its_cell_scaled_to_its_batch_and_image(
    cluster: Cluster,
) -> None:
    sim = SimulatedExecutor(cluster, SLOT_S, truth=TruthConfig(profile=PROFILE))
    compute, comm = _iteration(_run(sim, 0, _job(), COLOCATED))
    # batch 16 of 32, image 16 of 32: an eighth of the cell's samples and pixels
    assert compute == pytest.approx(0.50 * (16 / 32) * (16 / 32) ** 2)
    assert comm == pytest.approx(0.10)  # on one server: the cell's own


def test_a_spread_placement_adds_the_wire_time_a_one_machine_profile_lacks(
    cluster: Cluster,
) -> None:
    job = _job()
    sim = SimulatedExecutor(cluster, SLOT_S, truth=TruthConfig(profile=PROFILE))
    _, comm = _iteration(_run(sim, 0, job, SPREAD))
    _, wire = RuntimeEstimator(cluster).iteration_parts(job, SPREAD)
    assert wire > 0.005  # 1.1 MB each way over 1 Gbit/s
    assert comm == pytest.approx(0.10 + wire)


def test_the_nearest_worker_count_stands_in_with_its_communication_scaled() -> None:
    lookup = ProfileLookup(PROFILE)
    ring = _job(arch=Arch.ALLREDUCE)
    three = lookup.match(ring, 3, "cpu")
    assert three is not None and three.cell.workers == 4 and not three.exact  # a tie: larger
    assert three.comm_s == pytest.approx(0.30 * (2 / 3) / (3 / 4))
    eight = lookup.match(ring, 8, "cpu")
    assert eight is not None and eight.cell.workers == 4
    assert eight.comm_s == pytest.approx(0.30 * (7 / 8) / (3 / 4))
    ps = lookup.match(_job(), 3, "cpu")
    assert ps is not None and ps.cell.workers == 2
    assert ps.comm_s == pytest.approx(0.10 * 3 / 2)  # three workers share the PS's links
    assert lookup.match(_job(sync=SyncMode.SYNC), 2, "cpu") is None  # no ps_sync cell
    assert lookup.match(_job(model="vgg11-narrow"), 2, "cpu") is None
    assert lookup.match(ring, 2, "h100") is None  # another device's cells only


def test_the_kind_follows_arch_sync_and_backend() -> None:
    assert profile_kind(_job()) == "ps_async"
    assert profile_kind(_job(sync=SyncMode.SYNC)) == "ps_sync"
    assert profile_kind(_job(arch=Arch.ALLREDUCE)) == "ring"
    hvd = _job(arch=Arch.ALLREDUCE, training={"backend": "horovod"})
    assert profile_kind(hvd) == "horovod"


def test_a_job_without_a_cell_runs_at_its_spec(cluster: Cluster) -> None:
    job = _job(sync=SyncMode.SYNC)
    sim = SimulatedExecutor(cluster, SLOT_S, truth=TruthConfig(profile=PROFILE, restart_s=0))
    compute, comm = _iteration(_run(sim, 0, job, COLOCATED))
    assert (compute, comm) == pytest.approx(
        RuntimeEstimator(cluster).iteration_parts(job, COLOCATED)
    )


def _units(report: SlotReport, job: JobSpec) -> float:
    return report.progress[job.job_id].units


def test_start_up_is_charged_before_the_first_iteration_and_carries_over(
    cluster: Cluster,
) -> None:
    job = _job(arch=Arch.ALLREDUCE)
    ring = Placement(((0, 2),))
    sim = SimulatedExecutor(cluster, SLOT_S, truth=TruthConfig(profile=PROFILE, startup_s=25.0))
    first = _run(sim, 0, job, ring)  # the ring cell: 9 s start-up of a 10 s slot
    iter_s = sum(_iteration(first))
    rate = 2 / iter_s  # two workers, a unit each per iteration
    assert _units(first, job) == pytest.approx(rate * (SLOT_S - 9.0))
    assert first.progress[job.job_id].restart_s == 0.0  # a start-up, not a restart
    assert _units(_run(sim, 1, job, ring), job) == pytest.approx(rate * SLOT_S)

    four = Placement(((0, 2), (1, 2)))  # the 4-worker cell has no start-up: the truth's 25 s
    sim = SimulatedExecutor(cluster, SLOT_S, truth=TruthConfig(profile=PROFILE, startup_s=25.0))
    assert [_units(_run(sim, s, job, four), job) for s in range(2)] == [0.0, 0.0]
    third = _run(sim, 2, job, four)
    assert _units(third, job) == pytest.approx(4 / sum(_iteration(third)) * 5.0)


def test_a_re_layout_restarts_at_the_cells_cost_replacing_what_start_up_owed(
    cluster: Cluster,
) -> None:
    job = _job()
    sim = SimulatedExecutor(cluster, SLOT_S, truth=TruthConfig(profile=PROFILE, startup_s=30.0))
    one = Placement(((0, 1),), ((0, 1),))  # the 1-worker cell: start-up 4 s, restart 6 s
    _run(sim, 0, job, one)
    moved = _run(sim, 1, job, COLOCATED)  # the 2-worker cell: restart 7 s
    assert moved.progress[job.job_id].restart_s == 7.0
    assert _units(moved, job) == pytest.approx(2 / sum(_iteration(moved)) * (SLOT_S - 7.0))
    steady = _run(sim, 2, job, COLOCATED)
    assert steady.progress[job.job_id].restart_s == 0.0
    assert _units(steady, job) == pytest.approx(2 / sum(_iteration(steady)) * SLOT_S)
    _run(sim, 3, job, None)  # paused
    resumed = _run(sim, 4, job, COLOCATED)
    assert resumed.progress[job.job_id].restart_s == 7.0


def test_by_default_a_restart_is_not_free(cluster: Cluster) -> None:
    assert TruthConfig().restart_s == DEFAULT_RESTART_S > 0
    job = _job()
    sim = SimulatedExecutor(cluster, 60.0)
    _run(sim, 0, job, COLOCATED)
    assert _run(sim, 1, job, SPREAD).progress[job.job_id].restart_s == DEFAULT_RESTART_S


def test_simulate_takes_a_profile_and_says_what_it_covers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mlsched.cli import main

    path = tmp_path / "profile.json"
    PROFILE.save(path)
    jobs = [
        {"job_id": "a", "model": "resnet20", "arch": "ps", "batches_per_chunk": 400,
         "batch_size": 16, "training": {"image_size": 16}, "compute_s": 0.01},
        {"job_id": "b", "model": "mlp", "arch": "ps", "batches_per_chunk": 400},
    ]  # fmt: skip
    (tmp_path / "jobs.json").write_text(json.dumps({"jobs": jobs}))
    cluster = {"servers": [{"name": "s0", "capacity": {"gpu": 4, "cpu": 8}, "gpu_type": "cpu"}]}
    (tmp_path / "cluster.json").write_text(json.dumps(cluster))
    args = ["simulate", "--workload", str(tmp_path / "jobs.json"), "--cluster",
            str(tmp_path / "cluster.json"), "--policy", "fifo", "--slot-seconds", "10"]  # fmt: skip
    assert main([*args, "--profile", str(path), "--out", str(tmp_path / "with")]) == 0
    out = capsys.readouterr().out
    assert "covers 1 of 2 jobs" in out and "mlp/ps_async" in out
    assert main([*args, "--out", str(tmp_path / "without")]) == 0
    assert "iterations from the job specs" in capsys.readouterr().out
    assert (
        json.loads((tmp_path / "with" / "summary.json").read_text())["truth"]["profile"]["cells"]
        == 4
    )

    def jct(run: str) -> dict[str, float]:
        rows = csv.DictReader((tmp_path / run / "jobs.csv").open())
        return {r["job_id"]: float(r["jct_s"]) for r in rows}

    with_p, without = jct("with"), jct("without")
    # One worker: resnet20's 1-worker cell, 0.40 s at batch 32 and 32 px, is 0.05 s at 16
    # and 16 (5x its spec's 0.01 s), after a 4 s start-up; the mlp job, which the profile
    # lacks, runs as its spec says either way.
    assert with_p["a"] == pytest.approx(4.0 + 400 * 0.40 / 8, rel=0.01)
    assert without["a"] < 5.0 and with_p["b"] == without["b"]


def test_a_profile_file_that_is_not_one_is_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mlsched.cli import main

    bad = tmp_path / "p.json"
    bad.write_text(json.dumps({"schema": "mlsched.profile", "version": 1, "machine": {},
                               "device": {}, "settings": {}, "cells": [{"model": "m"}]}))  # fmt: skip
    assert main(["simulate", "--workload", "demo", "--policy", "fifo", "--profile", str(bad)]) != 0
    assert "cells[0].kind" in capsys.readouterr().err


def test_a_paper_experiment_refuses_a_profile_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mlsched.cli import main

    path = tmp_path / "profile.json"
    PROFILE.save(path)
    assert main(["experiment", "oasis", "--scale", "smoke", "--profile", str(path)]) == 2
    err = capsys.readouterr().err
    assert "--profile" in err and "testbed" in err
    assert not (tmp_path / "results").exists()
