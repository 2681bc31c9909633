"""PFL604 fsdp1-api-on-fully-shard: FSDP1's or DDP's API used on a module that `fully_shard` sharded."""

from __future__ import annotations

import pytest
from fsdp_cases import SPELLINGS, findings, places


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_every_spelling_of_fully_shard(spelling: str) -> None:
    imported, call = SPELLINGS[spelling]
    source = f"{imported}\ndef step(model, batch):\n    {call}(model)\n    with model.no_sync():\n        model(batch).sum().backward()\n"
    assert places("PFL604", source) == [("PFL604", "train/fsdp_main.py", 4)]


def test_the_message_names_the_fsdp2_way() -> None:
    (finding,) = findings("PFL604", """
        from torch.distributed.fsdp import fully_shard
        def step(model, batch):
            fully_shard(model)
            with model.no_sync():
                model(batch).sum().backward()
    """)
    assert finding.message == (
        "`model.no_sync()` is FSDP1's or DDP's API, but `model` was sharded by FSDP2's `fully_shard` at line 4, which "
        "does not have it: it fails or does nothing; use `model.set_requires_gradient_sync(False)` on the accumulation "
        "steps (and `True` on the last)"
    )


def test_fsdp1_static_functions_given_a_sharded_module() -> None:
    assert places("PFL604", """
        import torch.distributed.fsdp as fsdp
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, StateDictType, fully_shard
        def save(model, optimizer):
            for block in model.blocks:
                fully_shard(block)
            fully_shard(model)
            with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT):
                state = model.state_dict()
            with fsdp.FullyShardedDataParallel.summon_full_params(model):
                pass
            optimizer_state = FSDP.optim_state_dict(model, optimizer)
            model.clip_grad_norm_(1.0)
    """) == [("PFL604", "train/fsdp_main.py", line) for line in (8, 10, 12, 13)]


CLEAN = {
    "fsdp1-wrapped": """
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, StateDictType
        def save(model):
            model = FSDP(model)
            with model.no_sync():
                pass
            with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT):
                return model.state_dict()
    """,
    "ddp-beside-fsdp2": """
        from torch.distributed.fsdp import fully_shard
        from torch.nn.parallel import DistributedDataParallel as DDP
        def step(model, head):
            fully_shard(model)
            head = DDP(head)
            with head.no_sync():
                pass
    """,
    "before-sharding": """
        from torch.distributed.fsdp import fully_shard
        def step(model):
            with model.no_sync():
                pass
            fully_shard(model)
    """,
    "in-the-fsdp1-branch": """
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, StateDictType, fully_shard
        def save(model, fsdp2):
            if fsdp2:
                fully_shard(model)
            else:
                model = FSDP(model)
                with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT):
                    return model.state_dict()
    """,
    "fsdp2-api": """
        from torch.distributed.fsdp import fully_shard
        def step(model, last):
            fully_shard(model)
            model.set_requires_gradient_sync(last)
            model.unshard()
    """,
}


@pytest.mark.parametrize("name", CLEAN)
def test_clean(name: str) -> None:
    assert places("PFL604", CLEAN[name]) == []
