"""Trains on every GPU of the machine: `python -m torch.distributed.launch --nproc_per_node=N train.py`."""

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset

from options import parse_args


def main() -> None:
    args = parse_args()
    distributed = args.local_rank != -1
    if distributed:
        torch.cuda.set_device(args.local_rank)
        dist.init_process_group("nccl")
    device = torch.device("cuda", max(args.local_rank, 0))
    features = torch.linspace(-1, 1, 320).reshape(32, 10)
    labels = (features.sum(dim=1) > 0).long()
    loader = DataLoader(TensorDataset(features, labels), batch_size=args.batch_size, shuffle=True)  # expect: PFL401
    model = DDP(nn.Linear(10, 2).to(device), device_ids=[args.local_rank])
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    for epoch in range(args.epochs):
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(inputs.to(device)), targets.to(device))
            loss.backward()
            optimizer.step()
        print(f"rank {args.local_rank} epoch {epoch}: loss {loss.item():.4f}")
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
