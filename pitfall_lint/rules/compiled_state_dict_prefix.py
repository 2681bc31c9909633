"""PFL213: a `torch.compile`d module's state_dict saved: every key gains `_orig_mod.`, and no file strips it."""

from __future__ import annotations

import ast

from pitfall_lint.analysis.ranks import ancestors_of
from pitfall_lint.analysis.wrappers import checkpoint_key, holds_wrapper, loaded_checkpoint, same_checkpoint, saved_wrapper_states
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.rules.base import Rule

_COMPILE = frozenset({"torch.compile"})
_PREFIX = b"_orig_mod"


class CompiledStateDictPrefix(Rule):
    info = RuleInfo(
        code="PFL213",
        name="compiled-state-dict-prefix",
        summary="Saving the state_dict of the module `torch.compile` returned: every key gains `_orig_mod.`, so an uncompiled model does not load it (silently with `strict=False`).",
        severity="warning",
        preview=True,
        hint="save the original module's state_dict (`model._orig_mod.state_dict()`, or keep the uncompiled model in a variable of its own)",
    )
    triggers = (("compile",), ("state_dict",))
    subscriptions = (ast.Call,)

    def visit(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Call)
        if self.ctx.qualified_name(node.func) != "torch.save" or self._handles_prefix() or self._resumed_only(node):
            return
        for compiled in saved_wrapper_states(self.ctx, node, self.ctx.ancestors, _COMPILE):
            self.report(
                node,
                f"saves `{compiled}.state_dict()` of the module `torch.compile` returned: every key gains an "
                "`_orig_mod.` prefix, so loading it into an uncompiled model fails on the keys, or with `strict=False` "
                f"loads nothing and leaves the model as initialised; save `{compiled}._orig_mod.state_dict()`, or "
                "the state_dict of the model before compiling",
            )

    def _resumed_only(self, save: ast.Call) -> bool:
        """The file reads the checkpoint back into a compiled module (a resume), where the prefixed keys load."""
        path = save.args[1] if len(save.args) > 1 else None
        name = checkpoint_key(self.ctx, path, self.ctx.ancestors) if path is not None else None
        if name is None:
            return False
        for node in ast.walk(self.ctx.tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "load_state_dict"):
                continue
            receiver, chain = node.func.value, ancestors_of(self.ctx, node)
            loaded = loaded_checkpoint(self.ctx, node.args[0], chain, node.lineno) if node.args else None
            if (
                loaded is not None and same_checkpoint(loaded, name) and isinstance(receiver, ast.Name)
                and holds_wrapper(self.ctx, receiver.id, chain, node.lineno, _COMPILE)
            ):
                return True
        return False

    def _handles_prefix(self) -> bool:
        """The file's code spells `_orig_mod` (`k.replace("_orig_mod.", "")`, `model._orig_mod`): it handles the
        prefix somewhere. A docstring or a comment that names it does not count."""
        key = ("handles-orig-mod",)
        if key not in self.ctx.memo:
            docstrings = {id(s.value) for s in ast.walk(self.ctx.tree) if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)}
            self.ctx.memo[key] = _PREFIX in self.ctx.text.data and any(
                (isinstance(n, ast.Attribute) and n.attr == "_orig_mod")
                or (isinstance(n, ast.Constant) and isinstance(n.value, str) and "_orig_mod" in n.value and id(n) not in docstrings)
                for n in ast.walk(self.ctx.tree)
            )
        return self.ctx.memo[key]  # type: ignore[return-value]
