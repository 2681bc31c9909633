"""Small encoders standing for torchvision.models (same constructor: num_classes is the output dimension)."""
import torch.nn as nn


def convnet_tiny(num_classes=1000):
    return nn.Sequential(
        nn.Conv2d(3, 8, kernel_size=3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, num_classes),
    )
