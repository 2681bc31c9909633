"""Starts a process pool at import time, with the spawn start method: every worker re-imports the file."""

import multiprocessing

import torch


def square(x: int) -> int:
    return int(torch.tensor(x) ** 2)


pool = multiprocessing.get_context("spawn").Pool(2)  # expect: PFL301
print(pool.map(square, range(4)))
