"""DDP on the CPU (gloo), saving through a helper of another file, called back from a table of hooks on every rank:
no static rule follows the call through the table, the run sees both ranks write."""

import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

from utils import save_checkpoint

HOOKS = {"after_training": save_checkpoint}


def main() -> None:
    dist.init_process_group("gloo")
    model = DistributedDataParallel(nn.Linear(4, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        optimizer.zero_grad()
        model(torch.randn(8, 4)).sum().backward()
        optimizer.step()
    HOOKS["after_training"]({"model": model.module.state_dict()}, os.path.join("checkpoints", "last.pt"))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
