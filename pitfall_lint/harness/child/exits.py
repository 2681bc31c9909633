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
_INDEX_WORDS = ("gpu", "rank", "device", "seed", "local")  # an int that names one of several: 0 is always valid
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
        names = [n.strip() for n in required["names"].split(",")] if required else []
        emit("arguments-refused", message=message, usage=self.format_usage().strip(), required=names,
             made_up=_made_up_arguments(self, names))
        error(self, message)

    def parse_known_args(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> Any:
        parsed = parse(self, *args, **kwargs)
        bounds = [
            {"option": max(a.option_strings, key=len), "value": getattr(parsed[0], a.dest, None),
             "spellings": a.option_strings}
            for a in self._actions
            if a.option_strings and any(word in a.dest.lower() for word in _PROGRESS_WORDS)
        ]
        if bounds:
            emit("arguments", bounds=bounds)
        return parsed

    argparse.ArgumentParser.error = refused  # type: ignore[method-assign]
    argparse.ArgumentParser.parse_known_args = parse_known_args  # type: ignore[method-assign]


def _made_up_arguments(parser: argparse.ArgumentParser, names: list[str]) -> list[str]:
    """A command line giving the missing arguments `names` values of the right kind, from the parser's own
    declarations: the first choice, a small number for a count, the option's own name for a path or a word."""
    tokens: list[str] = []
    for action in parser._actions:
        if argparse._get_action_name(action) not in names:
            continue
        if action.option_strings:
            tokens.append(max(action.option_strings, key=len))
        if action.nargs != 0:
            tokens += [_plausible_value(action)] * (action.nargs if isinstance(action.nargs, int) else 1)
    return tokens


def _plausible_value(action: argparse.Action) -> str:
    if action.choices:
        return str(next(iter(action.choices)))
    if action.type is int:
        return "0" if any(word in action.dest.lower() for word in _INDEX_WORDS) else "2"
    if action.type is float:
        return "0.01"
    return action.dest.lower()


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
