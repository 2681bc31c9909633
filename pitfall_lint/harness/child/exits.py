"""How a process of the run ended when it did not fail: where it exited and with what message, the command
line it refused, and, when it was stopped, where each of its threads stood."""

from __future__ import annotations

import argparse
import faulthandler
import os
import re
import signal
import traceback
from typing import Any, NoReturn

from pitfall_lint.harness.child.events import TRACE_DIR, emit, project_file

_REQUIRED = re.compile(r"the following arguments are required: (?P<names>.+)")
_PROGRESS_WORDS = ("epoch", "iter", "step", "batch")
_stacks: list[Any] = []  # the open file faulthandler writes into must stay open


def exit_place(request: SystemExit) -> dict[str, Any]:
    """The innermost line of the project on the way out of a SystemExit: where the program decided to stop."""
    frames = [f for f in traceback.extract_tb(request.__traceback__) if project_file(f.filename) is not None]
    if not frames:
        return {}
    last = frames[-1]
    return {"file": project_file(last.filename), "line": last.lineno, "function": last.name, "code": last.line}


def _watch_arguments() -> None:
    """argparse's own error and usage, and the options that bound the work (epochs, iterations)."""
    error, parse = argparse.ArgumentParser.error, argparse.ArgumentParser.parse_known_args

    def refused(self: argparse.ArgumentParser, message: str) -> NoReturn:
        required = _REQUIRED.search(message)
        emit("arguments-refused", message=message, usage=self.format_usage().strip(),
             required=[n.strip() for n in required["names"].split(",")] if required else [])
        error(self, message)

    def parse_known_args(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> Any:
        parsed = parse(self, *args, **kwargs)
        bounds = [
            {"option": max(a.option_strings, key=len), "value": getattr(parsed[0], a.dest, None)}
            for a in self._actions
            if a.option_strings and any(word in a.dest.lower() for word in _PROGRESS_WORDS)
        ]
        if bounds:
            emit("arguments", bounds=bounds)
        return parsed

    argparse.ArgumentParser.error = refused  # type: ignore[method-assign]
    argparse.ArgumentParser.parse_known_args = parse_known_args  # type: ignore[method-assign]


def _dump_stacks_on_termination() -> None:
    """When the run is stopped (timeout), every process writes where its threads were, even inside C++ waits; so does
    a process that crashes in native code (SIGSEGV, SIGABRT, ...), which leaves no Python error behind."""
    folder = os.environ.get(TRACE_DIR)
    if not folder:
        return
    handle = open(os.path.join(folder, f"{os.getpid()}.stacks"), "w")  # noqa: SIM115 (kept open for the handler)
    _stacks[:] = [handle]
    faulthandler.enable(file=handle, all_threads=True)
    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        faulthandler.register(signal.SIGTERM, file=handle, all_threads=True, chain=True)


def watch() -> None:
    _watch_arguments()
    _dump_stacks_on_termination()
    os.register_at_fork(after_in_child=_dump_stacks_on_termination)  # a forked worker writes a file of its own
