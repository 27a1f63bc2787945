"""How parameters are flattened and split across parameter servers.

The trainable parameters, in ``named_parameters()`` order, form one flat fp32 vector; PS
``k`` of ``K`` owns the contiguous slice ``[bounds[k], bounds[k+1])``. Equal slices balance
the shards by size exactly (a whole-tensor assignment cannot when one layer dominates, as
VGG's classifier does). A checkpoint stores named tensors, so any K can resume any other.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

__all__ = ["FlatLayout"]


@dataclass(frozen=True)
class FlatLayout:
    names: tuple[str, ...]
    shapes: tuple[torch.Size, ...]
    numels: tuple[int, ...]
    num_shards: int

    @classmethod
    def of(cls, model: nn.Module, num_shards: int) -> FlatLayout:
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        return cls(
            tuple(n for n, _ in named),
            tuple(p.shape for _, p in named),
            tuple(p.numel() for _, p in named),
            num_shards,
        )

    @property
    def total(self) -> int:
        return sum(self.numels)

    def bounds(self, shard: int) -> tuple[int, int]:
        base, extra = divmod(self.total, self.num_shards)
        start = shard * base + min(shard, extra)
        return start, start + base + (1 if shard < extra else 0)

    def flatten(self, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
        return torch.cat([tensors[n].detach().reshape(-1).float().cpu() for n in self.names])

    def unflatten(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        out: dict[str, torch.Tensor] = {}
        offset = 0
        for name, shape, numel in zip(self.names, self.shapes, self.numels, strict=True):
            out[name] = flat[offset : offset + numel].view(shape).clone()
            offset += numel
        return out
