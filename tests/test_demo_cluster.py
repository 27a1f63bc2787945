"""A short end-to-end run of ``mlsched demo``: controller, two agent processes, real CPU
training of the demo's ResNet/VGG mix (shortened), per-job table."""

from __future__ import annotations

import copy
import io
from pathlib import Path

import pytest

from mlsched.cli import main
from mlsched.testbed.local import DEMO_JOBS, demo_jobs, demo_report, run_cluster_demo
from mlsched.trainers.allreduce.horovod import horovod_available

pytestmark = pytest.mark.processes


@pytest.mark.slow
def test_demo_trains_the_mix_to_completion(tmp_path: Path) -> None:
    """What a newcomer's ``make demo`` does, shortened: every job of the mix (PS async and
    sync, torchrun, Horovod where installed) trained to done on two agent processes, with
    the job table. Over 20 s (five jobs, 3-s slots); no faster test runs the demo's own
    path (run_cluster_demo, its mix and report) end to end."""
    jobs = copy.deepcopy(demo_jobs())
    for job in jobs:
        job["batches_per_chunk"] = 12  # a few seconds of training each
    out = io.StringIO()
    statuses = run_cluster_demo(
        policy="fifo", slots=20, slot_seconds=3.0, workdir=tmp_path, jobs=jobs, out=out
    )
    assert set(statuses) == {j["job_id"] for j in jobs}
    for job_id, s in statuses.items():
        assert s.state == "done", (job_id, s.state, s.reason, out.getvalue())
        assert s.progress == s.total_work
        assert s.iterations > 0 and s.measured_iteration_s > 0
    table = demo_report(statuses)
    assert "resnet20-ps" in table and "meas s/it" in table
    launches = {j: s.launch for j, s in statuses.items()}
    assert launches["resnet20-ps"] == "ps" and launches["vgg11n-ring"] == "torchrun"
    assert ("resnet20-hvd" in launches) == horovod_available()
    if horovod_available():
        assert launches["resnet20-hvd"] == "horovod"
    rows = {line.split()[0]: line.split()[2] for line in table.splitlines()[2:] if line[:1] != " "}
    assert rows == launches  # the table's launch column
    assert "slot" in out.getvalue()  # live progress lines
    # Logs and checkpoints stay in the work directory.
    assert (tmp_path / "state.db").exists()
    assert (tmp_path / "checkpoints" / "vgg11n-ring" / "latest").exists()


def test_demo_rejects_an_unknown_policy(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--policy", "nope"]) == 2
    assert "nope" in capsys.readouterr().err


@pytest.mark.soak  # about 20 s of real training (make soak, CI); make test keeps the fifo demo
def test_hetero_trains_the_mix_with_its_testbed_settings(tmp_path: Path) -> None:
    """``demo --policy hetero``: the controller gives the policy its testbed settings
    (compacted offsets, alpha 2) and plans with spec 002's runtime model; every job it
    admits trains to its end. The mix's ring, synchronous PS and asynchronous PS jobs (over
    slots 0-2, so more than one round decides), shortened."""
    keep = ("resnet20-sync", "vgg11n-ring", "vgg11n-ps")
    jobs = [copy.deepcopy(j) for j in DEMO_JOBS if j["job_id"] in keep]
    assert len(jobs) == len(keep)
    for job in jobs:
        job["batches_per_chunk"] = 12
    out = io.StringIO()
    statuses = run_cluster_demo(
        policy="hetero", slots=24, slot_seconds=3.0, workdir=tmp_path, jobs=jobs, out=out
    )
    admitted = {j: s for j, s in statuses.items() if s.admitted}
    assert admitted, out.getvalue()
    for job_id, s in admitted.items():
        assert s.state == "done", (job_id, s.state, s.reason, out.getvalue())
        assert s.progress == s.total_work


@pytest.mark.soak  # about 30 s of real training (make soak, CI): make test stays short
def test_gadget_trains_rings_of_the_mix(tmp_path: Path) -> None:
    """``demo --policy gadget``: gadget schedules ring-all-reduce jobs only, so the demo
    offers the mix's PS jobs as all-reduce jobs; every job is admitted, placed as a ring
    each slot (the engine checks the rings) and trains to its end under torchrun. Two jobs
    arriving in slots 0 and 1, shortened."""
    offered = {j["job_id"]: j for j in demo_jobs("gadget")}
    assert all(j["arch"] == "allreduce" and "ps" not in j for j in offered.values())
    jobs = [copy.deepcopy(offered[j]) for j in ("vgg11n-ring", "resnet20-sync")]
    for job in jobs:
        job["batches_per_chunk"] = 12
    out = io.StringIO()
    statuses = run_cluster_demo(
        policy="gadget", slots=20, slot_seconds=3.0, workdir=tmp_path, jobs=jobs, out=out
    )
    for job_id, s in statuses.items():
        assert s.admitted and s.state == "done", (job_id, s.state, s.reason, out.getvalue())
        assert s.progress == s.total_work and s.launch == "torchrun"
