"""Runs only on a GPU: on a CPU-only machine its finding is not-run, never a pass."""

import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.forward = self.project  # expect: PFL101

    def project(self, x):
        return self.linear(x)


if __name__ == "__main__":
    model = nn.DataParallel(Net().cuda())
    print(model(torch.randn(4, 4).cuda()).shape)
