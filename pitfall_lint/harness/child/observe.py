"""One way to run the user's code: the first real error and the exit recorded once."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from pitfall_lint.harness.child.events import emit, emit_error


@contextlib.contextmanager
def observed(where: str) -> Iterator[None]:
    try:
        yield
    except SystemExit as exit_request:
        code = exit_request.code
        emit("exit", status="ok" if code in (None, 0) else "exit", code=str(code))
        raise
    except BaseException as error:
        emit_error(error, where=where)
        emit("exit", status="error")
        raise
    emit("exit", status="ok")
