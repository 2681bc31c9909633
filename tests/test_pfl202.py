"""PFL202 load-without-map-location: every form of torch.load flagged in distributed code, and every form left alone."""

from __future__ import annotations

from textwrap import dedent

import pytest

from marks import assert_marks

DDP_SETUP = """
import io
import os
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
local_rank = int(os.environ["LOCAL_RANK"])
"""

CASES = {
    "load-in-function": """
        def resume(model):
            model.load_state_dict(torch.load("ckpt.pt"))  # expect: PFL202
    """,
    "load-at-top-level": """
        state = torch.load("ckpt.pt")  # expect: PFL202
    """,
    "aliased-load": """
        from torch import load as tload
        def resume():
            return tload("ckpt.pt")  # expect: PFL202
    """,
    "torch-module-alias": """
        import torch as th
        state = th.load("ckpt.pt")  # expect: PFL202
    """,
    "serialization-module": """
        import torch.serialization
        state = torch.serialization.load("ckpt.pt")  # expect: PFL202
    """,
    "path-keyword": """
        state = torch.load(f="ckpt.pt")  # expect: PFL202
    """,
    "weights-only-is-not-a-map-location": """
        state = torch.load("ckpt.pt", weights_only=True)  # expect: PFL202
    """,
    "open-file-object": """
        with open("ckpt.pt", "rb") as handle:
            state = torch.load(handle)  # expect: PFL202
    """,
    "reported-where-the-call-starts": """
        state = torch.load(  # expect: PFL202
            os.path.join("out", "ckpt.pt"),
            weights_only=False,
        )
    """,
    "guard-unrelated-to-rank": """
        if os.path.exists("ckpt.pt"):
            state = torch.load("ckpt.pt")  # expect: PFL202
    """,
    # A per-rank file is still restored onto the device recorded in it: not exempt.
    "per-rank-path": """
        state = torch.load(f"ckpt_rank{rank}.pt")  # expect: PFL202
    """,
    # A map_location is given.
    "map-location-keyword": """
        def resume(model):
            a = torch.load("ckpt.pt", map_location="cpu")
            b = torch.load("ckpt.pt", map_location=f"cuda:{local_rank}")
            c = torch.load("ckpt.pt", map_location=lambda storage, location: storage)
            d = torch.load("ckpt.pt", weights_only=True, map_location=torch.device("cpu"))
    """,
    "map-location-positional": """
        state = torch.load("ckpt.pt", "cpu")
    """,
    "explicit-map-location-none": """
        state = torch.load("ckpt.pt", map_location=None)
    """,
    "keyword-unpacking": """
        def resume(path, **load_options):
            return torch.load(path, **load_options)
    """,
    "positional-unpacking": """
        def resume(*load_args):
            return torch.load(*load_args)
    """,
    # Restricted to one rank.
    "rank-equals-zero": """
        if rank == 0:
            state = torch.load("ckpt.pt")
    """,
    "get-rank-call": """
        if dist.get_rank() == 0:
            state = torch.load("ckpt.pt")
    """,
    "local-rank-in-list": """
        if local_rank in [-1, 0]:
            state = torch.load("ckpt.pt")
    """,
    "early-return": """
        def evaluate():
            if rank != 0:
                return None
            return torch.load("ckpt.pt")
    """,
    "decorator": """
        from lightning.pytorch.utilities import rank_zero_only
        @rank_zero_only
        def evaluate():
            return torch.load("ckpt.pt")
    """,
    "helper-whose-callers-are-guarded": """
        def read():
            return torch.load("ckpt.pt")
        def report():
            if dist.get_rank() == 0:
                read()
    """,
    # In-memory bytes, not a checkpoint saved from a device.
    "in-memory-buffer": """
        def from_bytes(data):
            buffer = io.BytesIO(data)
            a = torch.load(buffer)
            b = torch.load(io.BytesIO(data))
            c = torch.load(f=io.BytesIO(data))
            return a, b, c
    """,
    "in-memory-buffer-from-io-import": """
        from io import BytesIO
        def from_bytes(data):
            return torch.load(BytesIO(data))
    """,
    # Not torch.load.
    "local-function-named-load": """
        def load(path):
            return path
        state = load("ckpt.pt")
    """,
    "other-libraries-load": """
        import json
        import numpy as np
        with open("config.json") as handle:
            config = json.load(handle)
        weights = np.load("weights.npy")
    """,
}


@pytest.mark.parametrize("name", CASES)
def test_case(name: str) -> None:
    assert_marks(DDP_SETUP + dedent(CASES[name]))


def test_module_level_in_memory_buffer_is_not_flagged() -> None:
    assert_marks(DDP_SETUP + "buffer = io.BytesIO(b'')\nstate = torch.load(buffer)\n")


@pytest.mark.parametrize(
    "setup",
    [
        "import torch.distributed as dist\ndist.init_process_group('nccl')\n",
        "from torch.nn.parallel import DistributedDataParallel as DDP\nmodel = DDP(model)\n",
        "import os\nlocal_rank = int(os.environ['LOCAL_RANK'])\n",
        "import os\nworld = int(os.getenv('WORLD_SIZE', '1'))\n",
        "def main():\n    from torch import distributed\n    distributed.init_process_group('gloo')\n",
    ],
)
def test_distributed_files_are_recognised(setup: str) -> None:
    assert_marks("import torch\n" + setup + "state = torch.load('c.pt')  # expect: PFL202\n")


def test_single_process_script_is_not_flagged() -> None:
    assert_marks("import torch\nmodel = torch.nn.Linear(2, 2)\nmodel.load_state_dict(torch.load('c.pt'))\n")


def test_mocked_ddp_is_not_distributed() -> None:
    assert_marks(
        "import torch\nfrom unittest import mock\nfrom torch.nn.parallel import DistributedDataParallel\n"
        "with mock.patch('torch.nn.parallel.DistributedDataParallel'):\n    state = torch.load('c.pt')\n"
        "assert not isinstance(state, DistributedDataParallel)\n"
    )
