"""PFL208: training through `ddp.module(x)`, or through the bare model a DDP wraps, skips gradient synchronisation."""

from __future__ import annotations

import ast
import bisect
from collections.abc import Sequence

from pitfall_lint.analysis.reachability import is_test_file
from pitfall_lint.analysis.scopes import FUNCTIONS, enclosing_function
from pitfall_lint.analysis.training import dotted, reaches_backward, runs_without_grad, updates_parameters
from pitfall_lint.analysis.wrappers import DDP, WrapBinding, holds_wrapper, wrap_bindings
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.rules.base import Rule


class DdpModuleBypass(Rule):
    info = RuleInfo(
        code="PFL208",
        name="ddp-module-bypass",
        summary="Training through `ddp_model.module(x)` or the bare model a DDP wraps: gradients are never synchronised.",
        severity="error",
        hint="call the DistributedDataParallel wrapper itself (`ddp_model(x)`) for every forward whose loss is backpropagated",
        verifiable=True,
    )
    triggers = (("DistributedDataParallel",), ("backward",))
    subscriptions = (ast.Call,)

    def visit(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Call)
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "forward":
            func = func.value  # `ddp.module.forward(x)`, `model.forward(x)`
        if not isinstance(func, (ast.Name, ast.Attribute)):
            return
        ancestors = self.ctx.ancestors
        bypass = self._bypass(func, node, ancestors)
        if bypass is None or runs_without_grad(self.ctx, ancestors) or self._inside_no_sync(ancestors):
            return
        backward = reaches_backward(self.ctx, node, ancestors)
        if backward is None:
            return  # evaluation or inference: nothing is backpropagated through it
        if self._only_reads_gradients(ancestors):
            return
        self.report(
            node,
            f"{bypass}, and the loss computed from it is backpropagated at line {backward.lineno}: DDP never sees this "
            "forward, so the gradients are not all-reduced and every rank steps with its own; the replicas drift apart "
            "without an error. Call the wrapper itself",
        )

    def _only_reads_gradients(self, ancestors: Sequence[ast.AST]) -> bool:
        """A test that backpropagates around the wrapper on purpose and never steps: it compares unsynchronised
        gradients (a framework's test of its own reducer), and no replica's parameters change, so none drift."""
        outermost = next((a for a in ancestors if isinstance(a, FUNCTIONS)), None)  # its inner helpers' steps count
        return outermost is not None and is_test_file(self.ctx) and not updates_parameters(outermost)

    def _bypass(self, func: ast.expr, call: ast.Call, ancestors: Sequence[ast.AST]) -> str | None:
        """What the call runs around the wrapper, in words, or None."""
        if isinstance(func, ast.Attribute) and func.attr == "module":
            owner = func.value
            if isinstance(owner, ast.Name) and holds_wrapper(self.ctx, owner.id, ancestors, call.lineno, DDP):
                return f"`{ast.unparse(call.func)}(...)` runs the module inside the DistributedDataParallel `{owner.id}`"
            return None
        spelled = dotted(func)
        if spelled is None:
            return None
        function = enclosing_function(ancestors)
        scope = function if function is not None else self.ctx.tree
        lines, bindings = self._bare_model_wraps(scope).get(spelled, ([], []))
        if not lines:
            return None  # no wrap of it here: the scope's stores need no reading
        # The first wrap of it before the call after which nothing rebinds the name (`model = DDP(model)` and the
        # like: after it the name holds the wrapper, or something else).
        stores = self._stores(scope).get(spelled, [])
        last_store = stores[bisect.bisect_left(stores, call.lineno) - 1] if stores and stores[0] < call.lineno else 0
        first = bisect.bisect_right(lines, last_store)
        if first < len(lines) and lines[first] < call.lineno:
            binding = bindings[first]
            return (
                f"`{spelled}(...)` runs the bare model that `{binding.wrapper}` wraps in DistributedDataParallel "
                f"(line {binding.call.lineno})"
            )
        return None

    def _bare_model_wraps(self, scope: ast.AST) -> dict[str, tuple[list[int], list[WrapBinding]]]:
        """The scope's wraps that leave the bare model under another name (`ddp = DDP(model)`), by that model's name,
        in line order with their lines."""
        key = ("pfl208-bare-model-wraps", id(scope))
        if key not in self.ctx.memo:
            found: dict[str, list[WrapBinding]] = {}
            for binding in wrap_bindings(self.ctx, scope):
                if binding.inner is not None and binding.wrapper not in (None, binding.inner):
                    found.setdefault(binding.inner, []).append(binding)
            self.ctx.memo[key] = {name: ([b.call.lineno for b in found_], found_) for name, found_ in found.items()}
        return self.ctx.memo[key]  # type: ignore[return-value]

    def _stores(self, scope: ast.AST) -> dict[str, list[int]]:
        """The lines where the scope (and the functions in it) assigns a name or attribute chain, by its spelling."""
        key = ("pfl208-stores", id(scope))
        if key not in self.ctx.memo:
            found: dict[str, list[int]] = {}
            for node in ast.walk(scope):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, (ast.AnnAssign, ast.For)) else []
                for target in targets:
                    if (spelled := dotted(target)) is not None:
                        found.setdefault(spelled, []).append(node.lineno)  # type: ignore[attr-defined]
            self.ctx.memo[key] = {spelled: sorted(lines) for spelled, lines in found.items()}
        return self.ctx.memo[key]  # type: ignore[return-value]

    def _inside_no_sync(self, ancestors: Sequence[ast.AST]) -> bool:
        """`with ddp.no_sync():` asks for unsynchronised gradients on purpose (accumulation)."""
        for node in ancestors:
            if isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    expr = item.context_expr
                    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "no_sync":
                        return True
        return False
