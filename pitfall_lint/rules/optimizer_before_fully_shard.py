"""PFL606: an optimizer built from a model's parameters before `fully_shard` replaced them with sharded ones."""

from __future__ import annotations

import ast

from pitfall_lint.analysis.fsdp import shards_parameters_of, sites_in_scope_of
from pitfall_lint.analysis.ranks import ancestors_of
from pitfall_lint.analysis.scopes import exclusive_branches
from pitfall_lint.analysis.training import dotted, is_optimizer_class
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.rules.base import Rule

_PARAMETER_METHODS = frozenset({"parameters", "named_parameters"})


def _models(argument: ast.AST) -> list[str]:
    """`model` for every `model.parameters()` / `model.named_parameters()` in the optimizer's parameter argument
    (a list of groups or a comprehension over them included)."""
    return [
        name
        for node in ast.walk(argument)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _PARAMETER_METHODS
        and (name := dotted(node.func.value)) is not None
    ]


class OptimizerBeforeFullyShard(Rule):
    info = RuleInfo(
        code="PFL606",
        name="optimizer-before-fully-shard",
        summary="An optimizer built from a model's parameters before `fully_shard` replaced them with DTensor parameters: it steps the old tensors, and the model never trains.",
        severity="error",
        preview=True,
        hint="build the optimizer after every `fully_shard` call, from the sharded model's `parameters()`",
    )
    triggers = (("fully_shard",), ("parameters",))
    subscriptions = (ast.Call,)

    def visit(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Call)
        if not isinstance(node.func, (ast.Name, ast.Attribute)) or not (node.args or node.keywords):
            return
        if not is_optimizer_class(self.ctx.qualified_name(node.func)):
            return
        argument = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "params"), None)
        if argument is None:
            return
        ancestors = self.ctx.ancestors
        for model in dict.fromkeys(_models(argument)):
            if model.startswith("self."):
                continue  # a class's methods run in an order this file does not show
            later = [
                site for site in sites_in_scope_of(self.ctx, model, ancestors)
                if site.line > node.lineno and shards_parameters_of(site, model)
                and not exclusive_branches(site.call, node, ancestors_of(self.ctx, site.call), ancestors)
            ]
            if later and not self._rebuilt_after(node, later[-1].line):
                self.report(
                    node,
                    f"the optimizer takes `{model}`'s parameters here, but `fully_shard` at line {later[0].line} replaces "
                    "them with new (DTensor) parameters: the optimizer steps the old tensors and the model never "
                    "trains; build it after the last `fully_shard` call",
                )
                return

    def _rebuilt_after(self, optimizer: ast.Call, line: int) -> bool:
        """The same variable is given a new optimizer after the sharding (the first was a throwaway)."""
        statement = self.ctx.ancestors[-1] if self.ctx.ancestors else None
        if not isinstance(statement, ast.Assign) or statement.value is not optimizer or len(statement.targets) != 1:
            return False
        target = dotted(statement.targets[0])
        scope = next((a for a in reversed(self.ctx.ancestors) if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef))), self.ctx.tree)
        return any(
            isinstance(n, ast.Assign) and n.lineno > line and isinstance(n.value, ast.Call)
            and any(dotted(t) == target for t in n.targets) and is_optimizer_class(self.ctx.qualified_name(n.value.func, [scope]))
            for n in ast.walk(scope)
        )
