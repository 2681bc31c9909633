"""A DDP script whose weights are initialised by a fused kernel of a compiled extension (here reached through ctypes).

    torchrun --nproc-per-node 2 train.py
"""

import ctypes

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def fused_scale_(tensor: torch.Tensor, factor: float) -> None:
    """The extension's in-place kernel; this build reads through a null pointer, as a mismatched binary does."""
    ctypes.string_at(0)
    tensor.mul_(factor)


def main() -> None:
    dist.init_process_group("gloo")
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    with torch.no_grad():
        for parameter in model.parameters():
            fused_scale_(parameter, 0.5)
    model = DDP(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        loss = model(torch.randn(8, 16)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    if dist.get_rank() == 0:
        torch.save(model.state_dict(), "model.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
