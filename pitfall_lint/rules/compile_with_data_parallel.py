"""PFL106: nn.DataParallel replicates a compiled module, and the replication itself breaks it."""

from __future__ import annotations

import ast

from pitfall_lint.analysis.evidence import cite
from pitfall_lint.analysis.modules import data_parallel_reach, is_module_class, same_module, wrapped_at
from pitfall_lint.analysis.scopes import enclosing_function, enclosing_method, is_name, reaching_values, self_name
from pitfall_lint.analysis.training import walk_same_scope
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.rules.base import Rule

_WRAPS = {"torch.nn.DataParallel": "nn.DataParallel", "torch.nn.parallel.data_parallel": "data_parallel"}
_COMPILE = "torch.compile"
# What each form does to the replicas, and what the user then sees.
_OPTIMIZED = (
    "replicating the compiled wrapper (an OptimizedModule) writes each replica's emptied parameter, buffer and "
    "submodule tables onto the model inside it, so the original model loses its layers and its forward fails with "
    "an AttributeError"
)
_METHOD = (
    "`.compile()` keeps a compiled forward bound to the original module in its `__dict__`, which every replica "
    "copies: the replicas on other GPUs run the original's parameters and fail with a device mismatch"
)
_ADVICE = "compile without DataParallel, or train with DistributedDataParallel, which supports torch.compile"


class CompileWithDataParallel(Rule):
    info = RuleInfo(
        code="PFL106",
        name="compile-with-data-parallel",
        summary="A torch.compile'd module (or one after `module.compile()`) run under nn.DataParallel: replication breaks it.",
        severity="error",
        hint="compile only when not wrapping in nn.DataParallel, or move to DistributedDataParallel",
        verifiable=True,
    )
    # A wrap (of a module compiled here or by a builder elsewhere), or a module that compiles itself or a submodule.
    triggers = (("DataParallel", "data_parallel", "compile"),)
    subscriptions = (ast.Call,)

    def visit(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Call)
        function = self.ctx.qualified_name(node.func)
        if function in _WRAPS:
            self._check_wrap(node, _WRAPS[function])
        elif function == _COMPILE or (isinstance(node.func, ast.Attribute) and node.func.attr == "compile" and not node.args):
            self._check_compiled_in_module(node, function == _COMPILE)

    def _check_wrap(self, wrap: ast.Call, wrapper: str) -> None:
        target = next((k.value for k in wrap.keywords if k.arg == "module"), wrap.args[0] if wrap.args else None)
        if target is None:
            return
        found = self._compiled(same_module(target), wrap)
        if found is not None:
            how, line = found
            where = "" if line == wrap.lineno else f" at line {line}"
            self.report(wrap, f"{wrapper} wraps a module compiled with {how}{where}: {self._effect(how)}; {_ADVICE}")
            return
        evidence = self.ctx.project.compiled_wrap(wrap)
        if evidence is not None:
            builder = f"`{evidence[2]}` returns `torch.compile(...)`"
            where, related = cite(self.ctx, evidence, builder)
            self.report(
                wrap,
                f"{wrapper} wraps a module compiled with `torch.compile`{where or f' ({builder}, line {evidence[1]})'}: "
                f"{_OPTIMIZED}; {_ADVICE}",
                related=related,
            )

    @staticmethod
    def _effect(how: str) -> str:
        return _METHOD if how.endswith(".compile()`") else _OPTIMIZED

    def _compiled(self, target: ast.AST, wrap: ast.Call) -> tuple[str, int] | None:
        """How and where the wrapped value was compiled: `torch.compile` on it, or `.compile()` called on its name."""
        if isinstance(target, ast.Call) and self.ctx.qualified_name(target.func) == _COMPILE:
            return "`torch.compile`", target.lineno
        if not isinstance(target, ast.Name):
            return None
        ancestors = self.ctx.ancestors
        scope = enclosing_function(ancestors) or self.ctx.tree
        values = reaching_values(target.id, scope, target, [*ancestors, wrap])
        for value in values:
            value = same_module(value)
            if isinstance(value, ast.Call) and self.ctx.qualified_name(value.func, ancestors) == _COMPILE:
                return "`torch.compile`", value.lineno
        start = (values[0].lineno, values[0].col_offset) if values else (0, 0)
        body = scope.body if isinstance(scope, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef)) else []
        for node in walk_same_scope(body):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "compile"
                and is_name(node.func.value, target.id)
                and start < (node.lineno, node.col_offset) < (wrap.lineno, wrap.col_offset)
            ):
                return f"`{target.id}.compile()`", node.lineno
        return None

    def _check_compiled_in_module(self, call: ast.Call, is_torch_compile: bool) -> None:
        """`self.encoder = torch.compile(...)` or `self.compile()` in a module that DataParallel can run."""
        ancestors = self.ctx.ancestors
        found = enclosing_method(ancestors)
        if found is None:
            return
        cls, method = found
        instance = self_name(method)
        if instance is None:
            return
        parent = ancestors[-1] if ancestors else None
        if is_torch_compile:
            stored = isinstance(parent, ast.Assign) and any(
                isinstance(t, ast.Attribute) and is_name(t.value, instance) for t in parent.targets
            )
            if not stored:
                return
            what = f"`{ast.unparse(parent.targets[0])}` holds a submodule compiled with `torch.compile`"  # type: ignore[union-attr]
            effect = _OPTIMIZED
        elif isinstance(call.func, ast.Attribute) and _on_instance(call.func.value, instance):
            what = f"`{ast.unparse(call.func.value)}.compile()` compiles {'the module itself' if is_name(call.func.value, instance) else 'a submodule'}"
            effect = _METHOD
        else:
            return
        if not is_module_class(self.ctx, cls, ancestors):
            return
        reach = data_parallel_reach(self.ctx, cls, ancestors, told_only=True)
        if reach is None:
            return
        where, related = wrapped_at(self.ctx, reach)
        self.report(call, f"{what}, and nn.DataParallel{where} replicates {cls.name}: {effect}; {_ADVICE}", related=related)



def _on_instance(receiver: ast.AST, instance: str) -> bool:
    """`self` or `self.encoder.block`."""
    while isinstance(receiver, ast.Attribute):
        receiver = receiver.value
    return is_name(receiver, instance)
