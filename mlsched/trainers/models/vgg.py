"""VGG with batch norm defined here (no torchvision): VGG-11/16 and a CPU-sized narrow VGG-11.

The convolutional part follows the standard configurations A (VGG-11) and D (VGG-16) with a
BatchNorm after every convolution. The classifier is sized for the input, because the
standard head (512x7x7 -> 4096 -> 4096 -> classes, 120M+ parameters) only makes sense for
224x224 images:

* ``image_size >= 224``: adaptive average pool to 7x7 and the standard 4096-wide head, so
  VGG-11-BN / VGG-16-BN have their published 132.9M / 138.4M parameters with 1000 classes;
* smaller inputs: adaptive pool to ``s x s`` with ``s = clamp(image_size // 32, 1, 7)`` and a
  512-wide head (512*s*s -> 512 -> 512 -> classes), the usual CIFAR VGG head;
* ``vgg11-narrow``: every conv width divided by 8 (8..64 channels), adaptive pool to 1x1 and
  a 64-wide head (64 -> 64 -> classes): a real VGG shape that trains fast on a CPU.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["VGG", "VGG_CONFIGS", "classifier_shape", "vgg"]

# Output channels per conv layer; "M" is a 2x2 max-pool (configurations A, B, D of the paper).
_SPECS = {
    "vgg11": "64 M 128 M 256 256 M 512 512 M 512 512 M",
    "vgg13": "64 64 M 128 128 M 256 256 M 512 512 M 512 512 M",
    "vgg16": "64 64 M 128 128 M 256 256 256 M 512 512 512 M 512 512 512 M",
}
VGG_CONFIGS: dict[str, tuple[int | str, ...]] = {
    name: tuple(t if t == "M" else int(t) for t in spec.split()) for name, spec in _SPECS.items()
}


def classifier_shape(image_size: int, width_divisor: int = 1) -> tuple[int, int]:
    """``(pooled side, hidden width)`` of the head for this input size (see module doc)."""
    if width_divisor != 1:
        return 1, 512 // width_divisor
    if image_size >= 224:
        return 7, 4096
    return min(7, max(1, image_size // 32)), 512


def _head(
    in_features: int, hidden: int, num_classes: int, width_divisor: int, dropout: float
) -> nn.Sequential:
    if width_divisor != 1:
        # The narrow head is small: two layers, no dropout.
        return nn.Sequential(
            nn.Linear(in_features, hidden), nn.ReLU(True), nn.Linear(hidden, num_classes)
        )
    return nn.Sequential(
        nn.Linear(in_features, hidden),
        nn.ReLU(True),
        nn.Dropout(dropout),
        nn.Linear(hidden, hidden),
        nn.ReLU(True),
        nn.Dropout(dropout),
        nn.Linear(hidden, num_classes),
    )


class VGG(nn.Module):
    """Conv-BN-ReLU stacks with max-pools, adaptive average pool, 3-layer MLP head."""

    def __init__(
        self,
        config: tuple[int | str, ...],
        num_classes: int = 10,
        image_size: int = 32,
        in_channels: int = 3,
        width_divisor: int = 1,
        dropout: float = 0.5,
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        channels = in_channels
        for item in config:
            if item == "M":
                layers.append(nn.MaxPool2d(2, 2))
                continue
            out = int(item) // width_divisor
            layers += [nn.Conv2d(channels, out, 3, padding=1), nn.BatchNorm2d(out), nn.ReLU(True)]
            channels = out
        self.features = nn.Sequential(*layers)
        side, hidden = classifier_shape(image_size, width_divisor)
        self.pool = nn.AdaptiveAvgPool2d(side)
        self.classifier = _head(channels * side * side, hidden, num_classes, width_divisor, dropout)
        self._init()

    def _init(self) -> None:
        # torchvision's VGG initialisation; uses only the global torch RNG.
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x: Tensor) -> Tensor:
        out = self.pool(self.features(x))
        return self.classifier(torch.flatten(out, 1))


def vgg(
    config: str,
    num_classes: int = 10,
    image_size: int = 32,
    in_channels: int = 3,
    narrow: bool = False,
) -> VGG:
    """VGG-BN ``config`` (vgg11, vgg13, vgg16); ``narrow`` divides every width by 8."""
    try:
        cfg = VGG_CONFIGS[config]
    except KeyError:
        raise ValueError(
            f"unknown VGG config {config!r}; known: {', '.join(VGG_CONFIGS)}"
        ) from None
    return VGG(cfg, num_classes, image_size, in_channels, width_divisor=8 if narrow else 1)
