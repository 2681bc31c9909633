"""PFL212 under DDP: the model's method called on the DistributedDataParallel wrapper, on every rank."""

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.trunk = nn.Linear(4, 4)
        self.head = nn.Linear(4, 1)

    def freeze_trunk(self) -> None:
        self.trunk.requires_grad_(False)

    def forward(self, x):
        return self.head(self.trunk(x))


def main() -> None:
    dist.init_process_group("gloo")
    model = DDP(Net())
    model(torch.randn(2, 4)).sum().backward()
    model.freeze_trunk()  # expect: PFL212
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
