"""Trainer datasets: the stateless batch stream, learnability, and the local-file loaders."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from mlsched.core.errors import SpecError
from mlsched.trainers.data import (
    Cifar10,
    ImageFolder,
    SyntheticImages,
    make_dataset,
    mix_seed,
    partition_index,
)
from mlsched.trainers.data.cifar import RECORD_BYTES, TRAIN_FILES
from mlsched.trainers.models import build_model

torch.set_num_threads(1)


def small(seed: int = 0, n: int = 50, size: int = 8) -> SyntheticImages:
    return SyntheticImages(n, num_classes=5, image_size=size, channels=3, seed=seed)


# --- the batch stream -------------------------------------------------------------------


def test_same_seed_and_index_give_identical_batches() -> None:
    a, b = small(seed=7), small(seed=7)
    for index in (0, 3, 11, 1000):
        xa, ya = a.batch(index, 16)
        xb, yb = b.batch(index, 16)
        assert torch.equal(xa, xb) and torch.equal(ya, yb)
    # Order of requests does not matter (no hidden state): ask backwards on a fresh one.
    c = small(seed=7)
    later = c.batch(1000, 16)
    assert torch.equal(c.batch(0, 16)[0], a.batch(0, 16)[0])
    assert torch.equal(later[0], a.batch(1000, 16)[0])
    other = small(seed=8)
    assert not torch.equal(other.batch(0, 16)[0], a.batch(0, 16)[0])


def test_shapes_and_dtypes() -> None:
    ds = SyntheticImages(20, num_classes=4, image_size=12, channels=1, seed=0)
    x, y = ds.batch(2, 6)
    assert x.shape == (6, 1, 12, 12) and x.dtype == torch.float32
    assert y.shape == (6,) and y.dtype == torch.int64
    assert int(y.min()) >= 0 and int(y.max()) < 4
    assert ds.image_shape == (1, 12, 12) and ds.num_classes == 4 and ds.num_samples == 20


def test_each_epoch_is_a_permutation_and_orders_differ() -> None:
    ds = small(n=40)
    epochs = [ds.stream_indices(e * 40, 40) for e in range(3)]
    for order in epochs:
        assert sorted(order.tolist()) == list(range(40))
    assert not torch.equal(epochs[0], epochs[1])
    assert not torch.equal(epochs[1], epochs[2])
    # Batches tile the stream: 40 samples, batch 8 -> 5 batches per epoch.
    labels = torch.cat([ds.batch(i, 8)[1] for i in range(5, 10)])
    assert torch.equal(labels, ds.samples(epochs[1])[1])
    assert ds.epoch_of(5, 8) == 1 and ds.epoch_of(4, 8) == 0


def test_permutation_depends_only_on_seed_and_epoch() -> None:
    a, b = small(seed=3, n=40), small(seed=3, n=40)
    b.permutation(9)  # touch other epochs first: no effect
    assert torch.equal(a.permutation(2), b.permutation(2))
    assert not torch.equal(a.permutation(2), small(seed=4, n=40).permutation(2))


def test_batch_straddling_an_epoch_end_continues_the_stream() -> None:
    ds = small(n=10)
    idx = ds.stream_indices(6, 8)  # batch 2 of size 3 would be [6, 9), this spans 2 epochs
    assert torch.equal(idx[:4], ds.permutation(0)[6:])
    assert torch.equal(idx[4:], ds.permutation(1)[:4])
    stream = torch.cat([ds.batch(i, 3)[1] for i in range(10)])  # 30 samples = 3 epochs
    assert torch.equal(stream, ds.samples(torch.cat([ds.permutation(e) for e in range(3)]))[1])


def test_sync_partition_covers_the_stream_and_survives_a_resize() -> None:
    ds = small(n=60)
    assert partition_index(step=2, rank=1, world=3) == 7
    # 3 workers for 4 steps consume exactly global batches 0..11, each once.
    taken = sorted(ds.partition(r, 3).index(s) for s in range(4) for r in range(3))
    assert taken == list(range(12))
    # Restart with 2 workers: the cursor (12 batches consumed) becomes the new start.
    resumed = [ds.partition(r, 2, start=12).index(s) for s in range(3) for r in range(2)]
    assert sorted(resumed) == list(range(12, 18))
    x, _ = ds.partition(1, 2, start=12).batch(0, 4)
    assert torch.equal(x, ds.batch(13, 4)[0])
    with pytest.raises(ValueError, match="rank"):
        partition_index(0, 3, 3)


def test_bad_stream_arguments() -> None:
    ds = small()
    with pytest.raises(ValueError, match="batch_size"):
        ds.batch(0, 0)
    with pytest.raises(ValueError, match="index"):
        ds.batch(-1, 4)
    with pytest.raises(IndexError):
        ds.samples(torch.tensor([50]))


def test_mix_seed_spreads_neighbours() -> None:
    seeds = {mix_seed(0, e) for e in range(1000)}
    assert len(seeds) == 1000 and all(0 <= s < 2**63 for s in seeds)
    assert mix_seed(1, 2) != mix_seed(2, 1)


def test_synthetic_statistics_and_held_out_split() -> None:
    ds = SyntheticImages(200, num_classes=4, image_size=16, seed=1)
    x, y = ds.batch(0, 200)
    assert abs(float(x.std()) - 1.0) < 0.1  # unit-variance pixels
    assert set(y.tolist()) == {0, 1, 2, 3}
    assert ds.label(int(ds.permutation(0)[0])) == int(y[0])
    test = make_dataset(
        "synthetic", seed=1, num_samples=200, image_size=16, num_classes=4, train=False
    )
    assert isinstance(test, SyntheticImages)
    assert torch.equal(test.prototypes, ds.prototypes)
    assert not torch.equal(test.samples(torch.arange(5))[0], ds.samples(torch.arange(5))[0])


# --- learnability -----------------------------------------------------------------------


def _train(name: str, steps: int, lr: float) -> tuple[float, float, float]:
    """Held-out loss before and after ``steps`` SGD steps, and the last training losses."""
    torch.manual_seed(0)
    ds = SyntheticImages(5000, num_classes=10, image_size=32, seed=1)
    held_x, held_y = SyntheticImages(256, 10, 32, seed=1, first_index=5000).batch(0, 256)
    model = build_model(name)

    def held_out_loss() -> float:
        model.eval()
        with torch.no_grad():
            loss = F.cross_entropy(model(held_x), held_y).item()
        model.train()
        return loss

    before = held_out_loss()
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    losses = []
    for step in range(steps):
        x, y = ds.batch(step, 32)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return before, held_out_loss(), sum(losses[-10:]) / 10


def test_synthetic_labels_are_learnable_by_an_mlp() -> None:
    before, after, train_tail = _train("mlp", 300, lr=0.05)
    assert before > 1.5  # ~ln(10) at the start
    assert after <= 0.5 * before and train_tail <= 0.5 * before


def test_synthetic_labels_are_learnable_by_a_cnn() -> None:
    before, after, train_tail = _train("vgg11-narrow", 200, lr=0.05)
    assert after <= 0.5 * before and train_tail <= 0.5 * before


# --- CIFAR-10 binary files -------------------------------------------------------------


def write_cifar(root: Path, records_per_file: int = 3) -> list[tuple[int, np.ndarray]]:
    """Write data_batch_1..5.bin and test_batch.bin; returns the training records in order."""
    rng = np.random.default_rng(0)
    root.mkdir(parents=True, exist_ok=True)
    train: list[tuple[int, np.ndarray]] = []
    for name in (*TRAIN_FILES, "test_batch.bin"):
        blob = bytearray()
        for _ in range(records_per_file):
            label = int(rng.integers(10))
            pixels = rng.integers(0, 256, size=3072, dtype=np.uint8)
            blob += bytes([label]) + pixels.tobytes()
            if name != "test_batch.bin":
                train.append((label, pixels))
        (root / name).write_bytes(bytes(blob))
    return train


def test_cifar_binary_loader(tmp_path: Path) -> None:
    records = write_cifar(tmp_path / "cifar-10-batches-bin")
    ds = Cifar10(tmp_path, seed=0)  # the parent of cifar-10-batches-bin also works
    assert ds.num_samples == 15 and ds.num_classes == 10 and ds.image_shape == (3, 32, 32)
    x, y = ds.samples(torch.tensor([4, 0]))
    assert y.tolist() == [records[4][0], records[0][0]]
    pixels = torch.from_numpy(records[4][1].astype(np.float32)).view(3, 32, 32) / 255
    mean = torch.tensor([0.4914, 0.4822, 0.4465]).view(3, 1, 1)
    std = torch.tensor([0.2470, 0.2435, 0.2616]).view(3, 1, 1)
    assert torch.allclose(x[0], (pixels - mean) / std, atol=1e-5)
    # The stream, subsetting, resizing and the test split.
    assert sorted(torch.cat([ds.batch(i, 5)[1] for i in range(3)]).tolist()) == sorted(
        r[0] for r in records
    )
    assert Cifar10(tmp_path, num_samples=4).num_samples == 4
    assert Cifar10(tmp_path, image_size=16).batch(0, 2)[0].shape == (2, 3, 16, 16)
    assert Cifar10(tmp_path, train=False).num_samples == 3
    made = make_dataset(
        "cifar10", seed=0, num_samples=50_000, image_size=32, num_classes=10, path=str(tmp_path)
    )
    assert made.num_samples == 15


def test_cifar_missing_and_corrupt_files_name_the_path(tmp_path: Path) -> None:
    write_cifar(tmp_path)
    (tmp_path / "data_batch_3.bin").unlink()
    with pytest.raises(SpecError, match=r"missing .*data_batch_3\.bin") as err:
        Cifar10(tmp_path)
    assert err.value.field == "path"
    (tmp_path / "data_batch_3.bin").write_bytes(b"\x00" * (RECORD_BYTES + 7))
    with pytest.raises(SpecError, match=r"data_batch_3\.bin is corrupt"):
        Cifar10(tmp_path)
    (tmp_path / "data_batch_3.bin").write_bytes(b"\x0c" + b"\x00" * (RECORD_BYTES - 1))
    with pytest.raises(SpecError, match="label 12"):
        Cifar10(tmp_path)
    with pytest.raises(SpecError, match="not a directory"):
        Cifar10(tmp_path / "nope")


# --- image folders ---------------------------------------------------------------------


def write_folder(root: Path) -> None:
    from PIL import Image

    colours = {"cat": (255, 0, 0), "dog": (0, 255, 0), "emu": (0, 0, 255)}
    for name, colour in colours.items():
        (root / name).mkdir(parents=True)
        for i in range(2 if name == "emu" else 3):
            Image.new("RGB", (10 + i, 7), colour).save(root / name / f"{i}.png")
    (root / "cat" / "notes.txt").write_text("not an image")


def test_image_folder_loader(tmp_path: Path) -> None:
    write_folder(tmp_path)
    ds = ImageFolder(tmp_path, image_size=6, seed=0)
    assert ds.classes == ["cat", "dog", "emu"]
    assert ds.num_samples == 8 and ds.num_classes == 3 and ds.image_shape == (3, 6, 6)
    x, y = ds.samples(torch.arange(ds.num_samples))
    assert x.shape == (8, 3, 6, 6)
    # Solid colours: the label's channel is the brightest one everywhere.
    assert torch.equal(x.mean(dim=(2, 3)).argmax(dim=1), y)
    assert sorted(torch.cat([ds.batch(i, 4)[1] for i in range(2)]).tolist()) == sorted(y.tolist())
    lazy = ImageFolder(tmp_path, image_size=6, preload=False)
    assert torch.equal(lazy.batch(1, 3)[0], ds.batch(1, 3)[0])
    subset = ImageFolder(tmp_path, image_size=6, num_samples=3)
    assert subset.labels.tolist() == [0, 1, 2]  # round-robin keeps classes balanced


def test_image_folder_errors(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="no class sub-directories"):
        ImageFolder(tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(SpecError, match="has no image files"):
        ImageFolder(tmp_path)
    (tmp_path / "empty" / "bad.png").write_bytes(b"not a png")
    with pytest.raises(SpecError, match=r"cannot decode .*bad\.png"):
        ImageFolder(tmp_path)


# --- factory ---------------------------------------------------------------------------


def test_make_dataset_validates_fields(tmp_path: Path) -> None:
    ds = make_dataset("synthetic", seed=1, num_samples=30, image_size=8, num_classes=3)
    assert (ds.num_samples, ds.num_classes, ds.image_shape) == (30, 3, (3, 8, 8))
    cases: list[tuple[dict[str, Any], str]] = [
        (dict(kind="imagenet"), "dataset"),
        (dict(num_samples=0), "num_samples"),
        (dict(image_size=-1), "image_size"),
        (dict(path="/x"), "data_path"),
        (dict(kind="cifar10"), "data_path"),
        (dict(kind="cifar10", path=str(tmp_path)), "path"),
        (dict(kind="folder", path=str(tmp_path / "none")), "path"),
    ]
    for overrides, field in cases:
        args: dict[str, Any] = dict(
            kind="synthetic", seed=0, num_samples=10, image_size=8, num_classes=10
        )
        args.update(overrides)
        with pytest.raises(ValueError, match=f"field '{field}'"):
            make_dataset(**args)
    write_cifar(tmp_path / "c")
    with pytest.raises(ValueError, match="field 'num_classes'"):
        make_dataset(
            "cifar10", seed=0, num_samples=5, image_size=32, num_classes=5, path=str(tmp_path / "c")
        )
    write_folder(tmp_path / "f")
    with pytest.raises(ValueError, match=r"field 'num_classes'.*expected 3"):
        make_dataset(
            "folder", seed=0, num_samples=5, image_size=8, num_classes=10, path=str(tmp_path / "f")
        )
    made = make_dataset(
        "folder", seed=0, num_samples=100, image_size=8, num_classes=3, path=str(tmp_path / "f")
    )
    assert made.num_samples == 8
