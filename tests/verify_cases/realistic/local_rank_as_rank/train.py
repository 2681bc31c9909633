"""Pre-training with DDP under torchrun (`torchrun --nproc-per-node 8 train.py`), written on one node: the rank it
joins the group as is LOCAL_RANK, which is the global rank only there."""

import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main() -> None:
    local_rank = int(os.environ["LOCAL_RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    dist.init_process_group("nccl", rank=local_rank, world_size=world_size)
    torch.cuda.set_device(local_rank)
    model = DDP(nn.Linear(32, 8).cuda(), device_ids=[local_rank])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(3):
        optimizer.zero_grad()
        model(torch.randn(16, 32).cuda()).pow(2).mean().backward()
        optimizer.step()
    if local_rank == 0:
        torch.save(model.module.state_dict(), "pretrained.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
