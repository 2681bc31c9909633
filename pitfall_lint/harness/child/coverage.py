"""Which lines of the user's project ran, so that a verdict is only given for a line that executed."""

from __future__ import annotations

import atexit
import sys
import threading
import time
from collections import defaultdict
from types import FrameType
from typing import Any

from pitfall_lint.harness.child.events import emit, project_file

_FLUSH_SECONDS = 1.0


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
        atexit.register(self.report)
        threading.Thread(target=self._flush_every_second, daemon=True, name="pitfall-lint-coverage").start()

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
