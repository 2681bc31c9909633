"""The projection head of DINO (Caron et al., 2021): an MLP, a bottleneck, a weight-normalised last layer."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class DINOHead(nn.Module):
    def __init__(self, in_dim: int, out_dim: int, use_bn: bool = False, nlayers: int = 3, hidden_dim: int = 64,
                 bottleneck_dim: int = 32) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Linear(in_dim, hidden_dim), nn.GELU()]
        for _ in range(nlayers - 2):
            layers += [nn.Linear(hidden_dim, hidden_dim), nn.GELU()]
        layers.append(nn.Linear(hidden_dim, bottleneck_dim))
        self.mlp = nn.Sequential(*layers)
        self.bn = nn.BatchNorm1d(bottleneck_dim)
        self.last_layer = nn.Linear(bottleneck_dim, out_dim, bias=False)
        self.forward = self.forward_bn if use_bn else self.forward_plain  # expect: PFL101

    def forward_plain(self, x: torch.Tensor) -> torch.Tensor:
        return self.last_layer(F.normalize(self.mlp(x), dim=-1))

    def forward_bn(self, x: torch.Tensor) -> torch.Tensor:
        return self.last_layer(F.normalize(self.bn(self.mlp(x)), dim=-1))
