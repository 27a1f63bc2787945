"""The dataset interface every trainer uses: a stateless, seeded, epoch-shuffled batch stream.

A dataset is ``num_samples`` fixed samples. The training stream visits them epoch after epoch,
each epoch in its own order: ``permutation(epoch)`` is a function of ``(seed, epoch)`` only.
Stream position ``p`` (counted in samples from the very start) is sample
``permutation(p // num_samples)[p % num_samples]``, and mini-batch ``index`` of size ``B`` is
positions ``[index * B, (index + 1) * B)``: its epoch is ``index * B // num_samples`` (a batch
that straddles an epoch end takes its tail from the next epoch's order, so the stream has no
seams and no sample is dropped or repeated within an epoch).

Nothing else is remembered, so a trainer that knows its global step can fetch exactly its
batch after a restart, with any number of workers. Sync data-parallel scheme
(``partition_index``): at sync step ``s`` worker ``r`` of ``W`` takes batch index
``start + s * W + r``, where ``start`` is the number of batches consumed before the current
run (0 for a fresh job). When a job is restarted with a different ``W``, checkpoint the
cursor ``start + steps_done * W`` and use it as the new ``start`` (step count from 0 again),
or, more simply, checkpoint ``consumed`` batches and take ``consumed + r``. Async PS workers
have no common step: let the PS hand out batch indices from its update counter, or take
``s * W + r`` on the worker's local step ``s`` (approximate after a resize).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import OrderedDict

import torch
from torch import Tensor

__all__ = ["BatchStream", "IndexedDataset", "mix_seed", "partition_index"]

_MASK64 = (1 << 64) - 1


def mix_seed(*parts: int) -> int:
    """A well-mixed 63-bit seed from integers (splitmix64 over the parts), for torch.Generator.

    Neighbouring inputs (``(seed, 0)`` and ``(seed, 1)``) give unrelated streams, which plain
    ``seed + epoch`` would not guarantee across datasets that share a seed.
    """
    h = 0x9E3779B97F4A7C15
    for part in parts:
        h = (h ^ (part & _MASK64)) & _MASK64
        h = (h + 0x9E3779B97F4A7C15) & _MASK64
        z = h
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
        h = z ^ (z >> 31)
    return h >> 1


def partition_index(step: int, rank: int, world: int, start: int = 0) -> int:
    """Batch index of worker ``rank`` of ``world`` at sync step ``step``: start + step*world + rank."""
    if world < 1:
        raise ValueError(f"world must be >= 1, got {world}")
    if not 0 <= rank < world:
        raise ValueError(f"rank must be in [0, {world}), got {rank}")
    if step < 0 or start < 0:
        raise ValueError(f"step and start must be >= 0, got step={step}, start={start}")
    return start + step * world + rank


class IndexedDataset(ABC):
    """``num_samples`` samples of shape ``image_shape`` (C, H, W) with labels in [0, num_classes).

    Subclasses implement :meth:`samples` (fetch samples by index); the stream logic lives here.
    Images come back as float32 ``(B, C, H, W)``, labels as int64 ``(B,)``.
    """

    _PERM_CACHE = 2  # epochs kept: a batch touches at most two

    def __init__(
        self, num_samples: int, num_classes: int, image_shape: tuple[int, int, int], seed: int
    ) -> None:
        if num_samples < 1:
            raise ValueError(f"num_samples must be >= 1, got {num_samples}")
        if num_classes < 1:
            raise ValueError(f"num_classes must be >= 1, got {num_classes}")
        self.num_samples = num_samples
        self.num_classes = num_classes
        self.image_shape = image_shape
        self.seed = seed
        self._perms: OrderedDict[int, Tensor] = OrderedDict()

    @abstractmethod
    def samples(self, indices: Tensor) -> tuple[Tensor, Tensor]:
        """Images and labels of the samples ``indices`` (int64, each in [0, num_samples))."""

    def permutation(self, epoch: int) -> Tensor:
        """The visiting order of ``epoch``: a function of ``(seed, epoch)`` only (cached)."""
        if epoch < 0:
            raise ValueError(f"epoch must be >= 0, got {epoch}")
        perm = self._perms.get(epoch)
        if perm is None:
            gen = torch.Generator().manual_seed(mix_seed(self.seed, epoch, 0x5EED))
            perm = torch.randperm(self.num_samples, generator=gen)
            self._perms[epoch] = perm
            # Tolerates concurrent readers (prefetch threads): a lost race only recomputes.
            while len(self._perms) > self._PERM_CACHE:
                try:
                    self._perms.popitem(last=False)
                except KeyError:
                    break
        return perm

    def stream_indices(self, position: int, count: int) -> Tensor:
        """Sample indices at stream positions ``[position, position + count)``."""
        if position < 0 or count < 0:
            raise ValueError(f"position and count must be >= 0, got {position}, {count}")
        out: list[Tensor] = []
        while count > 0:
            epoch, offset = divmod(position, self.num_samples)
            take = min(count, self.num_samples - offset)
            out.append(self.permutation(epoch)[offset : offset + take])
            position += take
            count -= take
        return torch.cat(out) if out else torch.empty(0, dtype=torch.long)

    def take(self, position: int, count: int) -> tuple[Tensor, Tensor]:
        """The ``count`` samples at stream position ``position`` (in samples, not batches)."""
        return self.samples(self.stream_indices(position, count))

    def batch(self, index: int, batch_size: int) -> tuple[Tensor, Tensor]:
        """Mini-batch ``index`` of the global stream: positions [index*B, (index+1)*B)."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if index < 0:
            raise ValueError(f"batch index must be >= 0, got {index}")
        return self.take(index * batch_size, batch_size)

    def epoch_of(self, index: int, batch_size: int) -> int:
        """Epoch of the first sample of batch ``index``: index * batch_size // num_samples."""
        return index * batch_size // self.num_samples

    def partition(self, rank: int, world: int, start: int = 0) -> BatchStream:
        """Worker ``rank`` of ``world``'s view for sync training (see :func:`partition_index`)."""
        partition_index(0, rank, world, start)  # validate
        return BatchStream(self, rank, world, start)


class BatchStream:
    """One sync worker's batches: ``batch(step, B)`` is the dataset's batch start+step*W+rank."""

    def __init__(self, dataset: IndexedDataset, rank: int, world: int, start: int = 0) -> None:
        self.dataset = dataset
        self.rank = rank
        self.world = world
        self.start = start

    def index(self, step: int) -> int:
        return partition_index(step, self.rank, self.world, self.start)

    def batch(self, step: int, batch_size: int) -> tuple[Tensor, Tensor]:
        return self.dataset.batch(self.index(step), batch_size)
