"""Type aliases of Python 3.12 (PEP 695) and a parameter default of 3.13 (PEP 696) before an unguarded save."""

import torch
import torch.distributed as dist

type Checkpoint = dict[str, torch.Tensor]
type Pair[T = int] = tuple[T, T]


def save(state: Checkpoint) -> None:
    dist.init_process_group("gloo")
    torch.save(state, "ckpt.pt")  # expect: PFL201
