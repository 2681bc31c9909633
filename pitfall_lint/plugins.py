"""Discovery of the classes that the modules of a package contribute (rules, verify probes)."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from typing import TypeVar

T = TypeVar("T")


def subclasses_in(package: str, path: Iterable[str], base: type[T], skip: frozenset[str] = frozenset()) -> list[type[T]]:
    """Imports every module of the package, then returns every subclass of `base` defined so far."""
    for module in pkgutil.iter_modules(path):
        if module.name not in skip:
            importlib.import_module(f"{package}.{module.name}")
    found: list[type[T]] = []
    todo = list(base.__subclasses__())
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return found
