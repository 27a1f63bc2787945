"""Models the trainers can run, defined in the project (no torchvision), selected by name."""

from mlsched.trainers.models.registry import (
    ModelInfo,
    TinyMLP,
    build_model,
    check_input,
    model_info,
    model_names,
)
from mlsched.trainers.models.resnet import CifarResNet, ImageNetResNet
from mlsched.trainers.models.vgg import VGG

__all__ = [
    "VGG",
    "CifarResNet",
    "ImageNetResNet",
    "ModelInfo",
    "TinyMLP",
    "build_model",
    "check_input",
    "model_info",
    "model_names",
]
