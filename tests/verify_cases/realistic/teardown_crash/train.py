"""A DDP script that marks its phases with a compiled profiler, whose release at the interpreter's exit crashes.

    torchrun --nproc-per-node 2 train.py
"""

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import profiler


def main() -> None:
    dist.init_process_group("gloo")
    model = DDP(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        profiler.library.mark(f"step {step}")
        loss = model(torch.randn(8, 16)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    if dist.get_rank() == 0:
        torch.save(model.state_dict(), "model.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
