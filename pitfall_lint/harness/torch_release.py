"""Which torch the runs use: some failures a probe waits for exist only from a given release on."""

from __future__ import annotations

import re
from importlib import metadata


def installed_torch() -> tuple[int, int] | None:
    """The installed torch's (major, minor), read from its metadata without importing it: the runs use this
    interpreter."""
    try:
        found = re.match(r"(\d+)\.(\d+)", metadata.version("torch"))
    except metadata.PackageNotFoundError:
        return None
    return (int(found[1]), int(found[2])) if found else None
