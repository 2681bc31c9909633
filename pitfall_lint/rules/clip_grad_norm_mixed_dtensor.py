"""PFL605: `clip_grad_norm_` over a model whose parameters are partly DTensors (sharded parts) and partly plain."""

from __future__ import annotations

import ast

from pitfall_lint.analysis.fsdp import ShardSite, sharding_scopes, sites_in_scope_of
from pitfall_lint.analysis.training import dotted, walk_same_scope
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.rules.base import Rule

_CLIPPERS = frozenset({"torch.nn.utils.clip_grad_norm_", "torch.nn.utils.clip_grad.clip_grad_norm_"})


class ClipGradNormMixedDtensor(Rule):
    info = RuleInfo(
        code="PFL605",
        name="clip-grad-norm-mixed-dtensor",
        summary="`clip_grad_norm_(model.parameters())` where `fully_shard` sharded only parts of the model, never its root: plain and DTensor gradients mix, and the norm fails.",
        severity="error",
        preview=True,
        verifiable=True,
        hint="shard the root as well (`fully_shard(model)` after its parts), so that every parameter is a DTensor",
    )
    triggers = (("fully_shard",), ("clip_grad_norm_",))
    subscriptions = (ast.Call,)

    def visit(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Call)
        if not node.args or self.ctx.qualified_name(node.func) not in _CLIPPERS:
            return
        parameters = node.args[0]
        if not (isinstance(parameters, ast.Call) and isinstance(parameters.func, ast.Attribute) and parameters.func.attr == "parameters"):
            return
        model = dotted(parameters.func.value)
        if model is None:
            return
        sites = sites_in_scope_of(self.ctx, model, self.ctx.ancestors)
        whole = [site for site in sites if model in site.targets or site.bound == model]
        # Parts by name (`model.layers`): a loop over the model's own children may shard every parameter it has.
        parts = [site for site in sites if any(t.startswith(model + ".") and t != model + ".*" for t in site.targets)]
        if not parts or whole or self._passed_on(model, parts):
            return
        self.report(
            node,
            f"`fully_shard` sharded only parts of `{model}` (line {parts[0].line}) and never `{model}` itself, so its "
            "other parameters stay plain tensors: the gradients mix DTensor and torch.Tensor, and the norm fails (`RuntimeError: "
            "aten._foreach_norm.Scalar got mixed torch.Tensor and DTensor`); shard the root too (`fully_shard("
            f"{model})` after its parts), or clip each kind of parameter on its own",
        )

    def _passed_on(self, model: str, parts: list[ShardSite]) -> bool:
        """`model` given to another call where the sharding is looked for (`apply_fsdp(model)`), which may shard its
        root."""
        scopes, _ = sharding_scopes(self.ctx, model, self.ctx.ancestors)
        sharding = {id(site.call) for site in parts}
        return any(
            isinstance(n, ast.Call) and id(n) not in sharding and any(dotted(a) == model for a in n.args)
            for scope in scopes for n in walk_same_scope(scope.body)  # type: ignore[attr-defined]
        )
