"""Exits by itself before the code under test: sys.exit with a message, as scripts do when a requirement is missing."""

import sys

import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.forward = self.project  # expect: PFL101

    def project(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)


def main() -> None:
    if not torch.cuda.is_available() or torch.cuda.device_count() < 8:
        sys.exit("this job needs a node with 8 GPUs")
    print(nn.DataParallel(Net().cuda())(torch.randn(8, 4).cuda()).shape)


if __name__ == "__main__":
    main()
