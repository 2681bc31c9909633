import torch
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.project = nn.Linear(8, width)
        self.mix = nn.Sequential(nn.ReLU(), nn.Linear(width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mix(self.project(x))
