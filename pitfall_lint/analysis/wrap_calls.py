"""Whether a file's bytes can hold a call of torch's wrappers, read before it is parsed: the project model stamps it of
every file, and a rule about a wrap made in the file skips the files that cannot hold one."""

from __future__ import annotations

import re

# The wrapper called, or imported under another name (`DistributedDataParallel as DDP`), as a wrap site is spelled.
DDP_CALL_OR_ALIAS = re.compile(rb"DistributedDataParallel[\s\\]*(?:\(|as\b)")
WRAPPER_CALL_OR_ALIAS = re.compile(rb"DataParallel[\s\\]*(?:\(|as\b)")  # DataParallel's, or DDP's


def may_call_a_wrapper(data: bytes) -> bool:
    """Whether the file can call DataParallel or DistributedDataParallel; most files that name them do not."""
    return b"DataParallel" in data and WRAPPER_CALL_OR_ALIAS.search(data) is not None  # the cheap look first


def may_call_ddp(data: bytes) -> bool:
    """Whether the file can call DistributedDataParallel."""
    return b"DistributedDataParallel" in data and DDP_CALL_OR_ALIAS.search(data) is not None  # the cheap look first
