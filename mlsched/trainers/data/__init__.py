"""Datasets for the trainers: a stateless, seeded batch stream over synthetic or local data.

``make_dataset(kind, seed=, num_samples=, image_size=, num_classes=, path=)`` builds one;
``dataset.batch(index, batch_size)`` is the ``index``-th mini-batch of the global stream (see
:mod:`mlsched.trainers.data.base` for the scheme and :func:`partition_index` for sync workers).
"""

from __future__ import annotations

from mlsched.core.errors import SpecError
from mlsched.trainers.data.base import BatchStream, IndexedDataset, mix_seed, partition_index
from mlsched.trainers.data.cifar import Cifar10
from mlsched.trainers.data.folder import ImageFolder
from mlsched.trainers.data.synthetic import SyntheticImages

__all__ = [
    "DATASET_KINDS",
    "BatchStream",
    "Cifar10",
    "ImageFolder",
    "IndexedDataset",
    "SyntheticImages",
    "make_dataset",
    "mix_seed",
    "partition_index",
]

DATASET_KINDS = ("synthetic", "cifar10", "folder")


def make_dataset(
    kind: str,
    *,
    seed: int,
    num_samples: int,
    image_size: int,
    num_classes: int,
    path: str | None = None,
    train: bool = True,
) -> IndexedDataset:
    """The dataset a job's config names; bad values raise :class:`SpecError` (a ValueError).

    * ``synthetic``: exactly ``num_samples`` samples, ``num_classes`` classes, 3 channels;
      ``path`` must be unset. ``train=False`` gives a held-out set (same prototypes, fresh
      noise: sample indices start after the training ones).
    * ``cifar10``: the local binary files under ``path``; at most ``num_samples`` of them
      (read ``len`` back from ``dataset.num_samples``); ``num_classes`` must be 10.
    * ``folder``: ``path/<class>/<images>``; at most ``num_samples`` images; ``num_classes``
      must equal the number of class folders (so the model's head matches the labels).
    """
    if kind not in DATASET_KINDS:
        raise SpecError("dataset", kind, "one of " + ", ".join(DATASET_KINDS))
    for name, value in (
        ("num_samples", num_samples),
        ("image_size", image_size),
        ("num_classes", num_classes),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise SpecError(name, value, "an integer >= 1")
    if kind == "synthetic":
        if path:
            raise SpecError("data_path", path, "no path for the synthetic dataset")
        return SyntheticImages(
            num_samples,
            num_classes,
            image_size,
            3,
            seed,
            first_index=0 if train else num_samples,
        )
    if not path:
        raise SpecError("data_path", path, f"the directory of the {kind} data")
    if kind == "cifar10":
        if num_classes != 10:
            raise SpecError("num_classes", num_classes, "10 for cifar10")
        return Cifar10(path, train=train, seed=seed, num_samples=num_samples, image_size=image_size)
    dataset = ImageFolder(path, image_size=image_size, seed=seed, num_samples=num_samples)
    if dataset.num_classes != num_classes:
        raise SpecError(
            "num_classes",
            num_classes,
            f"{dataset.num_classes}, the number of class folders in {path}",
        )
    return dataset
