"""DDP on the CPU (gloo), saving through a helper of another file on every rank: the project model sees the
helper run on every rank (PFL201 in utils.py), the run confirms it (ddp_hooks/ hides the call from it)."""

import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

from utils import save_checkpoint


def main() -> None:
    dist.init_process_group("gloo")
    model = DistributedDataParallel(nn.Linear(4, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        optimizer.zero_grad()
        model(torch.randn(8, 4)).sum().backward()
        optimizer.step()
    save_checkpoint({"model": model.module.state_dict()}, os.path.join("checkpoints", "last.pt"))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
