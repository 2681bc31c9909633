"""Each child process appends what it observed, as JSON lines, to a file of its own in the trace folder."""

from __future__ import annotations

import json
import os
import re
import sys
import time
import traceback
from functools import lru_cache
from typing import Any

from pitfall_lint.harness.child.start_methods import started_with

TRACE_DIR = "PITFALL_LINT_TRACE_DIR"
SCRIPT = "PITFALL_LINT_SCRIPT"
SCRIPT_AS_GIVEN = "PITFALL_LINT_SCRIPT_AS_GIVEN"  # the path as the user typed it, relative to the working folder
SCRATCH = "PITFALL_LINT_SCRATCH"  # verify's own folder for the run: redirected saves, synthetic dataset files
PROJECT = "PITFALL_LINT_PROJECT"  # the folder of the user's project: its files are "user code"
PROJECT_FLAT = "PITFALL_LINT_PROJECT_FLAT"  # "1": a folder without a project marker, whose files alone count
OVER_ONE_DEVICE = "PITFALL_LINT_OVER_ONE_DEVICE"  # "1": the control run, a DataParallel over the first device it lists
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>\S+)')
_HARNESS = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
_INSTALLED = ("site-packages", "dist-packages")


class VerifyLimit(Exception):
    """What verify itself cannot do with the user's code (shape a second input, a tensor subclass on virtual devices):
    reported as verify's limit, never as a failure of that code."""


def current_rank() -> int | None:
    # Never imports torch: a background thread importing it while the main thread does aborts the process.
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and getattr(dist, "is_initialized", None) and dist.is_available() and dist.is_initialized():
            return dist.get_rank()
    except Exception:
        pass
    rank = os.environ.get("RANK")
    return int(rank) if rank is not None and rank.isdigit() else None


def emit(event: str, **fields: Any) -> None:
    folder = os.environ.get(TRACE_DIR)
    if not folder:
        return
    record = {"event": event, "pid": os.getpid(), "rank": current_rank(), **fields}
    with open(os.path.join(folder, f"{os.getpid()}.jsonl"), "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record, default=str) + "\n")


def user_script() -> str:
    return os.path.realpath(os.environ.get(SCRIPT, ""))


@lru_cache(maxsize=4096)
def project_file(filename: str) -> str | None:
    """The real path of a file of the user's project (the script, its modules), or None for anything else."""
    if not filename or filename.startswith("<"):
        return None
    real = os.path.realpath(filename)
    if real == user_script():
        return real
    root = os.environ.get(PROJECT)
    if not root or not real.startswith(os.path.join(os.path.realpath(root), "")):
        return None
    if os.environ.get(PROJECT_FLAT) == "1" and os.path.dirname(real) != os.path.realpath(root):
        return None
    if real.startswith(_HARNESS + os.sep) or any(part in _INSTALLED for part in real.split(os.sep)):
        return None
    if sys.prefix != sys.base_prefix and real.startswith(os.path.join(os.path.realpath(sys.prefix), "")):
        return None  # the project's own virtual environment
    return real


def user_place() -> dict[str, Any]:
    """The innermost line of the user's project that led to the current call: {"file", "line"}, or empty."""
    frame = sys._getframe(1)
    while frame is not None:
        real = project_file(frame.f_code.co_filename)
        if real is not None:
            return {"file": real, "line": frame.f_lineno}
        frame = frame.f_back  # type: ignore[assignment]
    return {}


def project_frames(error: BaseException) -> list[dict[str, Any]]:
    """The frames of the user's project in an error's traceback, outermost first, also those that replicas
    carried as text (`Caught RuntimeError in replica 1 ...`)."""
    frames = [
        {"file": real, "line": f.lineno, "function": f.name, "code": f.line}
        for f in traceback.extract_tb(error.__traceback__)
        if (real := project_file(f.filename)) is not None
    ]
    for match in _FRAME.finditer(str(error)):
        real = project_file(match["file"])
        if real is not None:
            frames.append({"file": real, "line": int(match["line"]), "function": match["function"], "code": None})
    return frames


_reported: set[int] = set()


def emit_error(error: BaseException, where: str) -> None:
    """Records an error once, however many handlers see it on its way out."""
    if id(error) in _reported:
        return
    _reported.add(id(error))
    frames = project_frames(error)
    emit(
        "error",
        where=where,
        type=type(error).__name__,
        message=str(error),
        module=getattr(error, "name", None) if isinstance(error, ImportError) else None,
        limit=isinstance(error, VerifyLimit),
        user_frame=frames[-1] if frames else None,
        frames=frames,
        started_with=started_with(),
        traceback="".join(traceback.format_exception(error))[-4000:],
        time=time.time(),  # an error raised once verify began stopping the run is verify's doing
    )
