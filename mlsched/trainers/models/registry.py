"""Models by name: what a job's ``model`` field selects, with sizes the scheduler can use.

``build_model`` constructs a fresh model from the global torch RNG only, so two processes that
call ``torch.manual_seed(s)`` and then ``build_model(name, ...)`` hold identical weights (how
PS/DDP replicas start in agreement). ``model_info`` counts parameters on the ``meta`` device:
no memory is allocated and the global RNG is left untouched, so it is cheap even for VGG-16 at
224x224 and safe to call between seeding and building.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from mlsched.core.errors import SpecError
from mlsched.trainers.models.resnet import cifar_resnet, resnet18, resnet50
from mlsched.trainers.models.vgg import vgg

__all__ = ["ModelInfo", "TinyMLP", "build_model", "check_input", "model_info", "model_names"]

# (num_classes, image_size, in_channels) -> model
Builder = Callable[[int, int, int], nn.Module]


class TinyMLP(nn.Module):
    """Flatten -> 64 hidden units -> classes: the fastest model for smoke tests."""

    def __init__(
        self,
        num_classes: int = 10,
        image_size: int = 32,
        in_channels: int = 3,
        hidden: int = 64,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        # Dropout (when asked for) draws random masks in training, like VGG's head: the
        # smoke-sized way to exercise the trainers' random draws.
        extra: list[nn.Module] = [nn.Dropout(dropout)] if dropout > 0 else []
        self.net = nn.Sequential(
            nn.Flatten(),
            nn.Linear(in_channels * image_size * image_size, hidden),
            nn.ReLU(True),
            *extra,
            nn.Linear(hidden, num_classes),
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)


@dataclass(frozen=True)
class _Entry:
    family: str
    default_image_size: int
    builder: Builder
    description: str


_MODELS: dict[str, _Entry] = {
    "mlp": _Entry("mlp", 32, lambda k, s, c: TinyMLP(k, s, c), "2-layer MLP, 64 hidden units"),
    "mlp-dropout": _Entry(
        "mlp",
        32,
        lambda k, s, c: TinyMLP(k, s, c, dropout=0.25),
        "2-layer MLP, 64 hidden units, dropout 0.25 (random draws in training)",
    ),
    "resnet20": _Entry(
        "resnet", 32, lambda k, s, c: cifar_resnet(20, k, c), "CIFAR ResNet-20 (3x3 basic blocks)"
    ),
    "resnet56": _Entry(
        "resnet", 32, lambda k, s, c: cifar_resnet(56, k, c), "CIFAR ResNet-56 (9x3 basic blocks)"
    ),
    "resnet18": _Entry(
        "resnet", 224, lambda k, s, c: resnet18(k, c), "ImageNet ResNet-18 (basic blocks)"
    ),
    "resnet50": _Entry(
        "resnet", 224, lambda k, s, c: resnet50(k, c), "ImageNet ResNet-50 (bottlenecks)"
    ),
    "vgg11": _Entry("vgg", 224, lambda k, s, c: vgg("vgg11", k, s, c), "VGG-11 with batch norm"),
    "vgg16": _Entry("vgg", 224, lambda k, s, c: vgg("vgg16", k, s, c), "VGG-16 with batch norm"),
    "vgg11-narrow": _Entry(
        "vgg",
        32,
        lambda k, s, c: vgg("vgg11", k, s, c, narrow=True),
        "VGG-11-BN with widths / 8 and a 64-wide head (CPU-sized)",
    ),
}


@dataclass(frozen=True)
class ModelInfo:
    """Size of one model configuration: what the scheduler's ``gradient_mb`` should be.

    ``gradient_bytes`` is fp32: 4 bytes per trainable parameter (what a worker pushes to the
    PSs or all-reduces each step). ``default_image_size`` is the side the architecture was
    designed for (32 for CIFAR-style models, 224 for ImageNet-style ones); ``image_size`` and
    ``num_classes`` are the configuration that was counted.
    """

    name: str
    family: str
    params: int
    trainable_params: int
    gradient_bytes: int
    default_image_size: int
    image_size: int
    num_classes: int
    description: str

    @property
    def gradient_mb(self) -> float:
        """Gradient size in MB (1e6 bytes), the unit of ``JobSpec.gradient_mb``."""
        return self.gradient_bytes / 1e6


def model_names() -> list[str]:
    """Every registered model name, sorted."""
    return sorted(_MODELS)


def _entry(name: str) -> _Entry:
    try:
        return _MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(model_names())}") from None


def _check(num_classes: int, image_size: int, in_channels: int) -> None:
    for field, value in (
        ("num_classes", num_classes),
        ("image_size", image_size),
        ("in_channels", in_channels),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{field} must be an integer >= 1, got {value!r}")


def build_model(
    name: str, num_classes: int = 10, image_size: int = 32, *, in_channels: int = 3
) -> nn.Module:
    """A freshly initialised model ``name`` for ``in_channels x image_size x image_size`` input.

    Unknown names raise ValueError listing the known ones. The weights depend only on the
    global torch RNG (seed it with ``torch.manual_seed`` first).
    """
    entry = _entry(name)
    _check(num_classes, image_size, in_channels)
    return entry.builder(num_classes, image_size, in_channels)


def model_info(
    name: str, num_classes: int = 10, image_size: int = 32, *, in_channels: int = 3
) -> ModelInfo:
    """Parameter count and gradient size of ``build_model(name, num_classes, image_size)``."""
    entry = _entry(name)
    _check(num_classes, image_size, in_channels)
    with torch.device("meta"):
        model = entry.builder(num_classes, image_size, in_channels)
    params = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return ModelInfo(
        name=name,
        family=entry.family,
        params=params,
        trainable_params=trainable,
        gradient_bytes=4 * trainable,
        default_image_size=entry.default_image_size,
        image_size=image_size,
        num_classes=num_classes,
        description=entry.description,
    )


#: Largest model a job may ask for, in trainable parameters (VGG-16 at 224 px is 138 M): a
#: bound on the memory each of its processes asks of a shared machine.
MAX_PARAMS = 2_000_000_000


@functools.lru_cache(maxsize=1024)
def check_input(
    name: str, image_size: int, num_classes: int, *, in_channels: int = 3, batch: int = 2
) -> None:
    """Raise :class:`SpecError` unless ``name`` takes ``image_size`` inputs: one forward pass
    on the meta device (no memory, no compute), so a VGG fed 8-pixel images is refused at
    intake rather than failing in every trainer it launches."""
    _entry(name)
    with torch.device("meta"):
        model = _MODELS[name].builder(num_classes, image_size, in_channels)
        params = sum(p.numel() for p in model.parameters())
        if params > MAX_PARAMS:
            raise SpecError(
                "image_size",
                image_size,
                f"a size at which {name} has at most {MAX_PARAMS:g} parameters ({params:g})",
            )
        try:
            out = model(torch.empty(batch, in_channels, image_size, image_size))
        except (RuntimeError, ValueError) as err:
            raise SpecError(
                "image_size", image_size, f"an input size {name} accepts ({str(err)[:120]})"
            ) from None
    if tuple(out.shape) != (batch, num_classes):
        raise SpecError("image_size", image_size, f"an input size {name} maps to class scores")
