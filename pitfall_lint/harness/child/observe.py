"""One way to run the user's code: the first real error and the exit recorded once."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from pitfall_lint.harness.child.events import emit, emit_error
from pitfall_lint.harness.child.exits import exit_place


@contextlib.contextmanager
def observed(where: str) -> Iterator[None]:
    try:
        yield
    except SystemExit as request:
        code = request.code
        message = None if code is None or isinstance(code, int) else str(code)
        status = 0 if code is None else code if isinstance(code, int) else 1
        emit("exit", status="exit", code=status, message=message, place=exit_place(request))
        raise
    except BaseException as error:
        emit_error(error, where=where)
        emit("exit", status="error")
        raise
    emit("exit", status="ok")
