"""A model file with no entry point: verify builds it through pitfall_lint_example()."""

import torch
import torch.nn as nn


class Scorer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 3)
        self.score = lambda x: self.linear(x).softmax(-1)  # expect: PFL101

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.score(x)


def pitfall_lint_example():
    return Scorer(), (torch.randn(6, 4),)
