"""Which lines of the user's project ran, so that a verdict is only given for a line that executed."""

from __future__ import annotations

import atexit
import builtins
import importlib.machinery
import os
import sys
import threading
import time
from collections import defaultdict
from types import FrameType
from typing import Any

from pitfall_lint.harness.child.events import emit, project_file

_FLUSH_SECONDS = 1.0


def _origin(name: str) -> str | None:
    """Where a top-level module would come from, looked up on sys.path without running any import hook."""
    try:
        spec = importlib.machinery.PathFinder.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.origin is None and spec.submodule_search_locations:  # a namespace package: where its folder is
        return os.path.join(list(spec.submodule_search_locations)[0], "__init__.py")
    return spec.origin


class LineRecorder:
    """Traces line events in the project's files only; frames of every other file return at once."""

    def __init__(self) -> None:
        self.lines: dict[str, set[int]] = defaultdict(set)

    def _on_call(self, frame: FrameType, event: str, arg: Any) -> Any:
        real = project_file(frame.f_code.co_filename)
        if real is None:
            return None
        lines = self.lines[real]
        lines.add(frame.f_lineno)

        def on_line(frame: FrameType, event: str, arg: Any) -> Any:
            if event == "line":
                lines.add(frame.f_lineno)
            return on_line

        return on_line

    def start(self) -> None:
        threading.settrace(self._on_call)
        sys.settrace(self._on_call)
        self._untraced_imports()
        atexit.register(self.report)
        self._start_flushing()
        os.register_at_fork(after_in_child=self._in_forked_child)

    def _untraced_imports(self) -> None:
        """Importing an installed package (torch imports about 2,000 modules, torch._dynamo 800 more when DDP is
        built) runs no line of the project: tracing its calls would cost seconds per process."""
        original = builtins.__import__
        installed: dict[str, bool] = {}

        def is_installed(name: str) -> bool:
            top = name.partition(".")[0]
            known = installed.get(top)
            if known is None:
                module = sys.modules.get(top)
                origin = getattr(module, "__file__", None) if module is not None else _origin(top)
                if module is not None and origin is None and getattr(module, "__path__", None):
                    origin = os.path.join(list(module.__path__)[0], "__init__.py")
                known = installed[top] = origin is None or project_file(origin) is None
            return known

        def untraced_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
            if level or sys.gettrace() is None or not is_installed(name):
                return original(name, globals, locals, fromlist, level)
            sys.settrace(None)
            try:
                return original(name, globals, locals, fromlist, level)
            finally:
                sys.settrace(self._on_call)

        builtins.__import__ = untraced_import

    def _start_flushing(self) -> None:
        threading.Thread(target=self._flush_every_second, daemon=True, name="pitfall-lint-coverage").start()

    def _in_forked_child(self) -> None:
        """A forked worker (multiprocessing's default on Linux) ends with os._exit, past atexit: its own flusher, and
        a finalizer that multiprocessing runs before that exit."""
        self._start_flushing()
        from multiprocessing import util

        util.Finalize(None, self.report, exitpriority=0)

    def _flush_every_second(self) -> None:
        """A process killed at the timeout runs no atexit: what it ran is written as it goes."""
        sizes: dict[str, int] = {}
        while True:
            time.sleep(_FLUSH_SECONDS)
            for file, lines in list(self.lines.items()):
                if len(lines) != sizes.get(file):
                    sizes[file] = len(lines)
                    emit("lines", file=file, lines=sorted(list(lines)))

    def report(self) -> None:
        """At exit: spawned workers and ranks record the lines they ran, not only the first process."""
        sys.settrace(None)
        threading.settrace(None)  # type: ignore[arg-type]
        for file, lines in list(self.lines.items()):
            if lines:
                emit("lines", file=file, lines=sorted(list(lines)))
