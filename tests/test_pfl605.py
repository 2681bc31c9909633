"""PFL605 clip-grad-norm-mixed-dtensor: clipping a model that `fully_shard` sharded only in parts."""

from __future__ import annotations

import pytest
from fsdp_cases import SPELLINGS, findings, marked, places


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_every_spelling_of_fully_shard(spelling: str) -> None:
    imported, call = SPELLINGS[spelling]
    source = (
        f"import torch\n{imported}\ndef train(model):\n    for block in model.blocks:\n        {call}(block)\n"
        "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
    )
    assert places("PFL605", source) == [("PFL605", "train/fsdp_main.py", 6)]


def test_the_message_names_the_missing_root() -> None:
    (finding,) = findings("PFL605", """
        from torch.nn.utils import clip_grad_norm_
        from torch.distributed.fsdp import fully_shard
        def train(model):
            for i, block in enumerate(model.blocks):
                fully_shard(block)
            clip_grad_norm_(model.parameters(), max_norm=1.0)
    """)
    assert finding.message == (
        "`fully_shard` sharded only parts of `model` (line 6) and never `model` itself, so its other parameters stay "
        "plain tensors: the gradients mix DTensor and torch.Tensor, and the norm fails (`RuntimeError: "
        "aten._foreach_norm.Scalar got mixed torch.Tensor and DTensor`); shard the root too (`fully_shard(model)` "
        "after its parts), or clip each kind of parameter on its own"
    )


FLAGGED = {
    "named-submodules": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def train(model):
            fully_shard(model.encoder)
            fully_shard(model.decoder)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # expect: PFL605
    """,
    "indexed-layers": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def train(model):
            for i in range(len(model.layers)):
                fully_shard(model.layers[i])
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # expect: PFL605
    """,
}


@pytest.mark.parametrize("name", FLAGGED)
def test_flagged(name: str) -> None:
    assert places("PFL605", FLAGGED[name]) == marked("PFL605", FLAGGED[name]) != []


CLEAN = {
    "root-sharded-too": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def train(model):
            for block in model.blocks:
                fully_shard(block)
            model = fully_shard(model)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    """,
    "root-sharded-by-a-helper": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def train(model):
            for block in model.blocks:
                fully_shard(block)
            shard_root(model)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    """,
    "a-loop-over-the-model-itself": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def train(model):
            for block in model:
                fully_shard(block)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    """,
    "only-the-sharded-part-clipped": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def train(model):
            fully_shard(model.encoder)
            torch.nn.utils.clip_grad_norm_(model.encoder.parameters(), 1.0)
    """,
}


@pytest.mark.parametrize("name", CLEAN)
def test_clean(name: str) -> None:
    assert places("PFL605", CLEAN[name]) == []


def test_a_class_that_shards_its_root_in_another_method_is_left_alone() -> None:
    assert places("PFL605", """
        import torch
        from torch.distributed.fsdp import fully_shard
        class Trainer:
            def shard(self):
                for block in self.model.blocks:
                    fully_shard(block)
                apply_root_sharding(self.model)
            def step(self):
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
    """) == []
