"""CIFAR-10 from a local copy of the binary distribution (``cifar-10-batches-bin``).

No downloads: the user points ``path`` at a directory holding ``data_batch_1.bin`` ...
``data_batch_5.bin`` (training) and ``test_batch.bin`` (test), or at its parent. Each file is
a sequence of 3073-byte records: 1 label byte (0-9), then 1024 red, 1024 green and 1024 blue
pixel bytes of a 32x32 image, row-major. Everything is loaded once as uint8 (150 MB for the
training set) and normalised per batch with the usual CIFAR-10 channel mean/std, so that
fetching a batch costs a gather, not a file read.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

from mlsched.core.errors import SpecError
from mlsched.trainers.data.base import IndexedDataset

__all__ = [
    "CIFAR10_MEAN",
    "CIFAR10_STD",
    "RECORD_BYTES",
    "TEST_FILES",
    "TRAIN_FILES",
    "Cifar10",
    "read_cifar_bin",
]

RECORD_BYTES = 1 + 3 * 32 * 32
TRAIN_FILES = tuple(f"data_batch_{i}.bin" for i in range(1, 6))
TEST_FILES = ("test_batch.bin",)
CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR10_STD = (0.2470, 0.2435, 0.2616)


def _bad(path: Path | str, problem: str) -> SpecError:
    return SpecError("path", str(path), f"a CIFAR-10 binary directory ({problem})")


def read_cifar_bin(file: Path) -> tuple[Tensor, Tensor]:
    """Images ``(N, 3, 32, 32)`` uint8 and labels ``(N,)`` int64 of one CIFAR-10 ``.bin`` file."""
    try:
        raw = file.read_bytes()
    except OSError as exc:
        raise _bad(file, f"cannot read {file}: {exc.strerror or exc}") from exc
    if not raw or len(raw) % RECORD_BYTES:
        raise _bad(
            file,
            f"{file} is corrupt: {len(raw)} bytes is not a positive multiple of the "
            f"{RECORD_BYTES}-byte record",
        )
    records = torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(-1, RECORD_BYTES)
    labels = records[:, 0].long()
    if int(labels.max()) > 9:
        bad = int(torch.nonzero(labels > 9)[0, 0])
        raise _bad(file, f"{file} is corrupt: record {bad} has label {int(labels[bad])} > 9")
    return records[:, 1:].reshape(-1, 3, 32, 32).contiguous(), labels


def _locate(path: str | Path, files: tuple[str, ...]) -> Path:
    root = Path(path).expanduser()
    if not root.is_dir():
        raise _bad(root, f"{root} is not a directory")
    for candidate in (root, root / "cifar-10-batches-bin"):
        if all((candidate / f).is_file() for f in files):
            return candidate
    missing = [str(root / f) for f in files if not (root / f).is_file()]
    raise _bad(root, "missing " + ", ".join(missing))


class Cifar10(IndexedDataset):
    """The CIFAR-10 training (``train=True``) or test split from local binary files.

    ``num_samples`` keeps at most the first that many records (all when ``None``, or when the
    files hold fewer: read ``num_samples`` back for the real count); a smaller
    ``image_size`` than 32 or a larger one (ImageNet-style models) is reached by bilinear
    resizing of each batch.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        train: bool = True,
        seed: int = 0,
        num_samples: int | None = None,
        image_size: int = 32,
    ) -> None:
        root = _locate(path, TRAIN_FILES if train else TEST_FILES)
        parts = [read_cifar_bin(root / f) for f in (TRAIN_FILES if train else TEST_FILES)]
        images = torch.cat([p[0] for p in parts])
        labels = torch.cat([p[1] for p in parts])
        if num_samples is not None:
            if num_samples < 1:
                raise SpecError("num_samples", num_samples, "an integer >= 1")
            images, labels = images[:num_samples], labels[:num_samples]
        if image_size < 1:
            raise SpecError("image_size", image_size, "an integer >= 1")
        super().__init__(int(labels.numel()), 10, (3, image_size, image_size), seed)
        self.root = root
        self.images = images
        self.labels = labels
        self._mean = torch.tensor(CIFAR10_MEAN).view(1, 3, 1, 1)
        self._std = torch.tensor(CIFAR10_STD).view(1, 3, 1, 1)

    def samples(self, indices: Tensor) -> tuple[Tensor, Tensor]:
        x = self.images[indices].float().div_(255.0)
        x = (x - self._mean) / self._std
        side = self.image_shape[1]
        if side != 32:
            x = F.interpolate(x, size=(side, side), mode="bilinear", align_corners=False)
        return x, self.labels[indices]
