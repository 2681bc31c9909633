"""A real cross-device mistake: two tensors on two GPUs in one operation."""

import torch

if __name__ == "__main__":
    first = torch.ones(4).cuda(0)
    second = torch.ones(4).to("cuda:1")
    print(first + second)
