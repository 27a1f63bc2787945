"""Images from a class-per-folder tree: ``root/<class_name>/<image files>``, decoded with Pillow.

For users who bring their own data (an ImageNet subset, a photo collection) without writing a
loader. Classes are the sub-directories in sorted name order (label = position); images are
the files with a known image suffix, sorted by name. Every image is converted to RGB, resized
to ``image_size x image_size`` (bilinear, aspect ratio not kept) and normalised with the
ImageNet channel mean/std. Small trees are decoded once up front (errors surface at
construction); larger ones are decoded per batch.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from mlsched.core.errors import SpecError
from mlsched.trainers.data.base import IndexedDataset

__all__ = ["IMAGENET_MEAN", "IMAGENET_STD", "IMAGE_SUFFIXES", "ImageFolder", "load_image"]

IMAGE_SUFFIXES = frozenset(
    {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".ppm", ".tif", ".tiff", ".webp"}
)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
_PRELOAD_BYTES = 256 * 2**20


def _bad(path: Path | str, problem: str) -> SpecError:
    return SpecError("path", str(path), f"an image folder root/<class>/<images> ({problem})")


def load_image(file: Path, image_size: int) -> Tensor:
    """One image as uint8 ``(3, image_size, image_size)``; unreadable files raise naming them."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(file) as img:
            rgb = img.convert("RGB").resize((image_size, image_size), Image.Resampling.BILINEAR)
            array = np.asarray(rgb, dtype=np.uint8)
    except (OSError, UnidentifiedImageError, ValueError) as exc:
        raise _bad(file, f"cannot decode {file}: {exc}") from exc
    return torch.from_numpy(array.copy()).permute(2, 0, 1).contiguous()


class ImageFolder(IndexedDataset):
    """A ``root/<class>/<image>`` tree as a dataset of ``3 x image_size x image_size`` images.

    ``num_samples`` keeps at most that many images, taken round-robin over the classes (so a
    subset stays balanced); ``preload`` decodes everything up front (default: when the
    decoded images fit in 256 MiB).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        image_size: int = 32,
        seed: int = 0,
        num_samples: int | None = None,
        preload: bool | None = None,
    ) -> None:
        root = Path(path).expanduser()
        if not root.is_dir():
            raise _bad(root, f"{root} is not a directory")
        if image_size < 1:
            raise SpecError("image_size", image_size, "an integer >= 1")
        if num_samples is not None and num_samples < 1:
            raise SpecError("num_samples", num_samples, "an integer >= 1")
        class_dirs = sorted((d for d in root.iterdir() if d.is_dir()), key=lambda d: d.name)
        if not class_dirs:
            raise _bad(root, f"no class sub-directories in {root}")
        per_class: list[list[Path]] = []
        for d in class_dirs:
            files = sorted(
                (f for f in d.iterdir() if f.is_file() and f.suffix.lower() in IMAGE_SUFFIXES),
                key=lambda f: f.name,
            )
            if not files:
                raise _bad(root, f"class folder {d} has no image files")
            per_class.append(files)
        self.classes = [d.name for d in class_dirs]
        self.root = root
        self.files, labels = _round_robin(per_class, num_samples)
        self.labels = torch.tensor(labels, dtype=torch.long)
        super().__init__(len(self.files), len(self.classes), (3, image_size, image_size), seed)
        self._mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
        self._std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
        if preload is None:
            preload = len(self.files) * 3 * image_size * image_size <= _PRELOAD_BYTES
        self.images: Tensor | None = None
        if preload:
            self.images = torch.stack([load_image(f, image_size) for f in self.files])

    def samples(self, indices: Tensor) -> tuple[Tensor, Tensor]:
        if self.images is not None:
            raw = self.images[indices]
        else:
            side = self.image_shape[1]
            raw = torch.stack([load_image(self.files[i], side) for i in indices.tolist()])
        x = (raw.float().div_(255.0) - self._mean) / self._std
        return x, self.labels[indices]


def _round_robin(per_class: list[list[Path]], limit: int | None) -> tuple[list[Path], list[int]]:
    files: list[Path] = []
    labels: list[int] = []
    depth = max(len(c) for c in per_class)
    for j in range(depth):
        for label, members in enumerate(per_class):
            if j < len(members):
                files.append(members[j])
                labels.append(label)
    if limit is not None:
        files, labels = files[:limit], labels[:limit]
    return files, labels
