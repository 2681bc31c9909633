"""Synthetic files in the formats torchvision's own dataset classes read (MNIST's idx files, CIFAR's pickled
batches, a folder of class folders), written into verify's scratch folder.

A dataset whose files are absent is then the real class reading real-format files: it pickles into `mp.spawn`
and DataLoader workers, and has every attribute (`.data`, `.targets`, `.classes`) the real one has. Each writer
takes the half-built instance (its root already pointed at the scratch folder) and writes what it will read: the
files of the split it asked for with content, any other file it checks for empty, to be filled if asked for later.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ImageSpec:
    size: tuple[int, int]  # height, width
    mode: str  # PIL mode: "RGB" or "L"
    classes: int
    lengths: dict[str, int]  # split -> samples

    @property
    def channels(self) -> int:
        return 3 if self.mode == "RGB" else 1


def _pixels(spec: ImageSpec, count: int, seed: int) -> bytes:
    import torch

    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (count * spec.size[0] * spec.size[1] * spec.channels,), dtype=torch.uint8,
                         generator=generator).numpy().tobytes()


def _labels(spec: ImageSpec, count: int) -> list[int]:
    return [i % spec.classes for i in range(count)]


def _write(path: str, content: Callable[[], bytes] | None) -> None:
    """Writes `content()` to `path` unless a file with content is there; an absent `content` leaves an empty file
    where none is. Atomic, so ranks building the same dataset at once read whole files."""
    if os.path.exists(path) and (content is None or os.path.getsize(path) > 0):
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    partial = f"{path}.{os.getpid()}.partial"
    with open(partial, "wb") as handle:
        handle.write(content() if content is not None else b"")
    os.replace(partial, path)


def _idx(dimensions: tuple[int, ...], body: bytes) -> bytes:
    """The big-endian idx format of LeCun's MNIST files: unsigned bytes, so type code 8."""
    header = bytes([0, 0, 8, len(dimensions)]) + b"".join(d.to_bytes(4, "big") for d in dimensions)
    return header + body


def _mnist(dataset: Any, spec: ImageSpec) -> int:
    """MNIST, FashionMNIST, KMNIST (every file of `resources` checked), EMNIST (the split's two files)."""
    split = "train" if dataset.train else "test"
    if hasattr(type(dataset), "images_file"):  # EMNIST names the split's files itself
        files = [dataset.images_file, dataset.labels_file]
    else:
        files = [os.path.join(dataset.raw_folder, os.path.splitext(os.path.basename(url))[0]) for url, _ in dataset.resources]
    length = spec.lengths[split]
    for path in files:
        name = os.path.basename(path)
        asked = name.startswith("train" if dataset.train else "t10k") or f"-{split}-" in name
        if "-images-" in name:
            _write(path, (lambda: _idx((length, *spec.size), _pixels(spec, length, 0))) if asked else None)
        else:
            _write(path, (lambda: _idx((length,), bytes(_labels(spec, length)))) if asked else None)
    return length


def _cifar(dataset: Any, spec: ImageSpec) -> int:
    """CIFAR10 and CIFAR100: the split's pickled batches (the other split's files empty) and the meta file."""
    import numpy as np

    folder = os.path.join(dataset.root, dataset.base_folder)
    asked, other = (dataset.train_list, dataset.test_list) if dataset.train else (dataset.test_list, dataset.train_list)
    length = spec.lengths["train" if dataset.train else "test"]
    per_file = length // len(asked)
    labels_key = "labels" if spec.classes == 10 else "fine_labels"

    def batch(seed: int) -> bytes:
        data = np.frombuffer(_pixels(spec, per_file, seed), dtype=np.uint8).reshape(per_file, -1)
        return pickle.dumps({"data": data, labels_key: _labels(spec, per_file)})

    for seed, (name, _) in enumerate(asked):
        _write(os.path.join(folder, name), lambda seed=seed: batch(seed))  # type: ignore[misc]
    for name, _ in other:
        _write(os.path.join(folder, name), None)
    names = [f"class{i}" for i in range(spec.classes)]
    _write(os.path.join(folder, dataset.meta["filename"]), lambda: pickle.dumps({dataset.meta["key"]: names}))
    return per_file * len(asked)


def _image_folder(dataset: Any, spec: ImageSpec) -> int:
    """A folder of class folders: one JPEG per class, linked under every file name of that class."""
    from PIL import Image

    length = spec.lengths["train"]
    for label in range(spec.classes):
        folder = os.path.join(dataset.root, f"class{label}")
        first = os.path.join(folder, "0.jpg")
        if not os.path.exists(first):
            os.makedirs(folder, exist_ok=True)
            partial = f"{first}.{os.getpid()}.partial.jpg"
            Image.frombytes(spec.mode, spec.size[::-1], _pixels(spec, 1, label)).save(partial)
            os.replace(partial, first)
        for index in range(1, length // spec.classes):
            path = os.path.join(folder, f"{index}.jpg")
            if not os.path.exists(path):
                try:
                    os.link(first, path)
                except FileExistsError:  # another rank was faster
                    pass
    return length // spec.classes * spec.classes


@dataclass(frozen=True)
class Kind:
    spec: ImageSpec
    write: Callable[[Any, ImageSpec], int]  # writes the files; returns how many samples the split has


_MNIST = {"train": 60000, "test": 10000}
_CIFAR = {"train": 50000, "test": 10000}
KINDS = {
    "MNIST": Kind(ImageSpec((28, 28), "L", 10, _MNIST), _mnist),
    "FashionMNIST": Kind(ImageSpec((28, 28), "L", 10, _MNIST), _mnist),
    "KMNIST": Kind(ImageSpec((28, 28), "L", 10, _MNIST), _mnist),
    "EMNIST": Kind(ImageSpec((28, 28), "L", 47, {"train": 112800, "test": 18800}), _mnist),
    "CIFAR10": Kind(ImageSpec((32, 32), "RGB", 10, _CIFAR), _cifar),
    "CIFAR100": Kind(ImageSpec((32, 32), "RGB", 100, _CIFAR), _cifar),
    # A folder that is not here: its size and classes cannot be known, so a small one.
    "ImageFolder": Kind(ImageSpec((224, 224), "RGB", 10, {"train": 1000}), _image_folder),
}
# The classes whose `__init__` is wrapped: the others above are built by one of these.
FED = ("MNIST", "CIFAR10", "ImageFolder")
