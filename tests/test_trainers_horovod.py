"""The Horovod backend end to end: real ``horovodrun`` jobs of two CPU ranks (Gloo).

Horovod is optional (``make horovod`` builds it): without ``horovod.torch`` every test here
is skipped. With it: a 2-rank job exits 0, its loss decreases, it checkpoints at the stop
step, a SIGTERM stops it early with a checkpoint, and its checkpoint resumes under DDP (and
a DDP checkpoint under Horovod) with continuous step numbers and identical parameters.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from trainer_helpers import wait_for_iterations

from mlsched.core.train_config import Backend, TrainConfig
from mlsched.trainers.allreduce.horovod import horovod_available
from mlsched.trainers.checkpoint import latest_step, load_latest
from mlsched.trainers.launch import JobOutcome, launch

pytestmark = [
    pytest.mark.processes,
    pytest.mark.skipif(not horovod_available(), reason="Horovod not installed: run make horovod"),
]

ROOT = Path(__file__).resolve().parent.parent


def _cfg(ckpt: Path, backend: str, stop_step: int) -> TrainConfig:
    return TrainConfig(
        model="mlp",
        arch="allreduce",
        backend=Backend(backend),
        num_workers=2,
        num_ps=0,
        rendezvous="127.0.0.1:0",
        stop_step=stop_step,
        checkpoint_dir=str(ckpt),
        batch_size=16,
        image_size=8,
        num_samples=512,
        timeout_s=60.0,
        job_id="hvd-test",
    )


def _records(ckpt: Path, kind: str) -> list[dict[str, Any]]:
    lines = (ckpt / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, filter(None, lines)) if r.get("type") == kind]


def _checksums(ckpt: Path, final_step: int) -> list[list[float]]:
    return [
        s["param_checksum"]
        for s in _records(ckpt, "summary")
        if s.get("final_step") == final_step and "param_checksum" in s
    ]


def _run(cfg: TrainConfig) -> JobOutcome:
    outcome = launch(cfg)
    assert outcome.ok, (outcome.returncodes, outcome.summary)
    assert not outcome.summary.get("errors"), outcome.summary
    return outcome


@pytest.fixture(scope="module")
def horovod_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, JobOutcome]:
    """One 2-rank Horovod job from scratch to step 30 (shared: each job takes seconds)."""
    ckpt = tmp_path_factory.mktemp("hvd") / "ckpt"
    return ckpt, _run(_cfg(ckpt, "horovod", 30))


def test_horovod_job_trains_and_checkpoints(horovod_run: tuple[Path, JobOutcome]) -> None:
    ckpt, outcome = horovod_run
    assert outcome.returncodes == [0]  # horovodrun's own status: every rank exited 0
    s = outcome.summary
    assert s["final_step"] == 30
    assert (s["first_step"], s["last_step"]) == (0, 29)
    assert s["iterations"] == 2 * 30  # both ranks measured every step
    iters = _records(ckpt, "iter")
    for r in iters:
        assert r["compute_time"] > 0 and r["comm_time"] > 0 and r["bytes_sent"] > 0
    by_step: dict[int, list[float]] = {}
    for r in iters:
        by_step.setdefault(int(r["step"]), []).append(float(r["loss"]))
    assert sorted(by_step) == list(range(30))
    first = sum(sum(by_step[i]) for i in range(5)) / 10
    last = sum(sum(by_step[i]) for i in range(25, 30)) / 10
    assert last < 0.7 * first, (first, last)
    # Checkpoint at the stop step, written once (rank 0) with the Horovod layout.
    assert latest_step(ckpt) == 30
    state = load_latest(ckpt)
    assert state is not None
    assert state.step == 30 and state.data_cursor == 30 * 2
    assert state.meta["backend"] == "horovod" and state.meta["world_size"] == 2
    assert state.momentum, "SGD momentum is checkpointed"
    assert len(_records(ckpt, "event")) >= 3  # two starts and one checkpoint
    assert [e["step"] for e in _records(ckpt, "event") if e["event"] == "checkpoint"] == [30]
    # The replicas stayed identical (the all-reduce averaged every gradient).
    sums = _checksums(ckpt, 30)
    assert len(sums) == 2 and sums[0] == sums[1]


def test_horovod_metrics_carry_each_ranks_own_rank(horovod_run: tuple[Path, JobOutcome]) -> None:
    ckpt, _ = horovod_run
    assert {r["rank"] for r in _records(ckpt, "iter")} == {0, 1}


@pytest.fixture(scope="module")
def horovod_then_ddp(
    horovod_run: tuple[Path, JobOutcome], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, JobOutcome]:
    """The Horovod checkpoint at 30, resumed under DDP to step 40."""
    src, _ = horovod_run
    ckpt = tmp_path_factory.mktemp("hvd2ddp") / "ckpt"
    shutil.copytree(src, ckpt)
    return ckpt, _run(_cfg(ckpt, "ddp", 40))


def test_horovod_checkpoint_resumes_under_ddp(horovod_then_ddp: tuple[Path, JobOutcome]) -> None:
    ckpt, outcome = horovod_then_ddp
    s = outcome.summary
    assert (s["first_step"], s["last_step"], s["final_step"]) == (30, 39, 40)
    assert s["iterations"] == 2 * 10
    steps = sorted({int(r["step"]) for r in _records(ckpt, "iter")})
    assert steps == list(range(40))  # 0..29 under Horovod, 30..39 under DDP: no gap, no repeat
    starts = [e for e in _records(ckpt, "event") if e["event"] == "start"]
    assert sorted(e["step"] for e in starts) == [0, 0, 30, 30]
    state = load_latest(ckpt)
    assert state is not None and state.step == 40 and state.data_cursor == 40 * 2
    assert state.meta["backend"] == "ddp"
    # Resumed from where Horovod stopped: the loss carries on from its low value.
    hvd_last = [r["loss"] for r in _records(ckpt, "iter") if r["step"] == 29]
    ddp_first = [r["loss"] for r in _records(ckpt, "iter") if r["step"] == 30]
    assert max(ddp_first) < 1.5 * max(hvd_last) and max(ddp_first) < 1.5
    sums = _checksums(ckpt, 40)
    assert len(sums) == 2 and sums[0] == sums[1]


@pytest.mark.soak  # make soak (CI); make test keeps the Horovod-to-DDP resume above
def test_ddp_checkpoint_resumes_under_horovod(
    tmp_path: Path, horovod_then_ddp: tuple[Path, JobOutcome]
) -> None:
    ckpt = tmp_path / "ckpt"
    _run(_cfg(ckpt, "ddp", 30))
    outcome = _run(_cfg(ckpt, "horovod", 40))
    s = outcome.summary
    assert (s["first_step"], s["last_step"], s["final_step"]) == (30, 39, 40)
    assert sorted({int(r["step"]) for r in _records(ckpt, "iter")}) == list(range(40))
    state = load_latest(ckpt)
    assert state is not None and state.step == 40 and state.meta["backend"] == "horovod"
    # Same data stream, same averaging: DDP->Horovod ends where Horovod->DDP ended.
    other, _ = horovod_then_ddp
    a, b = _checksums(ckpt, 40), _checksums(other, 40)
    assert len(a) == 2 and len(b) == 2
    assert a[0] == pytest.approx(b[0], rel=1e-5)


@pytest.mark.soak  # make soak (CI); make test keeps the DDP SIGTERM (test_trainers_faults.py)
def test_sigterm_stops_horovod_job_with_checkpoint(tmp_path: Path) -> None:
    """``mlsched train --backend horovod`` forwards SIGTERM: every rank stops at one step,
    rank 0 checkpoints it, the launcher exits 0."""
    ckpt = tmp_path / "ckpt"
    cmd = [
        sys.executable,
        "-c",
        "import sys; from mlsched.cli import main; sys.exit(main())",
        "train",
        "--model",
        "mlp",
        "--arch",
        "allreduce",
        "--backend",
        "horovod",
        "--workers",
        "2",
        "--stop-step",
        "1000000",
        "--checkpoint-dir",
        str(ckpt),
        "--image-size",
        "8",
        "--num-samples",
        "512",
        "--batch-size",
        "16",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        # Both ranks are training (a few steps each) when the signal comes.
        wait_for_iterations(ckpt / "metrics.jsonl", 6, procs=[proc], deadline_s=120)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, out
    step = latest_step(ckpt)
    assert step is not None and 0 < step < 1_000_000
    summaries = [s for s in _records(ckpt, "summary")]
    assert len(summaries) == 2
    assert {s["final_step"] for s in summaries} == {step}
    assert all(s["stopped_by"].startswith("signal") or "peer" in s["stopped_by"] for s in summaries)
    # ... and the job resumes from there.
    outcome = _run(replace(_cfg(ckpt, "horovod", step + 3), metrics=str(ckpt / "resume.jsonl")))
    assert (outcome.summary["first_step"], outcome.summary["final_step"]) == (step, step + 3)
