"""PFL601 tied-weights-in-separate-shards: modules that share a parameter put in different `fully_shard` groups."""

from __future__ import annotations

import pytest
from fsdp_cases import SPELLINGS, findings, marked, places

MODEL = """
import torch.nn as nn
class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = nn.Embedding(10, 4)
        self.lm_head = nn.Linear(4, 10, bias=False)
        self.lm_head.weight = self.embed_tokens.weight
"""


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_every_spelling_of_fully_shard(spelling: str) -> None:
    imported, call = SPELLINGS[spelling]
    source = f"{MODEL}{imported}\ndef apply_fsdp(model):\n    {call}(model.embed_tokens)\n    {call}(model.lm_head)\n"
    assert places("PFL601", source) == [("PFL601", "train/fsdp_main.py", 12)]


def test_the_message_names_both_groups_and_the_fix() -> None:
    (finding,) = findings("PFL601", MODEL + """
from torch.distributed.fsdp import fully_shard
def shard(model):
    fully_shard(model.embed_tokens)
    for layer in model.layers:
        fully_shard(layer)
    fully_shard(model)
""")
    assert finding.line == 15
    assert finding.message == (
        "`embed_tokens` and `lm_head` share a parameter (a tie in this file), but `fully_shard` puts "
        "`model.embed_tokens` in a group of its own at line 12 and `lm_head` in another (line 15): torch 2.12 raises "
        "`ValueError: Parameter ... is shared with a parameter already managed by another FSDP group`, and older "
        "releases never update the weight on some ranks; shard both in one call: "
        "`fully_shard([model.embed_tokens, model.lm_head])`"
    )


FLAGGED = {
    "tied-in-the-sharding-code": """
        from torch.distributed.fsdp import fully_shard
        def shard(model):
            model.output.weight = model.tok_embeddings.weight
            fully_shard(model.tok_embeddings)
            fully_shard(model.output)  # expect: PFL601
            fully_shard(model)
    """,
}


@pytest.mark.parametrize("name", FLAGGED)
def test_flagged(name: str) -> None:
    assert places("PFL601", FLAGGED[name]) == marked("PFL601", FLAGGED[name]) != []


CLEAN = {
    "one-group-for-both": MODEL + """
from torch.distributed.fsdp import fully_shard
def shard(model):
    fully_shard([model.embed_tokens, model.lm_head])
    fully_shard(model)
""",
    "only-the-root": MODEL + """
from torch.distributed.fsdp import fully_shard
def shard(model):
    for layer in model.layers:
        fully_shard(layer)
    fully_shard(model)
""",
    "no-tie-in-the-file": """
from torch.distributed.fsdp import fully_shard
def shard(model):
    fully_shard(model.embed_tokens)
    fully_shard(model.lm_head)
    fully_shard(model)
""",
    "root-before-the-part": MODEL + """
from torch.distributed.fsdp import fully_shard
def shard(model, other):
    fully_shard(other)
    fully_shard(model.embed_tokens)
""",
}


@pytest.mark.parametrize("name", CLEAN)
def test_clean(name: str) -> None:
    assert places("PFL601", CLEAN[name]) == []
