"""The model of a self-supervised method, in a package of a repository that holds several."""

import torch
import torch.nn as nn


class MoCo(nn.Module):
    def __init__(self, dim: int = 16) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.normalize(self.encoder(x), dim=1)
