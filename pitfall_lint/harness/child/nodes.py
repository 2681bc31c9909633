"""What each process got from its launcher, for the launch probes (PFL302, PFL305).

- where it runs: its node (GROUP_RANK), its local rank and how many processes share its node;
- the CUDA device it picks with `torch.cuda.set_device`, and how many its node has. Without GPUs the node's devices
  are virtual ones (child/virtual_cuda.py), one per local process as `--nproc-per-node` is sized on a GPU node: a
  pick the node does not have fails there with CUDA's own first line, "CUDA error: invalid device ordinal";
- the files it writes with `open(..., "w")` from the user's project, when the probe asks (torch.save is recorded
  by instrument.py already).
The rank each process joins the process group as is recorded with the join itself (instrument.py).
"""

from __future__ import annotations

import builtins
import os
import sys
from typing import Any

from pitfall_lint.harness.child.events import emit, project_file

RECORD_WRITES = "PITFALL_LINT_RECORD_WRITES"


def place() -> dict[str, int | None]:
    def number(name: str) -> int | None:
        value = os.environ.get(name, "")
        return int(value) if value.isdigit() else None

    return {"node": number("GROUP_RANK"), "local_rank": number("LOCAL_RANK"), "local_world_size": number("LOCAL_WORLD_SIZE")}


def patch(torch: Any) -> None:
    if os.environ.get("TORCHELASTIC_RUN_ID"):  # started by a launcher: say where
        emit("launched", **place())
    _record_device_picks(torch)
    if os.environ.get(RECORD_WRITES):
        _record_writes()


def _record_device_picks(torch: Any) -> None:
    """Each `torch.cuda.set_device` of the user's project (not the DataParallel emulation's), recorded before the
    device (real or virtual) answers it."""
    from torch.cuda._utils import _get_device_index

    original = torch.cuda.set_device

    def set_device(device: Any) -> None:
        caller = sys._getframe(1)
        file = project_file(caller.f_code.co_filename)
        if file is not None:
            emit("device-pick", index=_get_device_index(device, optional=True), file=file, line=caller.f_lineno,
                 devices=torch.cuda.device_count(), **place())
        return original(device)

    torch.cuda.set_device = set_device


def _record_writes() -> None:
    original = builtins.open

    def recording_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if isinstance(file, (str, os.PathLike)) and ("w" in mode or "x" in mode):
            caller = sys._getframe(1)
            writer = project_file(caller.f_code.co_filename)
            if writer is not None:
                emit("write", path=os.path.abspath(os.fspath(file)), file=writer, line=caller.f_lineno)
        return original(file, mode, *args, **kwargs)

    builtins.open = recording_open
