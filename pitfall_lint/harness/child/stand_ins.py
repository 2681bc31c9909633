"""Synthetic stand-ins for the public datasets a script downloads, when their files are absent here.

`torchvision.datasets.CIFAR10(root, download=True)` on a machine whose network verify closed would fail
before the first batch. The class is kept (a subclass, so `isinstance` and subclassing still work): with
its files present it is the real dataset; without them it yields samples of the real kinds (PIL images
of the real size and mode, integer labels, waveforms), as many as the real split has, generated per
index and passed through the script's own transforms. Hugging Face's `load_dataset` of a text dataset that is
not cached gets rows of the real columns, as many as the real split has. A user's own dataset class is never touched.
"""

from __future__ import annotations

import inspect
import os
from dataclasses import dataclass
from typing import Any

from pitfall_lint.harness.child.events import emit, user_place
from pitfall_lint.harness.child.imports import after_import

NETWORK = "PITFALL_LINT_NETWORK"  # "loopback" (closed) or "host"


@dataclass(frozen=True)
class ImageSpec:
    size: tuple[int, int]  # height, width
    mode: str  # PIL mode: "RGB" or "L"
    classes: int
    lengths: dict[str, int]  # split -> samples
    split_argument: str = "train"  # "train" (a bool) or "split" (a name)
    labels_attribute: str = "targets"


_IMAGES = {
    "MNIST": ImageSpec((28, 28), "L", 10, {"train": 60000, "test": 10000}),
    "FashionMNIST": ImageSpec((28, 28), "L", 10, {"train": 60000, "test": 10000}),
    "KMNIST": ImageSpec((28, 28), "L", 10, {"train": 60000, "test": 10000}),
    "QMNIST": ImageSpec((28, 28), "L", 10, {"train": 60000, "test": 60000}),
    "EMNIST": ImageSpec((28, 28), "L", 47, {"train": 112800, "test": 18800}),
    "CIFAR10": ImageSpec((32, 32), "RGB", 10, {"train": 50000, "test": 10000}),
    "CIFAR100": ImageSpec((32, 32), "RGB", 100, {"train": 50000, "test": 10000}),
    "SVHN": ImageSpec((32, 32), "RGB", 10, {"train": 73257, "test": 26032, "extra": 531131}, "split", "labels"),
    "STL10": ImageSpec((96, 96), "RGB", 10, {"train": 5000, "test": 8000, "unlabeled": 100000}, "split", "labels"),
    "ImageNet": ImageSpec((224, 224), "RGB", 1000, {"train": 1281167, "val": 50000}, "split"),
}
# A folder of class folders that does not exist here: its size and classes cannot be known, so a small stand-in.
_FOLDER = ImageSpec((224, 224), "RGB", 10, {"train": 1000})
_FOLDERS = ("ImageFolder", "DatasetFolder")


@dataclass(frozen=True)
class AudioSpec:
    sample_rate: int
    seconds: float
    length: int
    item: str  # which tuple the dataset returns


_AUDIO = {
    "SPEECHCOMMANDS": AudioSpec(16000, 1.0, 84843, "speech_commands"),
    "LIBRISPEECH": AudioSpec(16000, 4.0, 28539, "librispeech"),
    "YESNO": AudioSpec(8000, 6.35, 60, "yesno"),
}
_WORDS = ("yes", "no", "up", "down", "left", "right", "on", "off", "stop", "go")


def _split_of(spec: ImageSpec, arguments: dict[str, Any]) -> str:
    if spec.split_argument == "split":
        return str(arguments.get("split", next(iter(spec.lengths))))
    return "train" if arguments.get("train", True) else "test"


def _image(spec: ImageSpec, index: int) -> Any:
    import torch

    generator = torch.Generator().manual_seed(index)
    channels = 3 if spec.mode == "RGB" else 1
    pixels = torch.randint(0, 256, (*spec.size, channels), dtype=torch.uint8, generator=generator)
    try:
        from PIL import Image
    except ImportError:
        return pixels.permute(2, 0, 1)  # no PIL, so no torchvision either: a uint8 CHW tensor
    return Image.frombytes(spec.mode, (spec.size[1], spec.size[0]), bytes(pixels.flatten().tolist()))


