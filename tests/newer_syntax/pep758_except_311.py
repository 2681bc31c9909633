"""An `except` of Python 3.14 (PEP 758): two exceptions without parentheses, around an unguarded save."""

import torch
import torch.distributed as dist


def save(state: dict) -> None:
    dist.init_process_group("gloo")
    try:
        torch.save(state, "ckpt.pt")  # expect: PFL201
    except (OSError, RuntimeError):
        torch.save(state, "/tmp/ckpt.pt")  # expect: PFL201
