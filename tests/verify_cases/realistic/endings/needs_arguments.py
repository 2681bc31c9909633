"""Needs its command line: a required option and a positional argument."""

import argparse

import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.forward = self.project  # expect: PFL101

    def project(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("epochs", type=int)
    parser.add_argument("--data", required=True)
    args = parser.parse_args()
    print(nn.DataParallel(Net())(torch.randn(8, 4)).shape)
