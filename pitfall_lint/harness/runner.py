"""Run a child command so that it can lose nothing and leave nothing behind.

Lessons from the feasibility study: output goes to a file (an escaped grandchild holding a pipe once
blocked a runner for 860 s); every child gets its own session; on timeout or Ctrl-C the whole group
is terminated, then killed; and as a child subreaper we find and kill descendants that escaped the
group (setsid, double fork). Passing runs get the hard timeout too: a gloo teardown can hang.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import pty
import shutil
import signal
import struct
import subprocess
import tempfile
import termios
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

_PR_SET_CHILD_SUBREAPER = 36
_GRACE_SECONDS = 3.0
_POLL_SECONDS = 0.25
_END_OF_INPUT = b"\x04" * 64  # Ctrl-D: each read of the terminal ends at once, as a read of /dev/null did


@dataclass(frozen=True)
class RunOutcome:
    returncode: int | None
    timed_out: bool
    interrupted: bool
    stopped: str | None  # why the run was stopped before its end, when something made waiting pointless
    stopping_since: float | None  # time.time() when verify began stopping the run (its timeout, a stop, Ctrl-C)
    seconds: float
    output: str
    leftovers: tuple[int, ...]  # processes still alive after the clean-up: empty unless something defied SIGKILL


def _become_subreaper() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the process group alone has to do


def _descendants(root: int) -> list[int]:
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as handle:
                    children = [int(c) for c in handle.read().split()]
                found += children
                todo += children
        except OSError:
            continue
    return found


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def _kill_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _clean_up_descendants() -> None:
    for _ in range(3):
        alive = [p for p in _descendants(os.getpid()) if not _is_zombie(p)]
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
        if not alive:
            return
        time.sleep(0.1)


@contextlib.contextmanager
def _terminal() -> Iterator[int]:
    """A pseudo-terminal the size of verify's own (80x24 without one), for the child's standard input: a script
    started from a shell has one, and `stty size` or a progress bar asks it for its width. Nobody types there: a read
    ends at once, as it did from /dev/null. Without pseudo-terminals (no /dev/pts), /dev/null it is."""
    try:
        master, slave = pty.openpty()
    except OSError:
        yield subprocess.DEVNULL
        return
    try:
        columns, lines = shutil.get_terminal_size()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))
        os.write(master, _END_OF_INPUT)
        yield slave
    finally:
        os.close(slave)
        os.close(master)


def live_descendants() -> list[int]:
    """Processes still running below this one (zombies aside): empty after every run."""
    return [p for p in _descendants(os.getpid()) if not _is_zombie(p)]


def run_guarded(
    command: Sequence[str],
    *,
    timeout: float,
    env: dict[str, str],
    cwd: str,
    watch: Callable[[], str | None] = lambda: None,
) -> RunOutcome:
    """Runs the command to its end, its timeout, Ctrl-C, or until `watch` (called four times a second) gives a
    reason to stop it early."""
    _become_subreaper()
    started = time.monotonic()
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace") as log, _terminal() as terminal:
        process = subprocess.Popen(
            list(command), stdout=log, stderr=subprocess.STDOUT, stdin=terminal, env=env, cwd=cwd,
            start_new_session=True,
        )
        timed_out = interrupted = False
        stopped: str | None = None
        stopping_since: float | None = None
        try:
            while process.poll() is None:
                if time.monotonic() - started > timeout:
                    timed_out = True
                    break
                stopped = watch()
                if stopped:
                    break
                try:
                    process.wait(timeout=_POLL_SECONDS)
                except subprocess.TimeoutExpired:
                    pass
        except KeyboardInterrupt:
            interrupted = True
        if timed_out or interrupted or stopped:
            stopping_since = time.time()
            _kill_group(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                pass
        _kill_group(process.pid, signal.SIGKILL)
        process.wait()
        _clean_up_descendants()
        log.seek(0)
        output = log.read()
    return RunOutcome(
        returncode=None if timed_out or stopped else process.returncode,
        timed_out=timed_out,
        interrupted=interrupted,
        stopped=stopped,
        stopping_since=stopping_since,
        seconds=time.monotonic() - started,
        output=output,
        leftovers=tuple(live_descendants()),
    )
