"""The script run with another default start method, as on another platform or Python; and how multiprocessing
started the current process."""

from __future__ import annotations

import os
import subprocess
import sys

# The default start methods that import the main module again in every child: spawn on macOS and Windows,
# forkserver on Linux from Python 3.14.
RE_IMPORTING = ("spawn", "forkserver")
SCRIPTS = "PITFALL_LINT_START_METHOD_SCRIPTS"  # the scripts to run once with each of them as the default (os.pathsep)
START_METHOD = "PITFALL_LINT_START_METHOD"  # the default start method of this run of the script


def under_each(script: str) -> bool:
    """Whether the script is to run once per re-importing start method; asked once, by the first process only."""
    listed = os.environ.pop(SCRIPTS, "")
    real = os.path.realpath(script)
    return any(os.path.realpath(path) == real for path in listed.split(os.pathsep) if path)


def run_under_each(entry: str, argv: list[str]) -> int:
    """`python -m entry ARGV` once per re-importing start method, each made the default: the first failure's status,
    else 0."""
    status = 0
    for method in RE_IMPORTING:
        completed = subprocess.run([sys.executable, "-m", entry, *argv], env={**os.environ, START_METHOD: method},
                                   check=False)
        status = status or completed.returncode
    return status


def make_default(method: str) -> None:
    """The platform's default start method becomes `method`, as it is elsewhere: a script that picks its own with
    `set_start_method` may still do so (it could not after a `set_start_method` of ours)."""
    import multiprocessing
    import multiprocessing.context

    multiprocessing.context._default_context._default_context = multiprocessing.get_context(method)  # type: ignore[attr-defined]


def started_with() -> str | None:
    """`spawn` for a process multiprocessing started as a fresh interpreter, `forkserver` for one forked by the fork
    server (or the server itself); None for the first process and for forked ones (they share its command line)."""
    command = getattr(sys, "orig_argv", sys.argv)
    if any("multiprocessing.forkserver" in part for part in command):
        return "forkserver"
    return "spawn" if "--multiprocessing-fork" in command else None
