"""DDP started by mp.spawn, one process per GPU of the node, as distributed tutorials write it: a sampler per
rank, its epoch set every epoch, 200 epochs, the weights saved once training is over.

    python mnmc_ddp_mp.py --nodes 1 --ngpus_per_node 2
"""

import argparse
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

parser = argparse.ArgumentParser(description="CIFAR10 with DDP, one process per GPU")
parser.add_argument("--nodes", default=1, type=int)
parser.add_argument("--ngpus_per_node", default=2, type=int)
parser.add_argument("--epochs", default=200, type=int)
parser.add_argument("--dist-url", default="tcp://127.0.0.1:12306", type=str)
parser.add_argument("--node_rank", default=0, type=int)


class Images(Dataset):
    """Stands for CIFAR10 read from disk and augmented: each image takes a moment."""

    def __len__(self) -> int:
        return 50000

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        time.sleep(0.01)  # read, crop and flip one image
        return torch.randn(3, 32, 32), index % 10


def main() -> None:
    args = parser.parse_args()
    args.global_world_size = args.ngpus_per_node * args.nodes
    mp.spawn(train_worker, nprocs=args.ngpus_per_node, args=(args.ngpus_per_node, args))


def train_worker(local_rank: int, ngpus_per_node: int, args: argparse.Namespace) -> None:
    args.global_rank = args.node_rank * ngpus_per_node + local_rank
    dist.init_process_group(backend="nccl", init_method=args.dist_url, world_size=args.global_world_size,
                            rank=args.global_rank)
    device = torch.device("cuda", local_rank)
    torch.cuda.set_device(local_rank)
    net = nn.Sequential(nn.Conv2d(3, 16, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))
    net = DDP(net.to(device), device_ids=[local_rank], output_device=local_rank)
    train_sampler = DistributedSampler(Images(), shuffle=True)
    train_loader = DataLoader(Images(), batch_size=32, sampler=train_sampler)
    criterion = nn.CrossEntropyLoss().to(device)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.02, momentum=0.9, nesterov=True)
    net.train()
    for ep in range(1, args.epochs + 1):
        train_loader.sampler.set_epoch(ep)
        for idx, (inputs, targets) in enumerate(train_loader):
            inputs, targets = inputs.to(device), targets.to(device)
            loss = criterion(net(inputs), targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if args.global_rank == 0:
            print(f"   == step: [{ep:3}/{args.epochs}] | loss: {loss.item():.3f}")
    torch.save(net.state_dict(), "ddp_model.pth")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
