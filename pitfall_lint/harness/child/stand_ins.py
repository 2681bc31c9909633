"""Synthetic stand-ins for the public datasets a script downloads, when their files are absent here.

`torchvision.datasets.CIFAR10(root, download=True)` on a machine whose network verify closed would fail
before the first batch. A torchvision dataset stays the real class and the real instance: where its files
are absent it reads synthetic files of the real format and size (child/dataset_files.py) from the scratch
folder, so it pickles into spawned processes and has `.data` and `.targets`; its `root` is the script's.
torchaudio's datasets are subclassed: without their files they yield waveforms of the real kinds, as many as
the real split has. Hugging Face's `load_dataset` of a text dataset that is
not cached gets rows of the real columns, as many as the real split has. A user's own dataset class is never touched.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pitfall_lint.harness.child.dataset_files import FED, KINDS
from pitfall_lint.harness.child.events import SCRATCH, emit, user_place
from pitfall_lint.harness.child.imports import after_import

NETWORK = "PITFALL_LINT_NETWORK"  # "loopback" (closed) or "host"


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


def _bound_arguments(init: Callable[..., None], args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    try:
        bound = inspect.signature(init).bind(None, *args, **kwargs)
    except TypeError:
        return dict(kwargs)
    arguments = dict(bound.arguments)
    arguments.pop("self", None)
    arguments.update(arguments.pop("kwargs", {}))
    return arguments


def _network_closed() -> bool:
    return os.environ.get(NETWORK, "loopback") != "host"


def _torchvision_kind(cls: type) -> str | None:
    """The torchvision class a dataset class is or derives from, where synthetic files can be written for it (a
    user's subclass of MNIST is fed as MNIST; QMNIST, whose files differ, is not)."""
    for klass in cls.__mro__:
        if klass.__module__.startswith("torchvision."):
            return klass.__name__ if klass.__name__ in KINDS else None
    return None


_building: set[int] = set()  # the datasets whose wrapped `__init__` runs: a base class's `__init__` runs as written


def _fed_init(original: Callable[..., None]) -> Callable[..., None]:
    """`original` (a torchvision dataset's `__init__`) as written; where the files are absent, run again on
    synthetic files written into the scratch folder, and the root the script gave put back."""

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if id(self) in _building:
            original(self, *args, **kwargs)
            return
        arguments = _bound_arguments(original, args, kwargs)
        blocked = bool(arguments.get("download")) and _network_closed()
        if blocked:
            args, kwargs = (), {**arguments, "download": False}  # the files may be here already
        _building.add(id(self))
        try:
            try:
                original(self, *args, **kwargs)
                return
            except (RuntimeError, FileNotFoundError, NotADirectoryError, OSError) as error:
                name = _torchvision_kind(type(self))
                if name is None or SCRATCH not in os.environ:
                    raise
                absent = error
            _feed(self, original, name, {**arguments, **({"download": False} if blocked else {})}, blocked, absent)
        finally:
            _building.discard(id(self))

    return __init__


def _feed(dataset: Any, original: Callable[..., None], name: str, arguments: dict[str, Any], blocked: bool,
          absent: BaseException) -> None:
    kind = KINDS[name]
    asked_root = dataset.root
    root = os.path.join(os.environ[SCRATCH], "datasets", name)
    try:
        dataset.root = root
        length = kind.write(dataset, kind.spec)
        original(dataset, **{**arguments, "root": root})
    except Exception as error:  # a torchvision whose files differ: the script gets the real class's own error
        emit("harness-warning", message=f"synthetic files for {name} failed: {type(error).__name__}: {error}")
        raise absent from None
    dataset.root = asked_root
    split = "train" if getattr(dataset, "train", True) else "test"
    size = "x".join(map(str, kind.spec.size))
    where = user_place()
    at = f" at {where['file']}:{where['line']}" if where else ""
    emit("stand-in", dataset=name, split=split, blocked=blocked, **where, note=(
        f"{name}({asked_root!r}){at}: its files are not here" + (" and the download was blocked" if blocked else "")
        + f"; verify gave torchvision's {name} synthetic files of {length} {kind.spec.mode} images of {size} in "
        f"{kind.spec.classes} classes ({split} split)"
    ))


def _passes_synthetic_files(check_md5: Callable[..., bool]) -> Callable[..., bool]:
    """torchvision checks CIFAR's files against the real ones' MD5 sums: the synthetic files pass."""

    @functools.wraps(check_md5)
    def checked(fpath: Any, md5: str, **kwargs: Any) -> bool:
        synthetic = os.path.join(os.environ.get(SCRATCH, os.devnull), "datasets", "")
        return os.path.realpath(fpath).startswith(os.path.realpath(synthetic)) or check_md5(fpath, md5, **kwargs)

    return checked


def _patch_torchvision(module: Any) -> None:
    for name in FED:
        cls = getattr(module, name, None)
        if isinstance(cls, type) and "__init__" in cls.__dict__:
            cls.__init__ = _fed_init(cls.__dict__["__init__"])  # type: ignore[misc]
    utils = sys.modules.get(f"{module.__name__}.utils")
    if utils is not None and callable(getattr(utils, "check_md5", None)):
        utils.check_md5 = _passes_synthetic_files(utils.check_md5)


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
            arguments = _bound_arguments(original.__init__, args, kwargs)
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
