"""Distributed MNIST-style training started one process per rank by hand, as its README says:
    python main.py --init-method tcp://127.0.0.1:23456 --rank 0 --world-size 2
    python main.py --init-method tcp://127.0.0.1:23456 --rank 1 --world-size 2
"""

import argparse

import torch
import torch.nn as nn
from torch import distributed
from torch.utils import data


def distributed_is_initialized() -> bool:
    return distributed.is_available() and distributed.is_initialized()


def run(args: argparse.Namespace) -> None:
    model = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 10))
    if distributed_is_initialized():
        model = nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.learning_rate)
    dataset = data.TensorDataset(torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,)))
    sampler = data.DistributedSampler(dataset) if distributed_is_initialized() else None
    loader = data.DataLoader(dataset, batch_size=args.batch_size, shuffle=sampler is None, sampler=sampler)
    for epoch in range(args.epochs):
        for images, labels in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(images), labels).backward()
            optimizer.step()
        print(f"epoch {epoch} done")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", type=str, default="gloo")
    parser.add_argument("-i", "--init-method", type=str, default="tcp://127.0.0.1:23456")
    parser.add_argument("-s", "--world-size", type=int, default=1)
    parser.add_argument("-r", "--rank", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("-lr", "--learning-rate", type=float, default=1e-3)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()

    if args.world_size > 1:
        distributed.init_process_group(
            backend=args.backend,
            init_method=args.init_method,
            world_size=args.world_size,
            rank=args.rank,
        )
    run(args)


if __name__ == "__main__":
    main()
