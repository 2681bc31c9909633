"""PFL212: the model's own methods and attributes used on its DataParallel/DDP wrapper instead of `.module`."""

from __future__ import annotations

import ast
from collections.abc import Sequence

from pitfall_lint.analysis.modules import same_module
from pitfall_lint.analysis.scopes import enclosing_function, is_name, reaching_values
from pitfall_lint.analysis.training import walk_same_scope
from pitfall_lint.analysis.wrapper_api import DATA_PARALLEL, DISTRIBUTED_DATA_PARALLEL, MODULE
from pitfall_lint.context import FileContext
from pitfall_lint.diagnostic import Related, RuleInfo
from pitfall_lint.rules.base import Rule

_WRAPPERS = {
    "torch.nn.DataParallel": ("DataParallel", MODULE | DATA_PARALLEL),
    "torch.nn.parallel.DistributedDataParallel": ("DistributedDataParallel", MODULE | DISTRIBUTED_DATA_PARALLEL),
}
_KNOWN = MODULE | DATA_PARALLEL | DISTRIBUTED_DATA_PARALLEL
_GUARDS = frozenset({"hasattr", "getattr", "isinstance"})
_WRAPPER_SUFFIXES = ("DataParallel", "DDP", "FSDP")
_CAUGHT = frozenset({"AttributeError", "Exception", "BaseException"})


def _wraps(ctx: FileContext, value: ast.AST, ancestors: Sequence[ast.AST]) -> list[ast.Call]:
    """The wrapper calls a value may be: `DDP(m)`, `DDP(m).cuda()`, either branch of `DDP(m) if ddp else m`."""
    value = same_module(value)
    if isinstance(value, ast.IfExp):
        return _wraps(ctx, value.body, ancestors) + _wraps(ctx, value.orelse, ancestors)
    if isinstance(value, ast.Call) and ctx.qualified_name(value.func, ancestors) in _WRAPPERS:
        return [value]
    return []


def _guarded(name: str, ancestors: Sequence[ast.AST], node: ast.AST) -> bool:
    """Under a test that looks at the name first (`hasattr(model, "x")`, `isinstance(model, DDP)`), or in a try that
    catches the AttributeError."""
    chain = [*ancestors, node]
    for parent, child in zip(chain, chain[1:]):
        if isinstance(parent, (ast.If, ast.IfExp, ast.While)) and child is not parent.test and _looks_at(parent.test, name):
            return True
        if isinstance(parent, ast.BoolOp) and any(_looks_at(v, name) for v in parent.values[: parent.values.index(child)]):
            return True  # `hasattr(model, "x") and model.x`
        if isinstance(parent, ast.Try) and child in parent.body:
            caught = {ast.unparse(h.type).rpartition(".")[2] if h.type else "BaseException" for h in parent.handlers}
            caught |= {n.id for h in parent.handlers if isinstance(h.type, ast.Tuple) for n in h.type.elts if isinstance(n, ast.Name)}
            if caught & _CAUGHT:
                return True
    return False


def _looks_at(test: ast.AST, name: str) -> bool:
    return any(
        isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id in _GUARDS and c.args and is_name(c.args[0], name)
        for c in ast.walk(test)
    )


class WrapperAttributeWithoutModule(Rule):
    info = RuleInfo(
        code="PFL212",
        name="wrapper-attribute-without-module",
        summary="A method or attribute of the model used on its DataParallel/DDP wrapper: AttributeError, or a silent new attribute.",
        severity="error",
        hint="reach the model through the wrapper's `.module` (`model.module.freeze_trunk()`)",
        verifiable=True,
    )
    triggers = (("DataParallel",),)
    subscriptions = (ast.Assign, ast.AnnAssign, ast.Attribute)

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._wrapper_names: set[str] = set()

    def visit(self, node: ast.AST) -> None:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if node.value is not None and _wraps(self.ctx, node.value, self.ctx.ancestors):
                self._wrapper_names.update(t.id for t in targets if isinstance(t, ast.Name))
            return
        assert isinstance(node, ast.Attribute)
        if not (isinstance(node.value, ast.Name) and node.value.id in self._wrapper_names) or node.attr in _KNOWN:
            return
        name = node.value.id
        ancestors = self.ctx.ancestors
        scope = enclosing_function(ancestors) or self.ctx.tree
        values = reaching_values(name, scope, node, ancestors)
        wraps = [w for v in values for w in _wraps(self.ctx, v, ancestors)]
        if not wraps or any(self._other_wrapper(v, ancestors) for v in values):
            return
        wrapper, api = _WRAPPERS[self.ctx.qualified_name(wraps[0].func, ancestors) or ""]
        if node.attr in api or _guarded(name, ancestors, node):
            return
        owner = next(filter(None, (self._member_of(wrap, node.attr) for wrap in wraps)), None)
        related = (Related(self.ctx.path, wraps[0].lineno, f"wrapped in {wrapper}"),)
        held = f"`{name}` holds the {wrapper} wrapper (line {wraps[0].lineno})"
        if isinstance(node.ctx, ast.Store):
            if owner is None or owner[2]:
                return  # bookkeeping on the wrapper itself, as far as the source tells
            self.report(
                node,
                f"`{name}.{node.attr} = ...` sets a new attribute on the wrapper: {held}, and the {owner[0]} inside, whose "
                f"code reads `self.{node.attr}`, never sees it; set `{name}.module.{node.attr}`",
                related=(*related, owner[1]),
            )
            return
        if self._set_on_wrapper_before(scope, name, node):
            return
        parent = ancestors[-1] if ancestors else None
        used = f"`{name}.{node.attr}()`" if isinstance(parent, ast.Call) and parent.func is node else f"`{name}.{node.attr}`"
        what = f" ({'a method' if owner[2] else 'an attribute'} of {owner[0]})" if owner else ""
        self.report(
            node,
            f"{used}: {held}, which has no `{node.attr}`{what}: AttributeError: '{wrapper}' object has no attribute "
            f"'{node.attr}'; use {used.replace(f'`{name}.', f'`{name}.module.', 1)}",
            related=(*related, owner[1]) if owner else related,
        )

    def _other_wrapper(self, value: ast.AST, ancestors: Sequence[ast.AST]) -> bool:
        """Another library's wrapper on some path (apex's DDP, FSDP, ...): it may well define the attribute."""
        value = same_module(value)
        if not isinstance(value, ast.Call):
            return False
        called = self.ctx.qualified_name(value.func, ancestors) or ast.unparse(value.func)
        return called not in _WRAPPERS and called.rpartition(".")[2].endswith(_WRAPPER_SUFFIXES)

    def _member_of(self, wrap: ast.Call, attribute: str) -> tuple[str, Related, bool] | None:
        """(class, where it is, whether it is a method) of the wrapped project class that defines or reads the name."""
        for path, name, shown, line in self.ctx.project.wrapped_classes(wrap) or ():
            methods, reads = self.ctx.project.members(path, name)
            if attribute in methods or attribute in reads:
                short = name.rpartition(".")[2]
                what = f"{short} defines `{attribute}`" if attribute in methods else f"{short}'s code reads `self.{attribute}`"
                return short, Related(shown, line, what), attribute in methods
        return None

    def _set_on_wrapper_before(self, scope: ast.AST, name: str, node: ast.Attribute) -> bool:
        """`model.epoch = 3` earlier in the scope: the wrapper then has the attribute (the store is the finding)."""
        body = getattr(scope, "body", [])
        return any(
            isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and n.attr == node.attr and is_name(n.value, name)
            and (n.lineno, n.col_offset) < (node.lineno, node.col_offset)
            for n in walk_same_scope(body)
        )
