"""PFL208 ddp-module-bypass: a forward around the DDP wrapper whose loss is backpropagated; evaluation through
`.module` is fine."""

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
    "module-call-then-loss-then-backward": """
        def train(net, batches, criterion):
            ddp = DDP(net)
            for x, y in batches:
                out = ddp.module(x)  # expect: PFL208
                loss = criterion(out, y)
                loss.backward()
    """,
    "module-forward-in-one-expression": """
        def train(net, x):
            ddp = DDP(net)
            ddp.module.forward(x).sum().backward()  # expect: PFL208
    """,
    "the-bare-model-a-ddp-wraps": """
        def train(model, x, y, criterion):
            ddp_model = DDP(model, device_ids=None)
            loss = criterion(model(x), y)  # expect: PFL208
            loss.backward()
    """,
    "through-a-scaler-and-an-augmented-loss": """
        def train(net, x, scaler):
            ddp = DDP(net)
            loss = 0
            loss += ddp.module(x).mean()  # expect: PFL208
            scaler.scale(loss).backward()
    """,
    "accelerator-backward": """
        def train(net, x, accelerator):
            ddp = DDP(net)
            loss = ddp.module(x).mean()  # expect: PFL208
            accelerator.backward(loss)
    """,
    "module-call-after-the-wrapper-is-rebound": """
        def train(net, x, rank):
            ddp = DDP(net.to(rank), device_ids=[rank])
            ddp = ddp.train()
            ddp.module(x).sum().backward()  # expect: PFL208
    """,
    "module-call-at-module-level-after-a-chained-wrap": """
        net = nn.Linear(4, 4)
        ddp = DDP(net).train()
        ddp = ddp.float()
        ddp.module(torch.ones(2, 4)).sum().backward()  # expect: PFL208
    """,
    "the-rebound-wrapper-called-itself": """
        def train(net, x, rank):
            ddp = DDP(net.to(rank), device_ids=[rank])
            ddp = ddp.train()
            ddp(x).sum().backward()
    """,
    # Fine: nothing of it is backpropagated, or it goes through the wrapper.
    "evaluation-under-no-grad": """
        def evaluate(net, x):
            ddp = DDP(net)
            with torch.no_grad():
                loss = ddp.module(x).mean()
            loss.backward()
    """,
    "inference-mode-decorator": """
        @torch.inference_mode()
        def evaluate(net, x):
            ddp = DDP(net)
            return ddp.module(x)
    """,
    "output-never-backpropagated": """
        def train(net, x):
            ddp = DDP(net)
            loss = ddp(x).mean()
            loss.backward()
            preview = ddp.module(x)
            print(preview.argmax())
    """,
    "detached-for-the-discriminator": """
        def train(generator, discriminator, z, criterion):
            g = DDP(generator)
            fake = g.module(z)
            d_loss = criterion(discriminator(fake.detach()))
            d_loss.backward()
    """,
    "rebound-to-the-wrapper": """
        def train(model, x):
            model = DDP(model)
            model(x).sum().backward()
    """,
    "inside-no-sync": """
        def train(net, x):
            ddp = DDP(net)
            with ddp.no_sync():
                ddp.module(x).sum().backward()
    """,
    "a-data-parallel-wrapper": """
        def train(net, x):
            dp = nn.DataParallel(net)
            dp.module(x).sum().backward()
    """,
}


@pytest.mark.parametrize("name", CASES)
def test_case(name: str) -> None:
    assert_marks(SETUP + dedent(CASES[name]))
