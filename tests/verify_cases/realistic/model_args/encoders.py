"""Backbones in torchvision's shape: a function per architecture, `num_classes` sizing the last layer `fc`."""

import torch
import torch.nn as nn


class SmallResNet(nn.Module):
    def __init__(self, width: int = 16, num_classes: int = 1000, zero_init_residual: bool = False) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, kernel_size=3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, kernel_size=3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        if zero_init_residual:
            nn.init.zeros_(self.bn2.weight)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(x + self.bn2(self.conv2(x)))
        return self.fc(torch.flatten(self.pool(x), 1))


def resnet_tiny(**kwargs) -> SmallResNet:
    return SmallResNet(width=8, **kwargs)


def resnet_small(**kwargs) -> SmallResNet:
    return SmallResNet(width=16, **kwargs)
