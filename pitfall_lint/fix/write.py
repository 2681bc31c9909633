"""Writing a fixed file: atomically, with its mode, and never over a file that changed since it was read."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile

from pitfall_lint.interrupts import ctrl_c_held_back


class ChangedOnDisk(Exception):
    """The file no longer holds what was fixed: someone else wrote it meanwhile."""


# Ctrl-C waits for the write: landing between the temporary file's creation and the `try` that removes it, it left
# the temporary file behind.
@ctrl_c_held_back()
def replace_if_unchanged(path: str, expected: bytes, content: bytes) -> None:
    """A temporary file beside the target, then a rename: an interrupted run leaves the old file or the new one.
    A file its user may not write is left alone (PermissionError), as a read-only folder leaves it."""
    target = os.path.realpath(path)  # a symlink keeps pointing at the file it names
    mode = stat.S_IMODE(os.stat(target).st_mode)
    # The rename needs only the folder's write permission: it would replace a file its user may not write. Root
    # passes every os.access test, so there the owner's write bit says whether the file was protected (chmod a-w).
    if not mode & stat.S_IWUSR or not os.access(target, os.W_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)
    descriptor, temporary = tempfile.mkstemp(dir=os.path.dirname(target), prefix=f".{os.path.basename(target)}.", suffix=".pitfall-lint")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        with open(target, "rb") as handle:
            if handle.read() != expected:
                raise ChangedOnDisk(path)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
