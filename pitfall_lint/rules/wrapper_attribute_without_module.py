"""PFL212: the model's own methods and attributes used on its DataParallel/DDP wrapper instead of `.module`."""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence

from pitfall_lint.analysis.modules import same_module
from pitfall_lint.analysis.ranks import ancestors_of
from pitfall_lint.analysis.scopes import FUNCTIONS, enclosing_function, enclosing_method, is_name, reaching_values, self_name
from pitfall_lint.analysis.training import walk_same_scope
from pitfall_lint.analysis.wrap_calls import may_call_a_wrapper
from pitfall_lint.analysis.wrapper_api import DATA_PARALLEL, DISTRIBUTED_DATA_PARALLEL, MODULE
from pitfall_lint.analysis.wrappers import wrap_in
from pitfall_lint.context import FileContext
from pitfall_lint.diagnostic import Related, RuleInfo
from pitfall_lint.rules.base import Rule

_WRAPPERS = {
    "torch.nn.DataParallel": ("DataParallel", MODULE | DATA_PARALLEL),
    "torch.nn.parallel.DistributedDataParallel": ("DistributedDataParallel", MODULE | DISTRIBUTED_DATA_PARALLEL),
}
_WRAPPER_NAMES = frozenset(_WRAPPERS)
_KNOWN = MODULE | DATA_PARALLEL | DISTRIBUTED_DATA_PARALLEL
_GUARDS = frozenset({"hasattr", "getattr", "isinstance"})
_WRAPPER_SUFFIXES = ("DataParallel", "DDP", "FSDP")
_CAUGHT = frozenset({"AttributeError", "Exception", "BaseException"})


def _wraps(ctx: FileContext, value: ast.AST, ancestors: Sequence[ast.AST]) -> list[ast.Call]:
    """The wrapper calls a value may be: `DDP(m)`, `DDP(m).cuda()`, `model.cuda()` where `model` holds one, either
    branch of `DDP(m) if ddp else m`."""
    choice = same_module(value)
    if isinstance(choice, ast.IfExp):
        return _wraps(ctx, choice.body, ancestors) + _wraps(ctx, choice.orelse, ancestors)
    wrap = wrap_in(ctx, value, ancestors, _WRAPPER_NAMES)
    return [wrap] if wrap is not None else []


def _guarded(holder: ast.expr, ancestors: Sequence[ast.AST], node: ast.AST) -> bool:
    """Under a test that looks at the holder first (`hasattr(model, "x")`, `isinstance(self.model, DDP)`), or in a
    try that catches the AttributeError."""
    chain = [*ancestors, node]
    shape = ast.dump(holder)
    for parent, child in zip(chain, chain[1:]):
        if isinstance(parent, (ast.If, ast.IfExp, ast.While)) and child is not parent.test and _looks_at(parent.test, shape):
            return True
        if isinstance(parent, ast.BoolOp) and any(_looks_at(v, shape) for v in parent.values[: parent.values.index(child)]):
            return True  # `hasattr(model, "x") and model.x`
        if isinstance(parent, ast.Try) and child in parent.body:
            caught = {ast.unparse(h.type).rpartition(".")[2] if h.type else "BaseException" for h in parent.handlers}
            caught |= {n.id for h in parent.handlers if isinstance(h.type, ast.Tuple) for n in h.type.elts if isinstance(n, ast.Name)}
            if caught & _CAUGHT:
                return True
    return False


