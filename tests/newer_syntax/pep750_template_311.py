"""A template string of Python 3.14 (PEP 750) names the checkpoint of an unguarded save."""

import torch
import torch.distributed as dist


def save(state: dict, step: int) -> None:
    dist.init_process_group("gloo")
    torch.save(state, render(f"ckpt-{step}.pt"))  # expect: PFL201
