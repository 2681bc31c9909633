"""PFL211: reentrant activation checkpointing inside a DDP-wrapped module: "marked as ready twice", or a silent
desync of the gradients of a module checkpointed more than once."""

from __future__ import annotations

import ast
from collections.abc import Sequence

from pitfall_lint.analysis.evidence import WRAPPED_UNKNOWN, Evidence
from pitfall_lint.analysis.modules import is_module_class, wrap_option, wrapped_at, wrapper_reach
from pitfall_lint.analysis.scopes import enclosing_method
from pitfall_lint.analysis.training import LOOPS
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.context import FileContext
from pitfall_lint.rules.base import WrappedModuleRule

_CHECKPOINTS = frozenset({"torch.utils.checkpoint.checkpoint", "torch.utils.checkpoint.checkpoint_sequential"})


def _reentrant(call: ast.Call) -> str | None:
    """How the call asks for the reentrant variant: "absent" (torch 2.13 then warns and uses it), "True", or None
    when it asks for the other one or decides at run time."""
    value = next((k.value for k in call.keywords if k.arg == "use_reentrant"), None)
    if value is None:
        return None if any(k.arg is None for k in call.keywords) else "absent"
    if isinstance(value, ast.Constant) and value.value is True:
        return "True"
    return None


class ReentrantCheckpointWithDdp(WrappedModuleRule):
    info = RuleInfo(
        code="PFL211",
        name="reentrant-checkpoint-with-ddp",
        summary="Reentrant activation checkpointing in a DDP-wrapped module: a crash with find_unused_parameters, "
        "silently unsynchronised gradients for a module checkpointed twice.",
        severity="error",
        hint="pass `use_reentrant=False` to `torch.utils.checkpoint.checkpoint` (or `static_graph=True` to DistributedDataParallel)",
        verifiable=True,
    )
    wrapper = "DistributedDataParallel"
    triggers = (("checkpoint",), ("use_reentrant", "checkpoint(", "checkpoint_sequential"))
    subscriptions = (ast.Call,)

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._callables: dict[int, list[str]] = {}  # per method: what each checkpoint call runs, as spelled

    def visit(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Call)
        if isinstance(node.func, ast.Attribute) and not node.func.attr.startswith("checkpoint"):
            return
        ancestors = self.ctx.ancestors
        if self.ctx.qualified_name(node.func) not in _CHECKPOINTS:
            return
        reentrant = _reentrant(node)
        found = enclosing_method(ancestors)
        if reentrant is None or found is None:
            return
        cls, method = found
        runs = ast.unparse(node.args[0]) if node.args else ""
        earlier = self._callables.setdefault(id(method), [])
        repeated = self._in_a_loop_over_the_same(node, ancestors) or (runs and runs in earlier)
        earlier.append(runs)
        if not is_module_class(self.ctx, cls, ancestors):
            return
        evidence, failure = self._failure(cls, ancestors, bool(repeated))
        if evidence is None:
            return
        where, related = wrapped_at(self.ctx, evidence)
        where = where or f" (wrapped at line {evidence[1]})"
        how = "without `use_reentrant` (torch 2.13 warns, then uses the reentrant variant)" if reentrant == "absent" else "with `use_reentrant=True`"
        self.report(
            node,
            f"`{ast.unparse(node.func)}` {how} in a module that DistributedDataParallel runs{where}: {failure}; pass "
            "`use_reentrant=False` (or `static_graph=True` to DistributedDataParallel)",
            related=related,
        )

    def _failure(self, cls: ast.ClassDef, ancestors: Sequence[ast.AST], repeated: bool) -> tuple[Evidence | None, str]:
        """The DDP wrap that reaches the module and breaks with a reentrant backward pass, and how it breaks."""
        for evidence in wrapper_reach(self.ctx, "DistributedDataParallel", cls, ancestors):
            if not evidence or wrap_option(evidence, "static_graph") in ("True", "?"):
                continue
            if wrap_option(evidence, "find_unused_parameters") == "True":
                return evidence, (
                    "with `find_unused_parameters=True` each reentrant backward pass marks the parameters ready again, "
                    "and the backward fails with \"Expected to mark a variable ready only once\""
                )
            if repeated and evidence[4] != WRAPPED_UNKNOWN:
                return evidence, (
                    "it checkpoints the same module more than once per forward, so its parameters' gradients arrive in "
                    "two reentrant backward passes and DDP all-reduces only the first: the ranks' gradients differ "
                    "without an error"
                )
        return None, ""

    @staticmethod
    def _in_a_loop_over_the_same(call: ast.Call, ancestors: Sequence[ast.AST]) -> bool:
        """`for _ in range(n): x = checkpoint(self.block, x)`: the callable does not change between iterations."""
        if not call.args:
            return False
        runs = {n.id for n in ast.walk(call.args[0]) if isinstance(n, ast.Name)}
        for ancestor in reversed(ancestors):
            if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                return False
            if isinstance(ancestor, LOOPS):
                targets = {n.id for n in ast.walk(ancestor.target) if isinstance(n, ast.Name)} if not isinstance(ancestor, ast.While) else set()  # type: ignore[union-attr]
                changing = targets | {n.id for n in ast.walk(ancestor) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
                if not runs & changing:
                    return True
        return False

