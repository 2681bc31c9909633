"""Pre-training entry point, exported from the lab's monorepo with its import paths unchanged."""

import torch
import torch.nn as nn

import research.ssl.moco.builder


def main() -> None:
    model = nn.DataParallel(research.ssl.moco.builder.Contrast())
    print(model(torch.randn(4, 32)).shape)


if __name__ == "__main__":
    main()
