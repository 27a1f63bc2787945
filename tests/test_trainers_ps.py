"""Parameter-server training for real: 1 PS + 2 workers on loopback, async and sync.

One job per mode (module-scoped) serves every assertion: exit codes, the checkpoint at the
stop step, the per-iteration measurements, a falling loss, the step schedule, and (sync)
replicas that agree with each other and with the checkpoint.
"""

from __future__ import annotations

import contextlib
import io
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from trainer_helpers import (
    ENV,
    PYTHON,
    assert_iteration_fields,
    assert_loss_decreases,
    checkpoint,
    checkpoint_checksum,
    losses_by_step,
    make_config,
    of_type,
    ps_message_bytes,
    read_records,
    steps_of,
)

from mlsched.cli import main as mlsched_main
from mlsched.core.train_config import Backend, Role, TrainConfig
from mlsched.trainers.__main__ import build_parser, config_from_args
from mlsched.trainers.checkpoint import TrainState, latest_step
from mlsched.trainers.launch import launch

pytestmark = pytest.mark.processes  # training processes: one such test at a time

STOP = 40


@dataclass
class Run:
    cfg: TrainConfig
    returncodes: list[int]
    records: list[dict[str, Any]]
    state: TrainState
    output: str = ""


@pytest.fixture(scope="module")
def async_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    root = tmp_path_factory.mktemp("ps-async")
    cfg = make_config(
        root, "async", arch="ps", mode="async", num_workers=2, num_ps=1, stop_step=STOP
    )
    outcome = launch(cfg)
    return Run(cfg, outcome.returncodes, read_records(cfg.metrics), checkpoint(cfg))


@pytest.fixture(scope="module")
def sync_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """Through the user-facing CLI: ``mlsched train`` (metrics default to CKPT/metrics.jsonl)."""
    root = tmp_path_factory.mktemp("ps-sync")
    ckpt = root / "ckpt"
    argv = [
        "train", "--model", "mlp", "--arch", "ps", "--mode", "sync", "--workers", "2",
        "--ps", "1", "--stop-step", str(STOP), "--checkpoint-dir", str(ckpt),
        "--batch-size", "16", "--lr", "0.05", "--num-samples", "512", "--image-size", "8",
        "--timeout", "30",
    ]  # fmt: skip
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = mlsched_main(argv)
    cfg = make_config(
        root, "sync", arch="ps", mode="sync", num_workers=2, num_ps=1, stop_step=STOP,
        metrics=str(ckpt / "metrics.jsonl"),
    )  # fmt: skip
    return Run(cfg, [rc], read_records(cfg.metrics), checkpoint(cfg), out.getvalue())


@pytest.fixture(params=["async", "sync"])
def run(request: pytest.FixtureRequest) -> Run:
    return request.getfixturevalue(f"{request.param}_run")


def test_all_processes_exit_0_without_errors(run: Run) -> None:
    assert run.returncodes == [0] * len(run.returncodes)
    assert of_type(run.records, "error") == []
    summaries = of_type(run.records, "summary")
    assert sorted((s["role"], s["rank"]) for s in summaries) == [
        ("ps", 0),
        ("worker", 0),
        ("worker", 1),
    ]
    assert all(s["stopped_by"] == "stop_step" for s in summaries)


def test_checkpoint_at_exactly_the_stop_step(run: Run) -> None:
    assert latest_step(run.cfg.checkpoint_dir) == STOP
    assert run.state.step == STOP
    # One mini-batch per async step (a ticket); W per sync step.
    assert run.state.data_cursor == (STOP if run.cfg.mode == "async" else STOP * 2)
    assert run.state.meta["num_workers"] == 2 and run.state.meta["num_ps"] == 1
    assert set(run.state.momentum) == set(run.state.model)  # every parameter has momentum
    ps_events = of_type(run.records, "event", "ps", 0)
    assert {"event": "checkpoint", "step": STOP}.items() <= ps_events[-1].items()


def test_iteration_lines_have_sane_measurements(run: Run) -> None:
    size = ps_message_bytes(run.cfg)
    assert size == 4 * (5 + 13_002)  # 8x8x3 -> 64 -> 10 MLP, one 5-float header
    assert_iteration_fields(run.records, size, size)
    for s in of_type(run.records, "summary", "worker"):
        assert s["bytes_sent"] == s["steps"] * size
        assert s["compute_time_mean"] > 0 and s["comm_time_mean"] > 0


def test_loss_decreases(run: Run) -> None:
    # Losses in step order (sync: both workers' at each step): each is one batch's loss
    # under the parameters of that step.
    assert_loss_decreases(losses_by_step(run.records, "worker"))
    if run.cfg.mode == "sync":
        for w in (0, 1):
            assert_loss_decreases(losses_by_step(run.records, "worker", w))


def test_async_each_step_computed_exactly_once(async_run: Run) -> None:
    steps = steps_of(async_run.records, "worker")
    assert Counter(steps) == Counter(range(STOP))
    # Every worker got an initial ticket, so both computed something.
    assert all(steps_of(async_run.records, "worker", w) for w in (0, 1))
    # PS updates: one per ticket, numbered 1..STOP.
    updates = [r["step"] for r in of_type(async_run.records, "ps_update", "ps", 0)]
    assert updates == list(range(1, STOP + 1))


def test_sync_every_worker_has_every_step(sync_run: Run) -> None:
    for w in (0, 1):
        assert steps_of(sync_run.records, "worker", w) == list(range(STOP))


def test_sync_replicas_agree_with_each_other_and_the_checkpoint(sync_run: Run) -> None:
    sums = {s["rank"]: s["param_checksum"] for s in of_type(sync_run.records, "summary", "worker")}
    assert sums[0] == sums[1]
    assert sums[0] == checkpoint_checksum(sync_run.cfg, sync_run.state)


def test_cli_train_prints_a_summary(sync_run: Run) -> None:
    assert sync_run.returncodes == [0]
    text = sync_run.output
    assert "mlp ps: 2 workers + 1 PS (sync)" in text
    assert f"steps 0..{STOP - 1} (final step {STOP}), {2 * STOP} iterations measured" in text
    assert "loss " in text and "checkpoint: " in text
    # The real metrics path, not a placeholder.
    assert f"metrics: {sync_run.cfg.metrics}" in text


# Arguments --------------------------------------------------------------------------------
def test_bad_rank_exits_2_naming_the_field(tmp_path: Path) -> None:
    cmd = [
        PYTHON, "-m", "mlsched.trainers", "--model", "mlp", "--arch", "ps", "--role", "worker",
        "--rank", "5", "--num-workers", "2", "--num-ps", "1", "--checkpoint-dir", str(tmp_path),
    ]  # fmt: skip
    proc = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "rank" in proc.stderr and "5" in proc.stderr
    assert not list(tmp_path.iterdir())  # nothing started


def test_omitted_enum_flags_take_their_defaults(tmp_path: Path) -> None:
    """Regression: argparse used to turn the Role/Backend defaults into 'Role.WORKER'."""
    args = build_parser().parse_args(["--model", "mlp", "--checkpoint-dir", str(tmp_path)])
    cfg = config_from_args(args)
    assert cfg.role is Role.WORKER and cfg.backend is Backend.DDP
