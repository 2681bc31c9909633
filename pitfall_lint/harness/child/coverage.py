"""Which lines of the user's file ran, so that a verdict is only given for a line that executed."""

from __future__ import annotations

import atexit
import os
import sys
import threading
from types import FrameType
from typing import Any

from pitfall_lint.harness.child.events import emit


class LineRecorder:
    """Traces line events in the user's file only; frames of every other file return at once."""

    def __init__(self, script: str) -> None:
        self._script = os.path.realpath(script)
        self._files: dict[str, bool] = {}
        self.lines: set[int] = set()

    def _is_user_file(self, filename: str) -> bool:
        known = self._files.get(filename)
        if known is None:
            known = self._files[filename] = os.path.realpath(filename) == self._script
        return known

    def _on_line(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            self.lines.add(frame.f_lineno)
        return self._on_line

    def _on_call(self, frame: FrameType, event: str, arg: Any) -> Any:
        if self._is_user_file(frame.f_code.co_filename):
            self.lines.add(frame.f_lineno)
            return self._on_line
        return None

    def start(self) -> None:
        threading.settrace(self._on_call)
        sys.settrace(self._on_call)
        atexit.register(self.report)

    def report(self) -> None:
        """At exit: spawned workers and ranks record the lines they ran, not only the first process."""
        sys.settrace(None)
        threading.settrace(None)  # type: ignore[arg-type]
        if self.lines:
            emit("lines", file=self._script, lines=sorted(self.lines))
