"""PFL210 ddp-wrap-order: moves, casts, freezes and edits of a model after DistributedDataParallel wrapped it, and
`device_ids` for a model built on the CPU; wrapping again afterwards is the fix."""

from __future__ import annotations

from textwrap import dedent

import pytest

from marks import assert_marks

SETUP = """
import torch
import torch.nn as nn
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("gloo")
"""

CASES = {
    "cast-the-wrapper": """
        def setup(net):
            ddp = DDP(net)
            ddp.half()  # expect: PFL210
    """,
    "cast-the-inner-model-and-through-module": """
        def setup(net):
            ddp = DDP(net)
            net.to(torch.bfloat16)  # expect: PFL210
            ddp.module.double()  # expect: PFL210
    """,
    "cast-chained-on-the-wrap": """
        def setup(net):
            model = DDP(net).to(dtype=torch.float16)  # expect: PFL210
    """,
    "move-a-model-built-on-the-cpu": """
        def setup(device):
            model = nn.Linear(4, 4)
            model = DDP(model)
            model.cuda()  # expect: PFL210
    """,
    "device-ids-for-a-cpu-model": """
        def setup(rank):
            model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
            model = DDP(model, device_ids=[rank])  # expect: PFL210
    """,
    "device-ids-for-a-module-of-the-project": """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
        def setup(rank):
            net = Net()
            ddp = DDP(module=net, device_ids=[rank])  # expect: PFL210
    """,
    "replace-a-submodule": """
        def setup(net):
            ddp = DDP(net)
            ddp.module.head = nn.Linear(4, 2)  # expect: PFL210
            net.add_module("extra", nn.Linear(4, 4))  # expect: PFL210
    """,
    "freeze-after-wrapping": """
        def setup(net):
            ddp = DDP(net)
            for p in ddp.module.backbone.parameters():  # expect: PFL210
                p.requires_grad = False
            net.head.requires_grad_(False)  # expect: PFL210
            net.bias.requires_grad = False  # expect: PFL210
    """,
    "sync-batchnorm-after-wrapping": """
        def setup(net):
            ddp = DDP(net)
            nn.SyncBatchNorm.convert_sync_batchnorm(net)  # expect: PFL210
    """,
    # Fine.
    "moved-and-cast-before-wrapping": """
        def setup(device, rank):
            model = nn.Linear(4, 4).to(device)
            model = model.half()
            model = DDP(model, device_ids=[rank])
    """,
    "a-second-move-to-the-same-device": """
        def setup(device, rank):
            model = nn.Linear(4, 4)
            model.to(device)
            model = DDP(model, device_ids=[rank])
            model.to(device)
    """,
    "wrapped-again-after-the-change": """
        def setup(net):
            ddp = DDP(net)
            net.half()
            ddp = DDP(net)
    """,
    "model-from-a-builder-with-device-ids": """
        def setup(build, cfg, rank):
            model = build(cfg)
            model = DDP(model, device_ids=[rank])
    """,
    "device-ids-for-a-container-of-modules-built-elsewhere": """
        def setup(trunk, head, rank):
            module = nn.Sequential(trunk, head)
            ddp = DDP(module=module, device_ids=[rank])
    """,
    "device-ids-chosen-at-run-time": """
        def setup(rank, cpu):
            model = nn.Linear(4, 4)
            model = DDP(model, device_ids=None if cpu else [rank])
    """,
    "another-branch": """
        def setup(net, sharded):
            if sharded:
                wrapped = net
                wrapped = wrapped.half()
            else:
                wrapped = DDP(net)
    """,
    "name-rebound-to-another-model": """
        def setup(net, other):
            ddp = DDP(net)
            ddp = other
            ddp.half()
    """,
    "freeze-with-unused-parameter-detection": """
        def setup(net):
            ddp = DDP(net, find_unused_parameters=True)
            net.head.requires_grad_(False)
    """,
    "eval-and-train-modes": """
        def setup(net):
            ddp = DDP(net)
            ddp.eval()
            ddp.train()
    """,
}


@pytest.mark.parametrize("name", CASES)
def test_case(name: str) -> None:
    assert_marks(SETUP + dedent(CASES[name]))
