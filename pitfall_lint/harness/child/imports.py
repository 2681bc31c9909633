"""Calls made right after a module finishes importing, in whichever module imports it first."""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Callable
from typing import Any

_pending: dict[str, list[Callable[[Any], None]]] = {}


class _AfterImport(importlib.abc.MetaPathFinder):
    """Wraps the loader of a watched module; the callbacks leave the watch list only when the module is executed
    (a mere `find_spec` call, by whoever, consumes nothing)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name not in _pending:
            return None
        spec = _find(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        execute = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            execute(module)
            for callback in _pending.pop(name, []):
                try:
                    callback(module)
                except Exception as error:  # a patch of ours must never break the program's import
                    from pitfall_lint.harness.child.events import emit

                    emit("harness-warning", message=f"patching {name} failed: {type(error).__name__}: {error}")

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _find(name: str, path: Any) -> Any:
    """The spec the other finders give."""
    for finder in sys.meta_path:
        if isinstance(finder, _AfterImport):
            continue
        find = getattr(finder, "find_spec", None)
        spec = find(name, path) if find else None
        if spec is not None:
            return spec
    return None


_finder = _AfterImport()


def after_import(name: str, callback: Callable[[Any], None]) -> None:
    """`callback(module)` once `name` is imported (at once if it already is)."""
    if name in sys.modules:
        callback(sys.modules[name])
        return
    _pending.setdefault(name, []).append(callback)
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)