def _looks_at(test: ast.AST, holder: str) -> bool:
    """`hasattr(<holder>, ...)`, `getattr(...)` or `isinstance(...)` in the test (the holder as `ast.dump` gives it)."""
    return any(
        isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id in _GUARDS and c.args
        and ast.dump(c.args[0]) == holder
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

    @classmethod
    def may_apply(cls, data: bytes) -> bool:
        """Every finding is of a wrapper the file makes itself: a file that only names one (Lightning's trainer.py, in
        a docstring) had every method of its classes walked for a wrap."""
        return may_call_a_wrapper(data)

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._wrapper_names: set[str] = set()
        self._holders: dict[int, dict[str, list[tuple[ast.Call, ast.AST]]]] = {}

    def visit(self, node: ast.AST) -> None:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if node.value is not None and _wraps(self.ctx, node.value, self.ctx.ancestors):
                self._wrapper_names.update(t.id for t in targets if isinstance(t, ast.Name))
            return
        assert isinstance(node, ast.Attribute)
        if node.attr in _KNOWN:
            return
        holder = node.value
        if isinstance(holder, ast.Name) and holder.id in self._wrapper_names:
            self._check_name(node, holder.id)
        elif isinstance(holder, ast.Attribute) and isinstance(holder.value, ast.Name):
            self._check_instance_attribute(node, holder)

    def _check_name(self, node: ast.Attribute, name: str) -> None:
        """`model.x` where `model` may hold a wrapper at this point of the function (or module)."""
        ancestors = self.ctx.ancestors
        scope = enclosing_function(ancestors) or self.ctx.tree
        values = reaching_values(name, scope, node, ancestors)
        wraps = [w for v in values for w in _wraps(self.ctx, v, ancestors)]
        if wraps and not any(self._other_wrapper(v, ancestors) for v in values):
            self._check_use(node, wraps, lambda: self._set_on_wrapper_before(scope, name, node, wraps))

    def _check_instance_attribute(self, node: ast.Attribute, holder: ast.Attribute) -> None:
        """`self.model.x` where some method of the class stores a wrapper in `self.model`."""
        found = enclosing_method(self.ctx.ancestors)
        if found is None or not is_name(holder.value, self_name(found[1]) or ""):
            return
        stored = self._holders_of(found[0]).get(holder.attr)
        if not stored:
            return
        # A wrap in `__init__` holds in every other method; a wrap in another method only after it in that method: two
        # methods of the class may run in either order (timm's tasks compile before `prepare_distributed` wraps).
        position = (node.lineno, node.col_offset)
        wraps = [
            w for w, method in stored
            if (method is not found[1] and getattr(method, "name", "") == "__init__")
            or (method is found[1] and (w.lineno, w.col_offset) < position)
        ]
        if wraps:
            self._check_use(node, wraps, lambda: False)

    def _holders_of(self, cls: ast.ClassDef) -> dict[str, list[tuple[ast.Call, ast.AST]]]:
        """The instance attributes some method stores a wrapper in, with the wraps and their methods; not those that
        also get another library's wrapper or the wrapper's `.module` back."""
        if id(cls) not in self._holders:
            stored: dict[str, list[tuple[ast.AST, ast.AST]]] = {}
            for method in (m for m in cls.body if isinstance(m, FUNCTIONS)):
                instance = self_name(method)
                for statement in ast.walk(method) if instance else ():
                    if isinstance(statement, (ast.Assign, ast.AnnAssign)) and statement.value is not None:
                        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
                        for target in targets:
                            if isinstance(target, ast.Attribute) and is_name(target.value, instance):
                                stored.setdefault(target.attr, []).append((statement.value, method))
            holders: dict[str, list[tuple[ast.Call, ast.AST]]] = {}
            for attribute, values in stored.items():
                wraps = [(w, method) for value, method in values for w in _wraps(self.ctx, value, [cls, method])]
                unwrapped = any(isinstance(v, ast.Attribute) and v.attr == "module" for v, _ in values)
                if wraps and not unwrapped and not any(self._other_wrapper(v, [cls, m]) for v, m in values):
                    holders[attribute] = wraps
            self._holders[id(cls)] = holders
        return self._holders[id(cls)]

    def _check_use(self, node: ast.Attribute, wraps: list[ast.Call], set_before: Callable[[], bool]) -> None:
        ancestors = self.ctx.ancestors
        holder = ast.unparse(node.value)
        # The wrap's own scope names the wrapper (an import inside the method that wraps is not seen from here).
        wrapper, api = _WRAPPERS[self.ctx.qualified_name(wraps[0].func, ancestors_of(self.ctx, wraps[0])) or ""]
        if node.attr in api or _guarded(node.value, ancestors, node):
            return
        owner = next(filter(None, (self._member_of(wrap, node.attr) for wrap in wraps)), None)
        related = (Related(self.ctx.path, wraps[0].lineno, f"wrapped in {wrapper}"),)
        held = f"`{holder}` holds the {wrapper} wrapper (line {wraps[0].lineno})"
        if isinstance(node.ctx, ast.Store):
            if owner is None or owner[2]:
                return  # bookkeeping on the wrapper itself, as far as the source tells
            self.report(
                node,
                f"`{holder}.{node.attr} = ...` sets a new attribute on the wrapper: {held}, and the {owner[0]} inside, "
                f"whose code reads `self.{node.attr}`, never sees it; set `{holder}.module.{node.attr}`",
                related=(*related, owner[1]),
            )
            return
        if set_before():
            return
        parent = ancestors[-1] if ancestors else None
        used = f"{holder}.{node.attr}" + ("()" if isinstance(parent, ast.Call) and parent.func is node else "")
        what = f" ({'a method' if owner[2] else 'an attribute'} of {owner[0]})" if owner else ""
        self.report(
            node,
            f"`{used}`: {held}, which has no `{node.attr}`{what}: AttributeError: '{wrapper}' object has no attribute "
            f"'{node.attr}'; use `{holder}.module.{used[len(holder) + 1:]}`",
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

    def _set_on_wrapper_before(self, scope: ast.AST, name: str, node: ast.Attribute, wraps: list[ast.Call]) -> bool:
        """`model.epoch = 3` earlier in the scope, after a wrap: the wrapper then has the attribute (the assignment
        is the finding, when it is one)."""
        body = getattr(scope, "body", [])
        wrapped = min((w.lineno, w.col_offset) for w in wraps)
        return any(
            isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and n.attr == node.attr and is_name(n.value, name)
            and wrapped < (n.lineno, n.col_offset) < (node.lineno, node.col_offset)
            for n in walk_same_scope(body)
        )
