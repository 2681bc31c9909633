"""PFL203: a wrapper's state_dict carries `module.` on every key; the bare model then loads none of them."""

from __future__ import annotations

import ast

from pitfall_lint.analysis.evidence import cite
from pitfall_lint.analysis.scopes import enclosing_function, local_value
from pitfall_lint.analysis.training import walk_same_scope
from pitfall_lint.analysis.wrappers import checkpoint_key, holds_wrapper, saved_wrapper_states
from pitfall_lint.context import FileContext
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.rules.base import Rule

_PREFIX_STRIPPERS = frozenset({"consume_prefix_in_state_dict_if_present"})


def _is_false(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is False


class WrappedStateDict(Rule):
    info = RuleInfo(
        code="PFL203",
        name="wrapped-state-dict",
        summary="Saving a DataParallel/DDP wrapper's state_dict (keys gain `module.`), or loading such keys into the bare model.",
        severity="warning",
        hint='save `model.module.state_dict()`; for old checkpoints, `consume_prefix_in_state_dict_if_present(state, "module.")`',
        verifiable=True,
    )
    # A save in this file, or a load of a checkpoint that another file of the project saves.
    triggers = (("state_dict",),)
    subscriptions = (ast.Call,)

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._prefixed_saves = 0
        self._lenient_loads: list[ast.Call] = []
        self._loads: list[tuple[ast.Call, list[ast.AST]]] = []

    def visit(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Call)
        if isinstance(node.func, ast.Attribute) and node.func.attr not in ("save", "load_state_dict"):
            return  # the cheap look first
        ancestors = self.ctx.ancestors
        if self.ctx.qualified_name(node.func) == "torch.save":
            for wrapper in saved_wrapper_states(self.ctx, node, ancestors):
                self._prefixed_saves += 1
                self.report(
                    node,
                    f"saves `{wrapper}.state_dict()` of a DataParallel/DDP wrapper: every key gains a "
                    f"`module.` prefix and will not load into the bare model; save `{wrapper}.module.state_dict()`",
                )
        elif isinstance(node.func, ast.Attribute) and node.func.attr == "load_state_dict":
            if any(k.arg == "strict" and _is_false(k.value) for k in node.keywords):
                self._lenient_loads.append(node)
            self._loads.append((node, list(ancestors)))

    def finish(self) -> None:
        if self._prefixed_saves:
            for call in self._lenient_loads:
                self.report(
                    call,
                    "`load_state_dict(..., strict=False)` in a file that saves `module.`-prefixed checkpoints: when the keys "
                    "carry the prefix nothing is loaded and no error is raised; strip it with "
                    "`torch.nn.modules.utils.consume_prefix_in_state_dict_if_present(state, \"module.\")`",
                )
            return  # the saves themselves are reported; the file's own loads follow from them
        for call, ancestors in self._loads:
            self._check_load_from_elsewhere(call, ancestors)

    def _check_load_from_elsewhere(self, call: ast.Call, ancestors: list[ast.AST]) -> None:
        """`model.load_state_dict(torch.load("ckpt.pt"))` into a bare model, of a checkpoint that another file
        of the project saves from a wrapper."""
        receiver = call.func.value  # type: ignore[attr-defined]
        if not call.args or (isinstance(receiver, ast.Name) and holds_wrapper(self.ctx, receiver.id, ancestors, call.lineno)):
            return
        path = self._loaded_path(call.args[0], ancestors, call.lineno)
        name = checkpoint_key(self.ctx, path, ancestors) if path is not None else None
        if name is None or self._strips_prefix(ancestors):
            return
        saved = self.ctx.project.wrapper_checkpoint(name)
        where, related = cite(self.ctx, saved, "saved from a wrapper")
        if not where:
            return  # saved in this file: reported there
        strict = next((k.value for k in call.keywords if k.arg == "strict"), None)
        effect = "nothing is loaded and no error is raised" if strict is not None and _is_false(strict) else "loading fails on the unexpected `module.` keys"
        self.report(
            call,
            f"loads `{name}`, a checkpoint of `module.`-prefixed keys{where}, into the bare model: {effect}; strip the "
            "prefix with `torch.nn.modules.utils.consume_prefix_in_state_dict_if_present(state, \"module.\")` "
            "or save `model.module.state_dict()` there",
            related=related,
        )

    def _loaded_path(self, value: ast.AST | None, ancestors: list[ast.AST], line: int) -> ast.AST | None:
        """The path of `torch.load(path)` (or `torch.load(path)["model"]`) that `value` holds."""
        if isinstance(value, ast.Name):
            value = local_value(value.id, enclosing_function(ancestors), line, self.ctx.tree)
        while isinstance(value, ast.Subscript):
            value = value.value
        if isinstance(value, ast.Call) and self.ctx.qualified_name(value.func, ancestors) == "torch.load" and value.args:
            return value.args[0]
        return None

    def _strips_prefix(self, ancestors: list[ast.AST]) -> bool:
        """Whether the loading code handles the prefix itself: a `module.` string, or torch's prefix stripper."""
        function = enclosing_function(ancestors)
        for node in walk_same_scope(function.body if function is not None else self.ctx.tree.body):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "module." in node.value:
                return True
            if isinstance(node, ast.Call) and (self.ctx.qualified_name(node.func, ancestors) or "").rpartition(".")[2] in _PREFIX_STRIPPERS:
                return True
        return False
