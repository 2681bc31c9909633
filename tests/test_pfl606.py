"""PFL606 optimizer-before-fully-shard: an optimizer built before `fully_shard` replaced the parameters."""

from __future__ import annotations

import pytest
from fsdp_cases import SPELLINGS, findings, marked, places


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_every_spelling_of_fully_shard(spelling: str) -> None:
    imported, call = SPELLINGS[spelling]
    source = f"import torch\n{imported}\ndef setup(model):\n    optimizer = torch.optim.AdamW(model.parameters())\n    {call}(model)\n"
    assert places("PFL606", source) == [("PFL606", "train/fsdp_main.py", 4)]


def test_the_message_names_the_sharding() -> None:
    (finding,) = findings("PFL606", """
        import torch
        from torch.distributed.fsdp import fully_shard
        def setup(model):
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
            for layer in model.layers:
                fully_shard(layer)
            fully_shard(model)
    """)
    assert (finding.line, finding.column) == (5, 17)
    assert finding.message == (
        "the optimizer takes `model`'s parameters here, but `fully_shard` at line 7 replaces them with new (DTensor) "
        "parameters: the optimizer steps the old tensors and the model never trains; build it after the last "
        "`fully_shard` call"
    )


FLAGGED = {
    "parameter-groups-of-submodules": """
        from torch.optim import AdamW
        from torch.distributed.fsdp import fully_shard
        def setup(model):
            optimizer = AdamW([{"params": model.encoder.parameters()}, {"params": model.head.parameters(), "lr": 1e-3}])  # expect: PFL606
            fully_shard(model)
    """,
    "a-comprehension-over-named-parameters": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def setup(model):
            optimizer = torch.optim.SGD([p for n, p in model.named_parameters() if "bias" not in n], lr=0.1)  # expect: PFL606
            fully_shard(model.encoder)
    """,
}


@pytest.mark.parametrize("name", FLAGGED)
def test_flagged(name: str) -> None:
    assert places("PFL606", FLAGGED[name]) == marked("PFL606", FLAGGED[name]) != []


CLEAN = {
    "after-sharding": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def setup(model):
            fully_shard(model)
            return torch.optim.AdamW(model.parameters())
    """,
    "built-again-after-sharding": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def setup(model):
            optimizer = torch.optim.AdamW(model.parameters())
            fully_shard(model)
            optimizer = torch.optim.AdamW(model.parameters())
    """,
    "another-model": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def setup(model, critic):
            optimizer = torch.optim.AdamW(critic.parameters())
            fully_shard(model)
    """,
    "other-branch": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def setup(model, fsdp2):
            if fsdp2:
                fully_shard(model)
            else:
                optimizer = torch.optim.AdamW(model.parameters())
    """,
    "a-scheduler": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def setup(model, optimizer):
            scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1)
            fully_shard(model)
    """,
}


@pytest.mark.parametrize("name", CLEAN)
def test_clean(name: str) -> None:
    assert places("PFL606", CLEAN[name]) == []
