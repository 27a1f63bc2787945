"""Models of the trainers: published parameter counts, shapes, gradient sizes, determinism."""

from __future__ import annotations

import pytest
import torch

from mlsched.trainers.models import build_model, model_info, model_names

torch.set_num_threads(1)

# name -> (num_classes, image_size, expected params, relative tolerance)
PUBLISHED = {
    "resnet20": (10, 32, 0.27e6, 0.02),
    "resnet56": (10, 32, 0.85e6, 0.02),
    "resnet18": (1000, 224, 11.69e6, 0.005),
    "resnet50": (1000, 224, 25.56e6, 0.005),
    "vgg11": (1000, 224, 132.9e6, 0.005),
    "vgg16": (1000, 224, 138.4e6, 0.005),
}


def test_registry_lists_every_model() -> None:
    assert model_names() == sorted(
        [
            "mlp",
            "mlp-dropout",
            "resnet18",
            "resnet20",
            "resnet50",
            "resnet56",
            "vgg11",
            "vgg11-narrow",
            "vgg16",
        ]
    )


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_parameter_counts(name: str) -> None:
    classes, size, expected, tol = PUBLISHED[name]
    info = model_info(name, classes, size)
    assert info.params == pytest.approx(expected, rel=tol)
    assert info.gradient_bytes == 4 * info.params
    assert info.gradient_mb == pytest.approx(4 * info.params / 1e6)


def test_exact_counts_and_small_input_heads() -> None:
    # Exact values of the reference implementations (torchvision, He et al. option A).
    assert model_info("resnet20").params == 269_722
    assert model_info("resnet56").params == 853_018
    assert model_info("resnet18", 1000, 224).params == 11_689_512
    assert model_info("resnet50", 1000, 224).params == 25_557_032
    assert model_info("vgg11", 1000, 224).params == 132_868_840
    assert model_info("vgg16", 1000, 224).params == 138_365_992
    assert model_info("resnet18", 10).params == pytest.approx(11.18e6, rel=0.005)
    # 32x32 VGG: 1x1 pooled features and a 512-wide head.
    assert model_info("vgg11", 10, 32).params == pytest.approx(9.76e6, rel=0.005)
    narrow = model_info("vgg11-narrow")
    assert narrow.params < 0.2e6 and narrow.family == "vgg"
    assert model_info("mlp").params < model_info("resnet20").params


def test_model_info_fields_and_rng_untouched() -> None:
    torch.manual_seed(3)
    before = torch.get_rng_state()
    info = model_info("resnet50", 10, 32)
    assert torch.equal(torch.get_rng_state(), before)  # counted on the meta device
    assert (info.name, info.family, info.default_image_size) == ("resnet50", "resnet", 224)
    assert (info.num_classes, info.image_size) == (10, 32)
    assert model_info("resnet20").default_image_size == 32
    with pytest.raises(AttributeError):
        info.params = 1  # type: ignore[misc]


@pytest.mark.parametrize("name", model_names())
def test_forward_shape_and_gradient_bytes(name: str) -> None:
    torch.manual_seed(0)
    model = build_model(name, num_classes=7, image_size=32)
    model.eval()
    with torch.no_grad():
        out = model(torch.randn(2, 3, 32, 32))
    assert out.shape == (2, 7)
    assert torch.isfinite(out).all()
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert model_info(name, 7, 32).gradient_bytes == 4 * trainable


def test_imagenet_model_at_224() -> None:
    model = build_model("resnet18", num_classes=1000, image_size=224).eval()
    with torch.no_grad():
        assert model(torch.randn(1, 3, 224, 224)).shape == (1, 1000)


def test_vgg_at_64_and_gray_input() -> None:
    model = build_model("vgg11-narrow", num_classes=4, image_size=64, in_channels=1).eval()
    with torch.no_grad():
        assert model(torch.randn(1, 1, 64, 64)).shape == (1, 4)
    mlp = build_model("mlp", num_classes=3, image_size=8, in_channels=1)
    assert mlp(torch.randn(5, 1, 8, 8)).shape == (5, 3)


def test_backward_produces_gradient_for_every_parameter() -> None:
    torch.manual_seed(0)
    model = build_model("resnet20")
    loss = model(torch.randn(4, 3, 32, 32)).logsumexp(1).mean()
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())


@pytest.mark.parametrize("name", ["resnet20", "vgg11-narrow", "mlp"])
def test_deterministic_given_seed(name: str) -> None:
    torch.manual_seed(42)
    a = build_model(name).state_dict()
    torch.manual_seed(42)
    b = build_model(name).state_dict()
    torch.manual_seed(43)
    c = build_model(name).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], c[k]) for k in a if a[k].is_floating_point())


def test_unknown_name_and_bad_sizes() -> None:
    with pytest.raises(ValueError, match=r"unknown model 'alexnet'.*resnet20.*vgg16"):
        build_model("alexnet")
    with pytest.raises(ValueError, match="unknown model"):
        model_info("resnet-20")
    with pytest.raises(ValueError, match="num_classes"):
        build_model("resnet20", num_classes=0)
    with pytest.raises(ValueError, match="image_size"):
        model_info("vgg11", image_size=0)
