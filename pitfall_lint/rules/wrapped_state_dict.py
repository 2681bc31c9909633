"""PFL203: a wrapper's state_dict carries `module.` on every key; strict=False then silently loads nothing."""

from __future__ import annotations

import ast

from pitfall_lint.analysis.scopes import enclosing_function, local_value
from pitfall_lint.analysis.wrappers import holds_wrapper
from pitfall_lint.context import FileContext
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.rules.base import Rule

_SAVED_POSITION = 0


def _state_dict_receivers(value: ast.AST) -> list[ast.expr]:
    """`X` for every `X.state_dict()` in the saved object (directly, or as values of a dict literal)."""
    values = list(value.values) if isinstance(value, ast.Dict) else [value]
    return [
        v.func.value
        for v in values
        if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr == "state_dict"
    ]


class WrappedStateDict(Rule):
    info = RuleInfo(
        code="PFL203",
        name="wrapped-state-dict",
        summary="Saving a DataParallel/DDP wrapper's state_dict (keys gain `module.`), or loading such keys with strict=False.",
        severity="warning",
        hint='save `model.module.state_dict()`; for old checkpoints, `consume_prefix_in_state_dict_if_present(state, "module.")`',
        verifiable=True,
    )
    triggers = (("state_dict",), ("DataParallel", "DistributedDataParallel"))
    subscriptions = (ast.Call,)

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._prefixed_saves = 0
        self._lenient_loads: list[ast.Call] = []

    def visit(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Call)
        ancestors = self.ctx.ancestors
        if self.ctx.qualified_name(node.func) == "torch.save" and node.args:
            saved = node.args[_SAVED_POSITION]
            if isinstance(saved, ast.Name):
                saved = local_value(saved.id, enclosing_function(ancestors), node.lineno, self.ctx.tree) or saved
            for receiver in _state_dict_receivers(saved):
                if isinstance(receiver, ast.Name) and holds_wrapper(self.ctx, receiver.id, ancestors, node.lineno):
                    self._prefixed_saves += 1
                    self.report(
                        node,
                        f"saves `{receiver.id}.state_dict()` of a DataParallel/DDP wrapper: every key gains a "
                        f"`module.` prefix and will not load into the bare model; save `{receiver.id}.module.state_dict()`",
                    )
        elif (
            isinstance(node.func, ast.Attribute)
            and node.func.attr == "load_state_dict"
            and any(k.arg == "strict" and isinstance(k.value, ast.Constant) and k.value.value is False for k in node.keywords)
        ):
            self._lenient_loads.append(node)

    def finish(self) -> None:
        if not self._prefixed_saves:
            return  # strict=False alone is common and fine for partial loads
        for call in self._lenient_loads:
            self.report(
                call,
                "`load_state_dict(..., strict=False)` in a file that saves `module.`-prefixed checkpoints: when the keys "
                "carry the prefix nothing is loaded and no error is raised; strip it with "
                "`torch.nn.modules.utils.consume_prefix_in_state_dict_if_present(state, \"module.\")`",
            )
