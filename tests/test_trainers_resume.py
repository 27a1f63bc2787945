"""Stop at a step, resume with another layout, and keep counting.

One checkpoint directory goes through three runs (module-scoped):

1. async PS, 2 workers + 1 PS, steps 0..19 (checkpoint 20, data cursor 20: 1 batch a step);
2. sync PS, 1 worker + 2 PSs, steps 20..29 (checkpoint 30, cursor 30: W=1 batch a step);
3. DDP, 2 ranks under torchrun, steps 30..39 (checkpoint 40, cursor 50: W=2 batches a step).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from trainer_helpers import (
    checkpoint,
    checkpoint_checksum,
    loss_at,
    losses_by_step,
    make_config,
    mean,
    of_type,
    read_records,
    steps_of,
)

from mlsched.core.train_config import TrainConfig
from mlsched.trainers.checkpoint import TrainState, latest_step
from mlsched.trainers.launch import launch

pytestmark = pytest.mark.processes  # training processes: one such test at a time


@dataclass
class Stage:
    cfg: TrainConfig
    returncodes: list[int]
    records: list[dict[str, Any]]
    state: TrainState
    latest: int | None


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> list[Stage]:
    root = tmp_path_factory.mktemp("resume")
    layouts: list[dict[str, Any]] = [
        {"arch": "ps", "mode": "async", "num_workers": 2, "num_ps": 1, "stop_step": 20},
        {"arch": "ps", "mode": "sync", "num_workers": 1, "num_ps": 2, "stop_step": 30},
        {"arch": "allreduce", "num_workers": 2, "stop_step": 40},
    ]
    stages = []
    for i, layout in enumerate(layouts):
        cfg = make_config(root, f"run{i}", **layout)
        outcome = launch(cfg)
        stages.append(
            Stage(
                cfg,
                outcome.returncodes,
                read_records(cfg.metrics),
                checkpoint(cfg),
                latest_step(cfg.checkpoint_dir),
            )
        )
    return stages


def test_every_run_exits_0(chain: list[Stage]) -> None:
    for stage in chain:
        assert stage.returncodes == [0] * len(stage.returncodes), stage.cfg.job_id
        assert of_type(stage.records, "error") == []


def test_checkpoints_at_each_stop_step(chain: list[Stage]) -> None:
    assert [s.latest for s in chain] == [20, 30, 40]
    assert [s.state.step for s in chain] == [20, 30, 40]
    # keep=2: the last two checkpoints, no temporary directories left behind
    names = sorted(p.name for p in Path(chain[-1].cfg.checkpoint_dir).iterdir())
    assert names == ["latest", "step-000000030", "step-000000040"]


def test_data_cursor_advances_1_per_async_step_and_w_per_sync_step(chain: list[Stage]) -> None:
    assert [s.state.data_cursor for s in chain] == [20, 20 + 10 * 1, 30 + 10 * 2]


def test_layout_recorded_in_each_checkpoint(chain: list[Stage]) -> None:
    a, b, c = (s.state.meta for s in chain)
    assert (a["mode"], a["num_workers"], a["num_ps"]) == ("async", 2, 1)
    assert (b["mode"], b["num_workers"], b["num_ps"]) == ("sync", 1, 2)
    assert (c["arch"], c["world_size"]) == ("allreduce", 2)


def test_steps_continue_exactly_where_the_checkpoint_stopped(chain: list[Stage]) -> None:
    a, b, c = chain
    assert Counter(steps_of(a.records, "worker")) == Counter(range(20))
    assert steps_of(b.records, "worker", 0) == list(range(20, 30))
    for rank in (0, 1):
        assert steps_of(c.records, "rank", rank) == list(range(30, 40))
    # Every process announced the step it resumed from.
    starts = {
        (i, r["role"], r["rank"]): r["step"]
        for i, s in enumerate(chain)
        for r in of_type(s.records, "event")
        if r["event"] == "start"
    }
    assert starts == {
        (0, "ps", 0): 0,
        (1, "ps", 0): 20,
        (1, "ps", 1): 20,
        (2, "rank", 0): 30,
        (2, "rank", 1): 30,
    }


def test_resumed_runs_continue_the_weights_and_the_data_stream(chain: list[Stage]) -> None:
    """The first loss of a resumed run is the checkpoint's weights on the batch at its cursor."""
    a, b, c = chain
    (first,) = [r for r in of_type(b.records, "iter", "worker", 0) if r["step"] == 20]
    assert first["loss"] == pytest.approx(loss_at(b.cfg, a.state, a.state.data_cursor), rel=1e-5)
    for rank in (0, 1):
        (first,) = [r for r in of_type(c.records, "iter", "rank", rank) if r["step"] == 30]
        expected = loss_at(c.cfg, b.state, b.state.data_cursor + rank)
        assert first["loss"] == pytest.approx(expected, rel=1e-5)
    # ... and those weights had learned something: well below a fresh model's loss.
    fresh = mean(losses_by_step(a.records, "worker")[:5])
    assert mean(losses_by_step(c.records, "rank")[:5]) < 0.6 * fresh


def test_sharded_state_reassembles_into_the_checkpoint(chain: list[Stage]) -> None:
    # Run 2 split the parameters over 2 PSs; its worker holds what PS 0 gathered and saved.
    b, c = chain[1], chain[2]
    (summary,) = of_type(b.records, "summary", "worker")
    assert summary["param_checksum"] == checkpoint_checksum(b.cfg, b.state)
    sums = [s["param_checksum"] for s in of_type(c.records, "summary", "rank")]
    assert sums == [checkpoint_checksum(c.cfg, c.state)] * 2
