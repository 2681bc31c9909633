"""PFL105 with a Python number in the output: the gather cannot take it apart."""

import torch
import torch.nn as nn


class Scorer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        out = self.lin(x)
        accuracy = (out > 0).float().mean().item()
        return out, accuracy  # expect: PFL105


if __name__ == "__main__":
    out, accuracy = nn.DataParallel(Scorer())(torch.randn(4, 4))
    print(accuracy)
