"""The contrastive model, kept in the repository as moco/builder.py; the lab's monorepo has it at research.ssl.moco."""

import torch.nn as nn


class Contrast(nn.Module):
    def __init__(self, dim: int = 16) -> None:
        super().__init__()
        self.encoder = nn.Linear(32, dim)

    def forward(self, x):
        return self.encoder(x)
