"""Ctrl-C held back through a step that must not be cut in two."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator


@contextlib.contextmanager
def ctrl_c_held_back() -> Iterator[None]:
    """SIGINT waits (blocked, not lost) until the step is done, then interrupts the run as it would have: a
    KeyboardInterrupt may otherwise land between two statements that only make sense together."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
