"""What each process got from its launcher, for the launch probes (PFL302, PFL305).

- where it runs: its node (GROUP_RANK), its local rank and how many processes share its node;
- the CUDA device it picks with `torch.cuda.set_device`. Without GPUs the node is emulated with one device per
  local process, as `--nproc-per-node` is sized on a GPU node: a pick the node does not have fails with CUDA's
  own first line, "CUDA error: invalid device ordinal", tagged as the emulation's; one it has does nothing;
- the files it writes with `open(..., "w")` from the user's script, when the probe asks (torch.save is recorded
  by instrument.py already);
- the rank it joins the process group as.
"""

from __future__ import annotations

import builtins
import os
import sys
from typing import Any

from pitfall_lint.harness.child.events import emit, user_line, user_script

RECORD_WRITES = "PITFALL_LINT_RECORD_WRITES"
_DEVICE = "PITFALL_LINT_DEVICE"  # instrument.DEVICE: "cpu" (emulate) or "cuda"


def _place() -> dict[str, int | None]:
    def number(name: str) -> int | None:
        value = os.environ.get(name, "")
        return int(value) if value.isdigit() else None

    return {"node": number("GROUP_RANK"), "local_rank": number("LOCAL_RANK"), "local_world_size": number("LOCAL_WORLD_SIZE")}


def patch(torch: Any) -> None:
    if os.environ.get("TORCHELASTIC_RUN_ID"):  # started by a launcher: say where
        emit("launched", **_place())
    _patch_set_device(torch)
    _patch_process_group_rank(torch)
    if os.environ.get(RECORD_WRITES):
        _record_writes()


def _patch_set_device(torch: Any) -> None:
    from torch.cuda._utils import _get_device_index

    original = torch.cuda.set_device
    emulated = os.environ.get(_DEVICE) != "cuda" and not torch.cuda.is_available()

    def set_device(device: Any) -> None:
        index = _get_device_index(device, optional=True)
        place = _place()
        devices = place["local_world_size"] or 1
        emit("device-pick", index=index, line=user_line(), devices=devices if emulated else torch.cuda.device_count(), **place)
        if not emulated:
            return original(device)
        if index >= devices:
            raise RuntimeError(
                "CUDA error: invalid device ordinal\n[pitfall-lint multi-node emulation: node "
                f"{place['node']} has {devices} CUDA device(s), one per local process (LOCAL_WORLD_SIZE={devices}); "
                f"cuda:{index} does not exist there]"
            )
        return None

    torch.cuda.set_device = set_device


def _patch_process_group_rank(torch: Any) -> None:
    import torch.distributed as dist

    if not dist.is_available():
        return
    original = dist.init_process_group

    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        rank = kwargs.get("rank", args[4] if len(args) > 4 else -1)
        # `given_rank`, not `rank`: every event's `rank` is the process's own, which other probes count.
        emit("joins", given_rank=int(rank) if isinstance(rank, int) else -1, line=user_line())
        return original(*args, **kwargs)

    dist.init_process_group = init_process_group
    sys.modules["torch.distributed.distributed_c10d"].init_process_group = init_process_group


def _record_writes() -> None:
    original = builtins.open
    script = user_script()

    def recording_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if isinstance(file, (str, os.PathLike)) and ("w" in mode or "x" in mode):
            caller = sys._getframe(1).f_code.co_filename
            if os.path.realpath(caller) == script:
                emit("write", path=os.path.abspath(os.fspath(file)), line=user_line())
        return original(file, mode, *args, **kwargs)

    builtins.open = recording_open
