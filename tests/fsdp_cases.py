"""Helpers of the FSDP2/DTensor rules' tests: the diagnostics of one rule on a source, with their places."""

from __future__ import annotations

from textwrap import dedent

from pitfall_lint.diagnostic import Diagnostic
from pitfall_lint.engine import Engine
from pitfall_lint.rules import all_rules

# The spellings of `fully_shard` that torch 2.13 accepts, each as the import and the call's name.
SPELLINGS = {
    "public": ("from torch.distributed.fsdp import fully_shard", "fully_shard"),
    "aliased": ("from torch.distributed.fsdp import fully_shard as shard", "shard"),
    "module": ("import torch.distributed.fsdp as fsdp", "fsdp.fully_shard"),
    "composable": ("from torch.distributed._composable.fsdp import fully_shard", "fully_shard"),
    "composable-dotted": ("import torch.distributed._composable.fsdp", "torch.distributed._composable.fsdp.fully_shard"),
    "private": ("from torch.distributed.fsdp._fully_shard import fully_shard", "fully_shard"),
}


def findings(code: str, source: str, path: str = "train/fsdp_main.py") -> list[Diagnostic]:
    """What the rule `code` reports on the source (dedented), in order."""
    (rule,) = [r for r in all_rules() if r.info.code == code]
    result = Engine((rule,)).check_source(path, dedent(source).encode())
    assert result.internal_error is None, result.internal_error
    return sorted(result.diagnostics)


def places(code: str, source: str, path: str = "train/fsdp_main.py") -> list[tuple[str, str, int]]:
    return [(d.code, d.path, d.line) for d in findings(code, source, path)]


def marked(code: str, source: str, path: str = "train/fsdp_main.py") -> list[tuple[str, str, int]]:
    """The places the source's `# expect: PFLxxx` marks give for the rule, in order."""
    from marks import expected

    return sorted((code, path, line) for mark, line in expected(dedent(source)) if mark == code)
