"""A DDP demo for a SLURM cluster: srun starts one process per task; `--torchrun` reads torchrun's variables instead.

    srun python train.py
    torchrun --nproc-per-node 2 train.py --torchrun
"""

import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--torchrun", action="store_true", help="started by torchrun, not srun")
    args = parser.parse_args()
    if args.torchrun:
        local_rank = int(os.environ["LOCAL_RANK"])
    else:
        local_rank = int(os.environ.get("SLURM_LOCALID"))
        os.environ["RANK"] = os.environ["SLURM_PROCID"]
    dist.init_process_group("gloo")
    model = DDP(nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        optimizer.zero_grad()
        model(torch.randn(4, 8)).sum().backward()
        optimizer.step()
    print(f"rank {dist.get_rank()} (local {local_rank}) done")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
