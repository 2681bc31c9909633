"""Each child process appends what it observed, as JSON lines, to a file of its own in the trace folder."""

from __future__ import annotations

import json
import os
import re
import traceback
from typing import Any

TRACE_DIR = "PITFALL_LINT_TRACE_DIR"
SCRIPT = "PITFALL_LINT_SCRIPT"
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>\S+)')


def current_rank() -> int | None:
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
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


def user_line() -> int | None:
    """The line of the user's file that led to the current call."""
    script = user_script()
    for frame in reversed(traceback.extract_stack()):
        if os.path.realpath(frame.filename) == script:
            return frame.lineno
    return None


def user_frame(error: BaseException) -> dict[str, Any] | None:
    """The innermost frame in the user's file, also inside tracebacks that replicas carried as text."""
    script = user_script()
    frames = [
        {"file": f.filename, "line": f.lineno, "function": f.name, "code": f.line}
        for f in traceback.extract_tb(error.__traceback__)
        if os.path.realpath(f.filename) == script
    ]
    for match in _FRAME.finditer(str(error)):
        if os.path.realpath(match["file"]) == script:
            frames.append({"file": match["file"], "line": int(match["line"]), "function": match["function"], "code": None})
    return frames[-1] if frames else None


_reported: set[int] = set()


def emit_error(error: BaseException, where: str) -> None:
    """Records an error once, however many handlers see it on its way out."""
    if id(error) in _reported:
        return
    _reported.add(id(error))
    emit(
        "error",
        where=where,
        type=type(error).__name__,
        message=str(error),
        user_frame=user_frame(error),
        traceback="".join(traceback.format_exception(error))[-4000:],
    )
