"""PFL101: a callable bound to the module, stored on the module, runs on the original's parameters."""

from __future__ import annotations

import ast

from pitfall_lint.analysis.modules import (
    MethodKind,
    class_methods,
    data_parallel_reach,
    inherited_methods,
    is_module_class,
    wrapped_at,
)
from pitfall_lint.analysis.scopes import enclosing_method, is_name, mentions_name, self_name
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.rules.base import WrappedModuleRule


def _may_store_on_an_instance(node: ast.AST) -> bool:
    """A cheap look at the node's shape before any scope is computed."""
    if isinstance(node, ast.Call):
        return isinstance(node.func, ast.Name) and node.func.id == "setattr"
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]  # type: ignore[attr-defined]
    return any(isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) for t in targets)


class BoundMethodOnModule(WrappedModuleRule):
    info = RuleInfo(
        code="PFL101",
        name="bound-method-on-module",
        summary="A bound method of the module stored in an instance attribute breaks nn.DataParallel replicas.",
        severity="warning",
        hint="define a method that dispatches (`def forward(self, x): return self.other(x)`), or store the method's name and `getattr(self, name)` at call time",
        verifiable=True,
    )
    # A class that stores on an instance something bound to it (`= self.x`, `[self.a, ...]`, `{"a": self.a}`,
    # partial, lambda, MethodType, setattr); no Module word: its Module base may be in another file.
    triggers = (
        ("class",),
        ("= self.", "=self.", "setattr(", "lambda", "partial(", "MethodType(", "[self.", "{self.", ": self."),
    )
    subscriptions = (ast.Assign, ast.AnnAssign, ast.Call)

    def visit(self, node: ast.AST) -> None:
        if not _may_store_on_an_instance(node):
            return
        found = enclosing_method(self.ctx.ancestors)
        if found is None:
            return
        cls, method = found
        instance = self_name(method)
        if instance is None:
            return
        ancestors = self.ctx.ancestors
        for attribute, value in self._stored_values(node, instance):
            # The file's own knowledge first; the project only for a name its bases may define elsewhere.
            culprit = self._bound_callable(value, instance, class_methods(self.ctx, cls))
            if (
                culprit is None
                and isinstance(value, ast.Attribute)
                and is_name(value.value, instance)
                and value.attr not in class_methods(self.ctx, cls)
            ):
                culprit = self._bound_callable(value, instance, inherited_methods(self.ctx, cls, ancestors))
            if culprit is None or not is_module_class(self.ctx, cls, ancestors):
                continue
            reach = data_parallel_reach(self.ctx, cls, ancestors)
            if reach is None:
                return  # nothing in the project can run this module under nn.DataParallel
            where, related = wrapped_at(self.ctx, reach)
            self.report(
                node,
                f"`{instance}.{attribute}` holds {culprit}, bound to the original module: nn.DataParallel "
                f"replicas{where} would run it on the original's parameters; {_suggested_change(instance, attribute, value)}",
                related=related,
            )

    def _stored_values(self, node: ast.AST, instance: str) -> list[tuple[str, ast.expr]]:
        """(attribute, value) pairs that `node` stores on the instance."""
        if isinstance(node, ast.Assign):
            targets = node.targets
            value = node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
            value = node.value
        elif (
            isinstance(node, ast.Call)
            and self.ctx.qualified_name(node.func) == "setattr"
            and len(node.args) == 3
            and is_name(node.args[0], instance)
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            return [(node.args[1].value, node.args[2])]
        else:
            return []
        return [(t.attr, value) for t in targets if isinstance(t, ast.Attribute) and is_name(t.value, instance)]

    def _bound_callable(self, value: ast.AST, instance: str, methods: dict[str, MethodKind]) -> str | None:
        """A description of the callable bound to the instance that `value` holds, if any."""
        if isinstance(value, ast.Attribute):
            chain = ast.unparse(value)
            kind = methods.get(value.attr)
            if is_name(value.value, instance) and (kind == "method" or (kind is None and value.attr == "forward")):
                return f"the bound method `{chain}`"
            if value.attr == "forward" and chain.startswith(f"{instance}."):
                return f"the bound method `{chain}` of a submodule"
            return None
        if isinstance(value, ast.IfExp):
            return self._bound_callable(value.body, instance, methods) or self._bound_callable(value.orelse, instance, methods)
        if isinstance(value, (ast.List, ast.Tuple, ast.Set)):
            return next(filter(None, (self._bound_callable(e, instance, methods) for e in value.elts)), None)
        if isinstance(value, ast.Dict):
            return next(filter(None, (self._bound_callable(v, instance, methods) for v in value.values)), None)
        if isinstance(value, ast.Lambda):
            return f"a lambda that closes over `{instance}`" if mentions_name(value, instance) else None
        if isinstance(value, ast.Call):
            function = self.ctx.qualified_name(value.func)
            arguments = [*value.args, *(k.value for k in value.keywords)]
            if function == "functools.partial" and value.args:
                inner = self._bound_callable(value.args[0], instance, methods)
                if inner is not None or any(is_name(a, instance) for a in arguments):
                    return f"`{ast.unparse(value)}`, a partial bound to `{instance}`"
            if function == "types.MethodType" and any(is_name(a, instance) for a in arguments):
                return f"`{ast.unparse(value)}`, a method bound to `{instance}`"
        return None


def _suggested_change(instance: str, attribute: str, value: ast.expr) -> str:
    """No automatic rewrite (a class may rely on the attribute), but the change itself, spelled out."""
    if not (isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and value.value.id == instance):
        return "dispatch from a method instead"
    choice = f"_{attribute}_impl"
    return (
        f"dispatch from a method instead: store the name (`{instance}.{choice} = \"{value.attr}\"`) and define "
        f"`def {attribute}(self, *args, **kwargs): return getattr(self, self.{choice})(*args, **kwargs)`"
    )
