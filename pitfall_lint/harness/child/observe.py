"""One way to run the user's code: the first real error and the exit recorded once."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from pitfall_lint.harness.child.events import emit, emit_error, user_frame


@contextlib.contextmanager
def observed(where: str) -> Iterator[None]:
    try:
        yield
    except SystemExit as exit_request:
        code = exit_request.code
        failed = code not in (None, 0)  # `parser.error()` and the like: where the script asked to stop
        emit("exit", status="exit" if failed else "ok", code=str(code), user_frame=user_frame(exit_request) if failed else None)
        raise
    except BaseException as error:
        emit_error(error, where=where)
        emit("exit", status="error")
        raise
    emit("exit", status="ok")
