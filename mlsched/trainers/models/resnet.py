"""ResNets defined here (no torchvision): CIFAR-style ResNet-6n+2 and ImageNet-style 18/50.

CIFAR-style (He et al. 2016, section 4.2): a 3x3 stem with 16 channels, three stages of ``n``
basic blocks with 16/32/64 channels, the first block of stages 2 and 3 halving the resolution,
and the parameter-free "option A" shortcut (subsample + zero-pad channels), which is what gives
the published 0.27M (ResNet-20) and 0.85M (ResNet-56) parameters.

ImageNet-style: the standard 7x7/2 stem + 3x3/2 max-pool, four stages (64/128/256/512 base
widths), basic blocks (ResNet-18) or bottlenecks with expansion 4 (ResNet-50), 1x1 projection
shortcuts where the shape changes, and adaptive average pooling so that a 32x32 input (CPU
tests) works as well as 224x224.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["CifarResNet", "ImageNetResNet", "cifar_resnet", "resnet18", "resnet50"]


def _init(model: nn.Module) -> None:
    """Kaiming-normal convolutions, unit/zero batch norm: the usual ResNet initialisation.

    Only the global torch RNG is used, so a model is a pure function of ``torch.manual_seed``.
    """
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


class _PadShortcut(nn.Module):
    """Option A shortcut: take every other pixel and zero-pad the new channels (no weights)."""

    def __init__(self, extra_channels: int) -> None:
        super().__init__()
        self.extra = extra_channels

    def forward(self, x: Tensor) -> Tensor:
        half = self.extra // 2
        return F.pad(x[:, :, ::2, ::2], (0, 0, 0, 0, half, self.extra - half))


class BasicBlock(nn.Module):
    """Two 3x3 conv-BN layers with an identity (or given) shortcut."""

    expansion = 1

    def __init__(
        self, in_planes: int, planes: int, stride: int = 1, shortcut: nn.Module | None = None
    ) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = shortcut if shortcut is not None else nn.Identity()

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (carrying the stride, as in torchvision's "v1.5"), 1x1 expand by 4."""

    expansion = 4

    def __init__(
        self, in_planes: int, planes: int, stride: int = 1, shortcut: nn.Module | None = None
    ) -> None:
        super().__init__()
        out_planes = planes * self.expansion
        self.conv1 = nn.Conv2d(in_planes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, out_planes, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_planes)
        self.shortcut = shortcut if shortcut is not None else nn.Identity()

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + self.shortcut(x))


class CifarResNet(nn.Module):
    """ResNet-(6n+2) for 32x32 images: 3 stages of ``n`` basic blocks, 16/32/64 channels."""

    def __init__(self, n: int, num_classes: int = 10, in_channels: int = 3) -> None:
        super().__init__()
        if n < 1:
            raise ValueError(f"blocks per stage must be >= 1, got {n}")
        self.conv1 = nn.Conv2d(in_channels, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        stages: list[nn.Module] = []
        in_planes = 16
        for i, planes in enumerate((16, 32, 64)):
            blocks: list[nn.Module] = []
            for j in range(n):
                stride = 2 if i > 0 and j == 0 else 1
                shortcut = _PadShortcut(planes - in_planes) if stride != 1 else None
                blocks.append(BasicBlock(in_planes, planes, stride, shortcut))
                in_planes = planes
            stages.append(nn.Sequential(*blocks))
        self.layers = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64, num_classes)
        _init(self)

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.pool(self.layers(out))
        return self.fc(torch.flatten(out, 1))


class ImageNetResNet(nn.Module):
    """ImageNet ResNet: 7x7/2 stem, max-pool, 4 stages, adaptive average pool, linear head."""

    def __init__(
        self,
        block: type[BasicBlock] | type[Bottleneck],
        layers: tuple[int, int, int, int],
        num_classes: int = 1000,
        in_channels: int = 3,
    ) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        stages: list[nn.Module] = []
        in_planes = 64
        for i, (planes, count) in enumerate(zip((64, 128, 256, 512), layers, strict=True)):
            blocks: list[nn.Module] = []
            for j in range(count):
                stride = 2 if i > 0 and j == 0 else 1
                out_planes = planes * block.expansion
                shortcut: nn.Module | None = None
                if stride != 1 or in_planes != out_planes:
                    shortcut = nn.Sequential(
                        nn.Conv2d(in_planes, out_planes, 1, stride, bias=False),
                        nn.BatchNorm2d(out_planes),
                    )
                blocks.append(block(in_planes, planes, stride, shortcut))
                in_planes = out_planes
            stages.append(nn.Sequential(*blocks))
        self.layers = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(in_planes, num_classes)
        _init(self)

    def forward(self, x: Tensor) -> Tensor:
        out = self.maxpool(F.relu(self.bn1(self.conv1(x))))
        out = self.pool(self.layers(out))
        return self.fc(torch.flatten(out, 1))


def cifar_resnet(depth: int, num_classes: int = 10, in_channels: int = 3) -> CifarResNet:
    """ResNet-``depth`` for CIFAR; ``depth`` must be 6n+2 (20, 32, 44, 56, 110, ...)."""
    if depth < 8 or (depth - 2) % 6:
        raise ValueError(f"CIFAR ResNet depth must be 6n+2 with n >= 1, got {depth}")
    return CifarResNet((depth - 2) // 6, num_classes, in_channels)


def resnet18(num_classes: int = 1000, in_channels: int = 3) -> ImageNetResNet:
    return ImageNetResNet(BasicBlock, (2, 2, 2, 2), num_classes, in_channels)


def resnet50(num_classes: int = 1000, in_channels: int = 3) -> ImageNetResNet:
    return ImageNetResNet(Bottleneck, (3, 4, 6, 3), num_classes, in_channels)
