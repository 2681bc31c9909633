"""PFL602: `copy.deepcopy` of a module that `fully_shard` has sharded (an EMA or teacher copy)."""

from __future__ import annotations

import ast

from pitfall_lint.analysis.fsdp import sharding_of
from pitfall_lint.analysis.training import dotted
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.rules.base import Rule

_DEEPCOPY = frozenset({"copy.deepcopy"})


class DeepcopyOfShardedModule(Rule):
    info = RuleInfo(
        code="PFL602",
        name="deepcopy-of-sharded-module",
        summary="`copy.deepcopy` of a module that `fully_shard` sharded: FSDP2 raises `AssertionError: FSDP does not support deepcopy`.",
        severity="error",
        preview=True,
        verifiable=True,
        hint="copy the model before `fully_shard` (and shard the copy too), or build a new model and load the state_dict into it",
    )
    triggers = (("fully_shard",), ("deepcopy",))
    subscriptions = (ast.Call,)

    def visit(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Call)
        if len(node.args) != 1 or self.ctx.qualified_name(node.func) not in _DEEPCOPY:
            return
        name = dotted(node.args[0])
        site = sharding_of(self.ctx, name, self.ctx.ancestors, node.lineno, parts=True, use=node) if name is not None else None
        if site is None:
            return
        self.report(
            node,
            f"`{name}` holds a module that `fully_shard` sharded at line {site.line}, and FSDP2 modules refuse a deepcopy "
            "(`AssertionError: FSDP does not support deepcopy`); copy the model before sharding it, or build a new "
            "model and load the state_dict into it",
        )
