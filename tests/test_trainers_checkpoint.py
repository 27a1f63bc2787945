"""Checkpoints: round trip, atomic replacement, pruning, and unreadable files."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from mlsched.trainers import checkpoint as ckpt
from mlsched.trainers.checkpoint import (
    CheckpointError,
    TrainState,
    latest_step,
    load_latest,
    save,
)


def state(step: int, *, cursor: int | None = None) -> TrainState:
    g = torch.Generator().manual_seed(step)
    return TrainState(
        step=step,
        data_cursor=step if cursor is None else cursor,
        model={
            "net.0.weight": torch.randn(4, 3, generator=g),
            "net.0.bias": torch.randn(4, generator=g),
            "bn.num_batches_tracked": torch.tensor(step),
        },
        momentum={"net.0.weight": torch.randn(4, 3, generator=g)},
        rng={"seed": 7, "torch": torch.get_rng_state()},
        meta={"model": "mlp", "arch": "ps", "num_workers": 2, "num_ps": 1},
    )


def assert_same(a: TrainState, b: TrainState) -> None:
    assert (a.step, a.data_cursor, a.meta) == (b.step, b.data_cursor, b.meta)
    assert a.model.keys() == b.model.keys() and a.momentum.keys() == b.momentum.keys()
    for k in a.model:
        assert torch.equal(a.model[k], b.model[k]), k
    for k in a.momentum:
        assert torch.equal(a.momentum[k], b.momentum[k]), k
    assert a.rng["seed"] == b.rng["seed"]
    assert torch.equal(a.rng["torch"], b.rng["torch"])


def test_empty_directory_has_no_checkpoint(tmp_path: Path) -> None:
    assert latest_step(tmp_path) is None
    assert load_latest(tmp_path) is None
    assert load_latest(tmp_path / "missing") is None


def test_round_trip(tmp_path: Path) -> None:
    original = state(12, cursor=24)
    path = save(tmp_path, original)
    assert path == tmp_path / "step-000000012"
    assert (path / "state.pt").is_file()
    assert latest_step(tmp_path) == 12
    loaded = load_latest(tmp_path)
    assert loaded is not None
    assert_same(loaded, original)


def test_latest_points_at_the_newest_complete_checkpoint(tmp_path: Path) -> None:
    save(tmp_path, state(5))
    save(tmp_path, state(9))
    assert (tmp_path / "latest").read_text() == "step-000000009"
    loaded = load_latest(tmp_path)
    assert loaded is not None and loaded.step == 9
    # Saving the same step again (a rerun stopping there) replaces it.
    save(tmp_path, state(9, cursor=99))
    loaded = load_latest(tmp_path)
    assert loaded is not None and loaded.data_cursor == 99


def test_leftover_temporary_directory_is_ignored(tmp_path: Path) -> None:
    save(tmp_path, state(3))
    # What a writer killed mid-save leaves: a temporary directory with a torn file.
    torn = tmp_path / ".tmp-killed"
    torn.mkdir()
    (torn / "state.pt").write_bytes(b"PK\x03\x04 torn")
    loaded = load_latest(tmp_path)
    assert loaded is not None and loaded.step == 3
    save(tmp_path, state(4), keep=1)  # pruning leaves foreign entries alone
    assert sorted(p.name for p in tmp_path.iterdir()) == [".tmp-killed", "latest", "step-000000004"]
    assert latest_step(tmp_path) == 4


def test_a_failed_write_leaves_the_previous_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    save(tmp_path, state(3))

    def torn_save(obj: object, fh: object) -> None:
        fh.write(b"PK\x03\x04 half a file")  # type: ignore[attr-defined]
        raise OSError("disk full")

    monkeypatch.setattr(ckpt.torch, "save", torn_save)
    with pytest.raises(OSError, match="disk full"):
        save(tmp_path, state(4))
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest", "step-000000003"]
    loaded = load_latest(tmp_path)
    assert loaded is not None
    assert_same(loaded, state(3))


@pytest.mark.parametrize(("keep", "kept"), [(2, [4, 5]), (3, [3, 4, 5]), (1, [5]), (0, [5])])
def test_prune_keeps_the_newest(tmp_path: Path, keep: int, kept: list[int]) -> None:
    for step in range(1, 6):
        save(tmp_path, state(step), keep=keep)
    steps = sorted(int(p.name.removeprefix("step-")) for p in tmp_path.glob("step-*"))
    assert steps == kept
    assert latest_step(tmp_path) == 5


def test_prune_orders_steps_numerically(tmp_path: Path) -> None:
    for step in (9, 10, 100):  # zero-padded names sort like the numbers
        save(tmp_path, state(step), keep=2)
    assert sorted(p.name for p in tmp_path.glob("step-*")) == ["step-000000010", "step-000000100"]


@pytest.mark.parametrize(
    "content",
    [b"garbage, not a checkpoint", b"", b"PK\x03\x04 a torn zip archive"],
    ids=["garbage", "empty", "torn-zip"],
)
def test_corrupt_state_file_raises_checkpoint_error(tmp_path: Path, content: bytes) -> None:
    path = save(tmp_path, state(3))
    (path / "state.pt").write_bytes(content)
    with pytest.raises(CheckpointError, match="step-000000003"):
        load_latest(tmp_path)


def test_truncated_state_file_raises_checkpoint_error(tmp_path: Path) -> None:
    path = save(tmp_path, state(3))
    data = (path / "state.pt").read_bytes()
    (path / "state.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError):
        load_latest(tmp_path)


def test_a_file_that_is_not_a_training_state_raises_checkpoint_error(tmp_path: Path) -> None:
    path = save(tmp_path, state(3))
    torch.save({"weights": torch.zeros(2)}, path / "state.pt")
    with pytest.raises(CheckpointError, match="not a training checkpoint"):
        load_latest(tmp_path)


def test_bad_latest_pointer_raises_checkpoint_error(tmp_path: Path) -> None:
    save(tmp_path, state(3))
    (tmp_path / "latest").write_text("not-a-step")
    with pytest.raises(CheckpointError):
        latest_step(tmp_path)
    (tmp_path / "latest").write_text("step-000000042")  # points at nothing
    with pytest.raises(CheckpointError):
        load_latest(tmp_path)
