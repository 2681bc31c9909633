"""A DDP script whose checkpoint path is a Python 3.12 f-string (PEP 701): its quotes reused inside the field."""

from pathlib import Path

import torch
import torch.distributed as dist


def train(run: dict[str, str]) -> None:
    dist.init_process_group("gloo")
    out = Path(run["out"])
    print(f"saving to {run['out']}: {sorted(run)}")
    torch.save({}, f"{str(out / 'ckpt')}")  # expect: PFL201
    dist.destroy_process_group()
