"""PFL603: a method other than `forward` called on a `fully_shard` module, which gathers its parameters only for
`forward` unless the method is registered."""

from __future__ import annotations

import ast

from pitfall_lint.analysis.fsdp import REGISTER_FORWARD_METHOD, ShardSite, sharding_of, sites_in_scope_of
from pitfall_lint.analysis.modules import top_level_classes
from pitfall_lint.analysis.ranks import ancestors_of
from pitfall_lint.analysis.scopes import FUNCTIONS, enclosing_class, enclosing_function, local_value, self_name
from pitfall_lint.analysis.training import dotted, walk_same_scope
from pitfall_lint.analysis.wrapper_api import MODULE
from pitfall_lint.context import FileContext
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.rules.base import Rule


def _registered(ctx: FileContext) -> list[tuple[str | None, str | None, ast.AST | None]]:
    """(module, method, enclosing function) for every `register_fsdp_forward_method(module, "method")` of the file;
    None for a part not written as a name or a literal."""
    key = ("fsdp-registered-methods",)
    if key not in ctx.memo:
        found = []
        for node in ast.walk(ctx.tree):
            if isinstance(node, ast.Call) and ctx.qualified_name(node.func, []) in REGISTER_FORWARD_METHOD:
                module = dotted(node.args[0]) if node.args else None
                method = node.args[1].value if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) else None
                found.append((module, method if isinstance(method, str) else None, enclosing_function(ancestors_of(ctx, node))))
        ctx.memo[key] = found
    return ctx.memo[key]  # type: ignore[return-value]


def _is_registered(ctx: FileContext, name: str, method: str, functions: set[int]) -> bool:
    """Registered for this module and method (or a registration the file does not spell out), in the function of
    the sharding or of the call; for `self.<attribute>`, anywhere in the file."""
    return any(
        (module is None or module == name) and (registered is None or registered == method)
        and (name.startswith("self.") or id(function) in functions)
        for module, registered, function in _registered(ctx)
    )


def _calls_itself(method: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """`self(...)`, `self.forward(...)` or `self.__call__(...)`: FSDP's hooks run for that call, and gather."""
    me = self_name(method)
    for node in walk_same_scope(method.body):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id == me:
                return True
            if isinstance(func, ast.Attribute) and func.attr in ("forward", "__call__") and isinstance(func.value, ast.Name) and func.value.id == me:
                return True
    return False


def _attributes_used(method: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    me = self_name(method)
    return {
        node.attr for node in walk_same_scope(method.body)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == me
    }


def _attributes_set(cls: ast.ClassDef) -> set[str]:
    """What `__init__` stores on the instance: submodules and parameters among them."""
    init = next((f for f in cls.body if isinstance(f, FUNCTIONS) and f.name == "__init__"), None)
    me = self_name(init) if init is not None else None
    return {
        target.attr for node in (walk_same_scope(init.body) if init is not None else ())
        if isinstance(node, ast.Assign) for target in node.targets
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == me
    }


class UnregisteredForwardMethod(Rule):
    info = RuleInfo(
        code="PFL603",
        name="unregistered-forward-method",
        summary="A method other than `forward` (`encode`, `generate`) called on a `fully_shard` module without `register_fsdp_forward_method`: its parameters stay sharded, and the call fails on mixed Tensor and DTensor.",
        severity="error",
        preview=True,
        verifiable=True,
        hint='call `register_fsdp_forward_method(model, "encode")` after `fully_shard(model)`',
    )
    triggers = (("fully_shard",),)
    subscriptions = (ast.Call,)

    def visit(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Call)
        func = node.func
        if not isinstance(func, ast.Attribute) or func.attr in MODULE or func.attr.startswith("_"):
            return
        name = dotted(func.value)
        if name is None:
            return
        ancestors = self.ctx.ancestors
        site = sharding_of(self.ctx, name, ancestors, node.lineno, use=node)
        if site is None:
            return
        functions = {id(enclosing_function(ancestors)), id(enclosing_function(ancestors_of(self.ctx, site.call)))}
        if _is_registered(self.ctx, name, func.attr, functions):
            return
        cls = self._class_of(name, site)
        method = next((f for f in cls.body if isinstance(f, FUNCTIONS) and f.name == func.attr), None) if cls else None
        if method is None or _calls_itself(method) or not method.args.args:
            return
        # The attributes the method reads that only the root's group holds: a submodule sharded on its own
        # gathers its parameters in its own forward.
        own = {t.split(".")[len(name.split("."))] for s in sites_in_scope_of(self.ctx, name, ancestors) for t in s.targets if t.startswith(name + ".")}
        unsharded = sorted((_attributes_used(method) & _attributes_set(cls)) - own)  # type: ignore[arg-type]
        if not unsharded:
            return
        self.report(
            node,
            f"`{name}.{func.attr}()` is not `forward`, and `{name}` was sharded by `fully_shard` at line {site.line}: FSDP "
            f"gathers the parameters only around `forward`, so `{func.attr}` reads `self.{unsharded[0]}` still sharded "
            "(`RuntimeError: ... got mixed torch.Tensor and DTensor`); call "
            f'`register_fsdp_forward_method({name}, "{func.attr}")` after `fully_shard`',
        )

    def _class_of(self, name: str, site: ShardSite) -> ast.ClassDef | None:
        """The class of this file that built the module `name` holds (`model = Model(...)` before the sharding)."""
        classes = top_level_classes(self.ctx)
        if name.startswith("self."):
            owner = enclosing_class(self.ctx.ancestors)
            values = [
                n.value for n in ast.walk(owner) if isinstance(n, ast.Assign) and any(dotted(t) == name for t in n.targets)
            ] if owner is not None else []
        else:
            value = local_value(name, enclosing_function(self.ctx.ancestors), site.line, self.ctx.tree)
            values = [value] if value is not None else []
        built = {v.func.id for v in values if isinstance(v, ast.Call) and isinstance(v.func, ast.Name)}
        found = [classes[b] for b in built if b in classes]
        return found[0] if len(found) == 1 else None
