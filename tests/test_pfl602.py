"""PFL602 deepcopy-of-sharded-module: `copy.deepcopy` of a module that `fully_shard` sharded."""

from __future__ import annotations

import pytest
from fsdp_cases import SPELLINGS, findings, marked, places


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_every_spelling_of_fully_shard(spelling: str) -> None:
    imported, call = SPELLINGS[spelling]
    source = f"import copy\n{imported}\ndef build(model):\n    {call}(model)\n    return copy.deepcopy(model)\n"
    assert places("PFL602", source) == [("PFL602", "train/fsdp_main.py", 5)]


def test_the_message_names_the_sharding_and_the_error() -> None:
    (finding,) = findings("PFL602", """
        import copy
        from torch.distributed.fsdp import fully_shard
        def build(model):
            fully_shard(model)
            ema = copy.deepcopy(model)
    """)
    assert (finding.line, finding.column) == (6, 11)
    assert finding.message == (
        "`model` holds a module that `fully_shard` sharded at line 5, and FSDP2 modules refuse a deepcopy "
        "(`AssertionError: FSDP does not support deepcopy`); copy the model before sharding it, or build a new model "
        "and load the state_dict into it"
    )


FLAGGED = {
    "result-bound": """
        from copy import deepcopy
        from torch.distributed.fsdp import fully_shard
        def build(model):
            model = fully_shard(model)
            return deepcopy(model)  # expect: PFL602
    """,
    "a-sharded-submodule": """
        import copy
        from torch.distributed.fsdp import fully_shard
        def build(model):
            for layer in model.layers:
                fully_shard(layer)
            return copy.deepcopy(model)  # expect: PFL602
    """,
    "a-class-attribute-sharded-in-another-method": """
        import copy
        from torch.distributed.fsdp import fully_shard
        class Trainer:
            def setup(self):
                fully_shard(self.model)
            def make_ema(self):
                self.ema = copy.deepcopy(self.model)  # expect: PFL602
    """,
}


@pytest.mark.parametrize("name", FLAGGED)
def test_flagged(name: str) -> None:
    assert places("PFL602", FLAGGED[name]) == marked("PFL602", FLAGGED[name]) != []


CLEAN = {
    "copied-before-sharding": """
        import copy
        from torch.distributed.fsdp import fully_shard
        def build(model):
            ema = copy.deepcopy(model)
            fully_shard(model)
            fully_shard(ema)
    """,
    "another-module": """
        import copy
        from torch.distributed.fsdp import fully_shard
        def build(model, head):
            fully_shard(model)
            return copy.deepcopy(head), copy.deepcopy(model.state_dict())
    """,
    "sharded-in-the-other-branch": """
        import copy
        from torch.distributed.fsdp import fully_shard
        def build(model, fsdp2):
            if fsdp2:
                fully_shard(model)
            else:
                ema = copy.deepcopy(model)
    """,
    "a-local-fully-shard": """
        import copy
        def fully_shard(m):
            return m
        def build(model):
            fully_shard(model)
            return copy.deepcopy(model)
    """,
    "fsdp1-wrap": """
        import copy
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        def build(model):
            model = FSDP(model)
            return copy.deepcopy(model)
    """,
}


@pytest.mark.parametrize("name", CLEAN)
def test_clean(name: str) -> None:
    assert places("PFL602", CLEAN[name]) == []
