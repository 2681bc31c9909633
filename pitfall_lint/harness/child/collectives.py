"""Inside each rank: every collective it enters and leaves, in order, with the line of the user's file that called it
(a flight recorder of the Python calls), and, when a probe asks, a short process-group timeout, so that a hang
becomes an error in seconds rather than after the 30-minute default.

Only the public `torch.distributed.<collective>` functions are wrapped, not the module internals they call, so each
call of the user's code is one record; DistributedDataParallel's forward is recorded too (it broadcasts buffers).
"""

from __future__ import annotations

import datetime
import functools
import os
import sys
from typing import Any

from pitfall_lint.analysis.collectives import TORCH_COLLECTIVES
from pitfall_lint.harness.child.events import emit, user_place

COLLECTIVE_TIMEOUT = "PITFALL_LINT_COLLECTIVE_TIMEOUT"  # seconds
# What FSDP's own all-gather and reduce-scatter call (torch 2.13): recorded at run time, where FSDP calls them for the
# user's code; not in the static rules' list until a first run on fresh repositories has judged them there.
_CALLED_BY_FSDP = frozenset({"all_gather_single", "reduce_scatter_single"})


def patch(torch: Any) -> None:
    import torch.distributed as dist

    if not dist.is_available():
        return
    if os.environ.get(COLLECTIVE_TIMEOUT):
        _shorten_timeout(dist, float(os.environ[COLLECTIVE_TIMEOUT]))
    sequence = {"next": 0}
    for name in sorted(TORCH_COLLECTIVES | _CALLED_BY_FSDP):
        original = getattr(dist, name, None)
        if callable(original):
            setattr(dist, name, _recorded(original, name, sequence))
    from torch.nn.parallel import DistributedDataParallel

    DistributedDataParallel.forward = _recorded(DistributedDataParallel.forward, "DistributedDataParallel.forward", sequence)


def _recorded(original: Any, name: str, sequence: dict[str, int]) -> Any:
    @functools.wraps(original)
    def call(*args: Any, **kwargs: Any) -> Any:
        sequence["next"] += 1
        number = sequence["next"]
        where = user_place()
        emit("collective", op=name, seq=number, **where, phase="enter")
        result = original(*args, **kwargs)
        emit("collective", op=name, seq=number, **where, phase="exit")
        return result

    return call


def _shorten_timeout(dist: Any, seconds: float) -> None:
    """Once the process group is up (its rendezvous keeps the script's own timeout, so that a rank slow to start is
    no failure), every collective on it gets at most `seconds`."""
    limit = datetime.timedelta(seconds=seconds)
    original = dist.init_process_group
    c10d = sys.modules["torch.distributed.distributed_c10d"]

    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        given = kwargs.get("timeout")
        if not (isinstance(given, datetime.timedelta) and given <= limit) and hasattr(c10d, "_set_pg_timeout"):
            c10d._set_pg_timeout(limit)
        emit("collective-timeout", seconds=seconds)
        return result

    dist.init_process_group = init_process_group
    c10d.init_process_group = init_process_group
