"""PFL607 device-mesh-under-rank-guard: a mesh of several dimensions built on some ranks only."""

from __future__ import annotations

import pytest
from fsdp_cases import findings, marked, places

SPELLINGS = {
    "device-mesh-module": ("from torch.distributed.device_mesh import init_device_mesh", "init_device_mesh"),
    "dotted": ("import torch.distributed.device_mesh", "torch.distributed.device_mesh.init_device_mesh"),
    "torch-distributed": ("import torch.distributed as dist", "dist.init_device_mesh"),
    "tensor": ("from torch.distributed.tensor import init_device_mesh as make_mesh", "make_mesh"),
}


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_every_spelling(spelling: str) -> None:
    imported, call = SPELLINGS[spelling]
    source = f"{imported}\ndef setup(rank):\n    if rank == 0:\n        mesh = {call}('cuda', (2, 4))\n"
    assert places("PFL607", source) == [("PFL607", "train/fsdp_main.py", 4)]


def test_the_message_names_the_guard() -> None:
    (finding,) = findings("PFL607", """
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh
        def setup():
            if dist.get_rank() != 0:
                return None
            return init_device_mesh("cuda", (2, 2), mesh_dim_names=("dp", "tp"))
    """)
    assert finding.message == (
        "`init_device_mesh` runs only on the ranks that get past `if dist.get_rank() != 0: return` (line 5), but "
        "building a mesh of several dimensions is a collective over every rank of the world (it creates a process "
        "group per dimension with `new_group`): the other ranks never join, and the ranks that do wait until the "
        "process group times out; build the mesh on every rank"
    )


FLAGGED = {
    "names-give-the-dimensions": """
        from torch.distributed.device_mesh import init_device_mesh
        def setup(args, shape):
            if args.local_rank == 0:
                mesh = init_device_mesh("cuda", shape, mesh_dim_names=("dp_shard", "tp"))  # expect: PFL607
    """,
    "main-process-predicate": """
        from torch.distributed.device_mesh import init_device_mesh
        def setup(accelerator):
            if accelerator.is_main_process:
                mesh = init_device_mesh("cuda", mesh_shape=[2, 2])  # expect: PFL607
    """,
}


@pytest.mark.parametrize("name", FLAGGED)
def test_flagged(name: str) -> None:
    assert places("PFL607", FLAGGED[name]) == marked("PFL607", FLAGGED[name]) != []


CLEAN = {
    "one-dimension": """
        from torch.distributed.device_mesh import init_device_mesh
        def setup(rank):
            if rank == 0:
                mesh = init_device_mesh("cuda", (8,))
    """,
    "a-distributed-switch": """
        from torch.distributed.device_mesh import init_device_mesh
        def setup(args, world_size):
            if args.local_rank != -1 and world_size > 1:
                mesh = init_device_mesh("cuda", (2, world_size // 2))
    """,
    "both-sides": """
        from torch.distributed.device_mesh import init_device_mesh
        def setup(rank):
            if rank == 0:
                mesh = init_device_mesh("cuda", (2, 2), mesh_dim_names=("dp", "tp"))
            else:
                mesh = init_device_mesh("cuda", (2, 2), mesh_dim_names=("dp", "tp"))
    """,
    "unknown-shape": """
        from torch.distributed.device_mesh import init_device_mesh
        def setup(rank, shape):
            if rank == 0:
                mesh = init_device_mesh("cuda", shape)
    """,
    "every-rank": """
        from torch.distributed.device_mesh import init_device_mesh
        def setup(rank):
            mesh = init_device_mesh("cuda", (2, 2))
            if rank == 0:
                print(mesh)
    """,
}


@pytest.mark.parametrize("name", CLEAN)
def test_clean(name: str) -> None:
    assert places("PFL607", CLEAN[name]) == []