def _bound_arguments(original: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    try:
        bound = inspect.signature(original.__init__).bind(None, *args, **kwargs)
    except TypeError:
        return dict(kwargs)
    arguments = dict(bound.arguments)
    arguments.pop("self", None)
    arguments.update(arguments.pop("kwargs", {}))
    return arguments


def _network_closed() -> bool:
    return os.environ.get(NETWORK, "loopback") != "host"


def _image_stand_in(original: type, name: str, spec: ImageSpec) -> type:
    class StandIn(original):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            arguments = _bound_arguments(original, args, kwargs)
            asked = bool(arguments.get("download"))
            if asked and _network_closed():
                args, kwargs = (), {**arguments, "download": False}  # the files may be here already
            try:
                original.__init__(self, *args, **kwargs)
                self._pitfall_lint_spec = None
                return
            except (RuntimeError, FileNotFoundError, NotADirectoryError, OSError):
                pass  # not here: the stand-in
            self._pitfall_lint_spec = spec if name not in _FOLDERS else _FOLDER
            split = _split_of(self._pitfall_lint_spec, arguments) if name not in _FOLDERS else "train"
            self._pitfall_lint_length = self._pitfall_lint_spec.lengths.get(split, next(iter(self._pitfall_lint_spec.lengths.values())))
            labels = [i % self._pitfall_lint_spec.classes for i in range(self._pitfall_lint_length)]
            classes = [str(i) for i in range(self._pitfall_lint_spec.classes)]
            attributes = {
                "transform": arguments.get("transform"), "target_transform": arguments.get("target_transform"),
                "transforms": None, "root": arguments.get("root"), "classes": classes,
                "class_to_idx": {c: i for i, c in enumerate(classes)}, self._pitfall_lint_spec.labels_attribute: labels,
            }
            if name in _FOLDERS:
                attributes["samples"] = attributes["imgs"] = [(f"synthetic/{i}.jpg", label) for i, label in enumerate(labels)]
            for attribute, value in attributes.items():
                if not isinstance(getattr(type(self), attribute, None), property):  # MNIST derives class_to_idx
                    setattr(self, attribute, value)
            blocked = asked and _network_closed()
            size = "x".join(map(str, self._pitfall_lint_spec.size))
            where = user_place()
            at = f" at {where['file']}:{where['line']}" if where else ""
            emit("stand-in", dataset=name, split=split, blocked=blocked, **where, note=(
                f"{name}({self.root!r}){at}: its files are not here"
                + (" and the download was blocked" if blocked else "")
                + f"; verify used a synthetic stand-in of {self._pitfall_lint_length} {self._pitfall_lint_spec.mode} "
                f"images of {size} in {self._pitfall_lint_spec.classes} classes ({split} split)"
            ))

        def __len__(self) -> int:
            if self._pitfall_lint_spec is None:
                return super().__len__()
            return self._pitfall_lint_length

        def __getitem__(self, index: int) -> Any:
            if self._pitfall_lint_spec is None:
                return super().__getitem__(index)
            if not 0 <= index < self._pitfall_lint_length:
                raise IndexError(f"index {index} is out of range")
            image, target = _image(self._pitfall_lint_spec, index), index % self._pitfall_lint_spec.classes
            if self.transform is not None:
                image = self.transform(image)
            if self.target_transform is not None:
                target = self.target_transform(target)
            return image, target

        def __repr__(self) -> str:
            if self._pitfall_lint_spec is None:
                return super().__repr__()
            return f"Dataset {name} (pitfall-lint synthetic stand-in)\n    Number of datapoints: {self._pitfall_lint_length}"

    StandIn.__name__ = StandIn.__qualname__ = name
    StandIn.__module__ = original.__module__
    return StandIn


def _patch_torchvision(module: Any) -> None:
    for name, spec in {**_IMAGES, **{f: _FOLDER for f in _FOLDERS}}.items():
        original = getattr(module, name, None)
        if isinstance(original, type):
            setattr(module, name, _image_stand_in(original, name, spec))


def _waveform_item(spec: AudioSpec, index: int) -> tuple[Any, ...]:
    import torch

    generator = torch.Generator().manual_seed(index)
    waveform = torch.rand(1, int(spec.sample_rate * spec.seconds), generator=generator) * 2 - 1
    if spec.item == "speech_commands":
        return waveform, spec.sample_rate, _WORDS[index % len(_WORDS)], f"speaker{index % 100:03d}", index % 5
    if spec.item == "librispeech":
        return waveform, spec.sample_rate, "A SYNTHETIC TRANSCRIPT", index % 40, index % 7, index
    return waveform, spec.sample_rate, [int(b) for b in f"{index % 256:08b}"]


def _audio_stand_in(original: type, name: str, spec: AudioSpec) -> type:
    class StandIn(original):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            arguments = _bound_arguments(original, args, kwargs)
            asked = bool(arguments.get("download"))
            if asked and _network_closed():
                args, kwargs = (), {**arguments, "download": False}
            try:
                original.__init__(self, *args, **kwargs)
                self._pitfall_lint_spec = None
                return
            except (RuntimeError, FileNotFoundError, OSError):
                pass
            self._pitfall_lint_spec = spec
            where = user_place()
            emit("stand-in", dataset=name, split=str(arguments.get("subset") or arguments.get("url") or "default"),
                 blocked=asked and _network_closed(), **where,
                 note=f"{name}: its files are not here" + (" and the download was blocked" if asked and _network_closed() else "")
                 + f"; verify used a synthetic stand-in of {spec.length} waveforms of {spec.seconds:g} s at {spec.sample_rate} Hz")

        def __len__(self) -> int:
            return super().__len__() if self._pitfall_lint_spec is None else self._pitfall_lint_spec.length

        def __getitem__(self, index: int) -> Any:
            if self._pitfall_lint_spec is None:
                return super().__getitem__(index)
            if not 0 <= index < self._pitfall_lint_spec.length:
                raise IndexError(f"index {index} is out of range")
            return _waveform_item(self._pitfall_lint_spec, index)

    StandIn.__name__ = StandIn.__qualname__ = name
    StandIn.__module__ = original.__module__
    return StandIn


def _patch_torchaudio(module: Any) -> None:
    for name, spec in _AUDIO.items():
        original = getattr(module, name, None)
        if isinstance(original, type):
            setattr(module, name, _audio_stand_in(original, name, spec))




@dataclass(frozen=True)
class TextSpec:
    columns: dict[str, str]  # column -> "text" or "label:N" (N classes) or "index"
    lengths: dict[str, int]


# Hugging Face datasets by name (and configuration): text datasets only, whose rows are cheap to make.
_HUB = {
    ("imdb", None): TextSpec({"text": "text", "label": "label:2"}, {"train": 25000, "test": 25000, "unsupervised": 50000}),
    ("ag_news", None): TextSpec({"text": "text", "label": "label:4"}, {"train": 120000, "test": 7600}),
    ("rotten_tomatoes", None): TextSpec({"text": "text", "label": "label:2"}, {"train": 8530, "validation": 1066, "test": 1066}),
    ("glue", "sst2"): TextSpec({"sentence": "text", "label": "label:2", "idx": "index"},
                               {"train": 67349, "validation": 872, "test": 1821}),
    ("glue", "mrpc"): TextSpec({"sentence1": "text", "sentence2": "text", "label": "label:2", "idx": "index"},
                               {"train": 3668, "validation": 408, "test": 1725}),
    ("glue", "cola"): TextSpec({"sentence": "text", "label": "label:2", "idx": "index"},
                               {"train": 8551, "validation": 1043, "test": 1063}),
    ("wikitext", "wikitext-2-raw-v1"): TextSpec({"text": "text"}, {"train": 36718, "validation": 3760, "test": 4358}),
    ("wikitext", "wikitext-2-v1"): TextSpec({"text": "text"}, {"train": 36718, "validation": 3760, "test": 4358}),
    ("wikitext", "wikitext-103-raw-v1"): TextSpec({"text": "text"}, {"train": 1801350, "validation": 3760, "test": 4358}),
}
_VOCABULARY = ("the", "model", "trains", "on", "every", "rank", "and", "a", "batch", "of", "words", "is", "fine", "not")


def _column(kind: str, length: int) -> list[Any]:
    if kind == "index":
        return list(range(length))
    if kind.startswith("label:"):
        classes = int(kind.split(":")[1])
        return [i % classes for i in range(length)]
    return [" ".join(_VOCABULARY[(i * 7 + j) % len(_VOCABULARY)] for j in range(8 + i % 24)) for i in range(length)]


def _hub_name(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def _patch_hub_datasets(module: Any) -> None:
    if not all(hasattr(module, name) for name in ("load_dataset", "Dataset", "DatasetDict")):
        return  # a project's own module named `datasets`
    original = module.load_dataset

    def load_dataset(path: str, name: str | None = None, *args: Any, **kwargs: Any) -> Any:
        try:
            return original(path, name, *args, **kwargs)
        except Exception as error:  # not cached here, and the hub cannot be reached
            spec = _HUB.get((_hub_name(path), name)) or _HUB.get((_hub_name(path), None))
            if spec is None or not _network_closed():
                raise
            reason = f"{type(error).__name__}"
        split = kwargs.get("split")
        splits = {s: n for s, n in spec.lengths.items() if split is None or s == split}
        if not splits:
            raise ValueError(f'Unknown split "{split}". Should be one of {list(spec.lengths)}.')
        made = {s: module.Dataset.from_dict({c: _column(k, n) for c, k in spec.columns.items()}) for s, n in splits.items()}
        where = user_place()
        at = f" at {where['file']}:{where['line']}" if where else ""
        sizes = ", ".join(f"{s} {n}" for s, n in splits.items())
        emit("stand-in", dataset=f"{path}/{name}" if name else path, split=str(split), blocked=True, **where,
             note=f"load_dataset({path!r}{', ' + repr(name) if name else ''}){at}: not cached here and the hub blocked "
                  f"({reason}); verify used a synthetic stand-in with the columns {', '.join(spec.columns)} ({sizes} rows)")
        return made[split] if split is not None else module.DatasetDict(made)

    module.load_dataset = load_dataset


def install() -> None:
    after_import("torchvision.datasets", _patch_torchvision)
    after_import("torchaudio.datasets", _patch_torchaudio)
    after_import("datasets", _patch_hub_datasets)
