"""DistributedDataParallel for real: 2 ranks under torchrun (gloo on loopback).

One module-scoped job serves every assertion.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from gpu import cuda_skip_reason
from trainer_helpers import (
    assert_iteration_fields,
    assert_loss_decreases,
    checkpoint,
    checkpoint_checksum,
    ddp_ring_bytes,
    losses_by_step,
    make_config,
    of_type,
    read_records,
    steps_of,
)

from mlsched.core.train_config import TrainConfig
from mlsched.trainers.checkpoint import TrainState, latest_step
from mlsched.trainers.launch import JobOutcome, commands, launch

pytestmark = pytest.mark.processes  # training processes: one such test at a time

STOP = 40


@dataclass
class Run:
    cfg: TrainConfig
    outcome: JobOutcome
    records: list[dict[str, Any]]
    state: TrainState


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    root = tmp_path_factory.mktemp("ddp")
    cfg = make_config(root, "ddp", arch="allreduce", num_workers=2, stop_step=STOP)
    outcome = launch(cfg)
    return Run(cfg, outcome, read_records(cfg.metrics), checkpoint(cfg))


def test_launch_uses_torchrun(ddp_run: Run) -> None:
    (cmd,) = commands(ddp_run.cfg)
    assert cmd[1:3] == ["-m", "torch.distributed.run"]
    assert cmd[cmd.index("--nproc-per-node") + 1] == "2"


def test_exits_0_and_checkpoints_at_the_stop_step(ddp_run: Run) -> None:
    assert ddp_run.outcome.returncodes == [0]
    assert of_type(ddp_run.records, "error") == []
    assert latest_step(ddp_run.cfg.checkpoint_dir) == STOP
    assert ddp_run.state.step == STOP
    assert ddp_run.state.data_cursor == 2 * STOP  # W batches per step
    assert ddp_run.state.meta["world_size"] == 2
    summaries = of_type(ddp_run.records, "summary", "rank")
    assert sorted(s["rank"] for s in summaries) == [0, 1]
    assert all(s["final_step"] == STOP and s["stopped_by"] == "stop_step" for s in summaries)
    assert ddp_run.outcome.summary["final_step"] == STOP


def test_every_rank_runs_every_step(ddp_run: Run) -> None:
    for rank in (0, 1):
        assert steps_of(ddp_run.records, "rank", rank) == list(range(STOP))


def test_iteration_lines_have_sane_measurements(ddp_run: Run) -> None:
    ring = ddp_ring_bytes(ddp_run.cfg)
    assert ring == 4 * 13_002  # 2 * bytes * (W - 1) / W with W = 2
    assert_iteration_fields(ddp_run.records, ring, ring)


def test_loss_decreases(ddp_run: Run) -> None:
    for rank in (0, 1):
        assert_loss_decreases(losses_by_step(ddp_run.records, "rank", rank))


def test_ranks_agree_with_each_other_and_the_checkpoint(ddp_run: Run) -> None:
    sums = {s["rank"]: s["param_checksum"] for s in of_type(ddp_run.records, "summary", "rank")}
    assert sums[0] == sums[1]
    assert sums[0] == checkpoint_checksum(ddp_run.cfg, ddp_run.state)


@pytest.mark.skipif(cuda_skip_reason() is not None, reason=str(cuda_skip_reason()))
def test_ddp_trains_on_cuda_over_nccl(tmp_path: Path) -> None:
    """The GPU path: DDP ranks on CUDA devices (NCCL), one rank per GPU, up to 2."""
    world = min(2, torch.cuda.device_count())
    cfg = make_config(
        tmp_path, "cuda", arch="allreduce", num_workers=world, stop_step=STOP, device="cuda"
    )
    outcome = launch(cfg)
    assert outcome.ok, (outcome.returncodes, outcome.summary)
    records = read_records(cfg.metrics)
    assert of_type(records, "error") == []
    assert checkpoint(cfg).step == STOP
    assert_loss_decreases(losses_by_step(records, "rank", 0))
