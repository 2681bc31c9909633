"""A minimal torchvision for the verify tests, put on the path only where no working torchvision is installed
(there is no CPU build of torchvision for torch 2.13.0 on the CI machine). Its datasets behave as torchvision's
do: without their files they download them, which needs the network, or raise "Dataset not found"."""

from torchvision import datasets, transforms  # noqa: F401

__version__ = "0.0-stub"
