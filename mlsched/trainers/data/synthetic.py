"""A synthetic image-classification dataset whose labels can actually be learned.

Real training needs a loss that falls, otherwise a broken trainer (gradients never applied,
PS updates lost) looks exactly like a working one. Each class has a fixed random prototype
image: smooth (Gaussian noise at ``proto_resolution`` x ``proto_resolution``, bilinearly
upsampled) so that convolutional nets with global pooling pick it up as easily as MLPs.
Sample ``i`` draws its label and its pixel noise from a generator seeded by ``(seed, i)``:

    x_i = (prototype[y_i] + noise_std * N(0, I)) / sqrt(1 + noise_std**2)

so every sample is a pure function of ``(seed, i)``, any process can produce any sample
without shared state or files, and pixels have unit variance.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from mlsched.trainers.data.base import IndexedDataset, mix_seed

__all__ = ["SyntheticImages"]


class SyntheticImages(IndexedDataset):
    """``num_samples`` noisy copies of ``num_classes`` class prototypes (see module doc).

    ``first_index`` shifts the sample indices: a held-out set with the same prototypes and
    fresh noise is ``SyntheticImages(..., first_index=num_train_samples)``.
    """

    def __init__(
        self,
        num_samples: int = 50_000,
        num_classes: int = 10,
        image_size: int = 32,
        channels: int = 3,
        seed: int = 0,
        *,
        noise_std: float = 4.0,
        proto_resolution: int = 8,
        first_index: int = 0,
    ) -> None:
        if image_size < 1 or channels < 1:
            raise ValueError(f"image_size and channels must be >= 1, got {image_size}, {channels}")
        if noise_std < 0:
            raise ValueError(f"noise_std must be >= 0, got {noise_std}")
        if first_index < 0:
            raise ValueError(f"first_index must be >= 0, got {first_index}")
        super().__init__(num_samples, num_classes, (channels, image_size, image_size), seed)
        self.noise_std = noise_std
        self.first_index = first_index
        self.prototypes = self._make_prototypes(max(1, min(proto_resolution, image_size)))

    def _make_prototypes(self, res: int) -> Tensor:
        c, h, w = self.image_shape
        gen = torch.Generator().manual_seed(mix_seed(self.seed, 0xC1A55))
        coarse = torch.randn(self.num_classes, c, res, res, generator=gen)
        protos = F.interpolate(coarse, size=(h, w), mode="bilinear", align_corners=False)
        # Unit standard deviation per prototype, whatever the upsampling did to it.
        std = protos.flatten(1).std(dim=1, unbiased=False).clamp_min(1e-6)
        return protos / std.view(-1, 1, 1, 1)

    def label(self, index: int) -> int:
        """Label of sample ``index`` (cheap: no pixels drawn)."""
        gen = torch.Generator().manual_seed(mix_seed(self.seed, self.first_index + index))
        return int(torch.randint(self.num_classes, (1,), generator=gen).item())

    def samples(self, indices: Tensor) -> tuple[Tensor, Tensor]:
        n = int(indices.numel())
        images = torch.empty((n, *self.image_shape), dtype=torch.float32)
        labels = torch.empty(n, dtype=torch.long)
        scale = 1.0 / math.sqrt(1.0 + self.noise_std**2)
        for k, i in enumerate(indices.tolist()):
            if not 0 <= i < self.num_samples:
                raise IndexError(f"sample {i} out of range [0, {self.num_samples})")
            gen = torch.Generator().manual_seed(mix_seed(self.seed, self.first_index + i))
            y = int(torch.randint(self.num_classes, (1,), generator=gen).item())
            noise = torch.randn(self.image_shape, generator=gen)
            images[k] = (self.prototypes[y] + self.noise_std * noise) * scale
            labels[k] = y
        return images, labels
