"""PFL503: a training loop that steps the optimizer every iteration but never zeroes the gradients."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass, field

from pitfall_lint.analysis.scopes import position_in_block
from pitfall_lint.analysis.training import (
    LOOPS,
    SELF_ZEROING_ENGINES,
    Loop,
    call_name,
    dotted,
    functions_named,
    is_optimizer_class,
    optimizer_variables,
    reaching_value,
    walk_same_scope,
)
from pitfall_lint.context import FileContext
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.rules.base import Rule

_BACKWARD = frozenset({"backward", "manual_backward"})
# In-place calls on a `.grad` tensor that reset it: `p.grad.zero_()`, `p.grad.data.mul_(0)`.
_GRAD_RESETS = frozenset({"zero_", "fill_", "mul_", "copy_"})
_MAX_HELPER_DEPTH = 3
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


@dataclass
class _LoopCalls:
    loop: Loop
    ancestors: list[ast.AST]
    backward: bool = False
    # Each `.step()` call with the ancestors up to the outermost loop, where its receiver is resolved.
    steps: list[tuple[ast.Call, list[ast.AST]]] = field(default_factory=list)


def _mentions_grad(node: ast.AST) -> bool:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Attribute) and node.attr == "grad":
            return True
        node = node.value
    return False


def _resets_gradients(node: ast.AST) -> bool:
    """One node that zeroes or replaces gradients: `*zero_grad*()`, `p.grad = None`, `del p.grad`, `p.grad.zero_()`."""
    if isinstance(node, ast.Call):
        name = call_name(node) or ""
        if "zero_grad" in name:
            return True
        return name in _GRAD_RESETS and isinstance(node.func, ast.Attribute) and _mentions_grad(node.func.value)
    if isinstance(node, (ast.Assign, ast.Delete)):
        return any(isinstance(t, ast.Attribute) and t.attr == "grad" for t in node.targets)
    if isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        return isinstance(node.target, ast.Attribute) and node.target.attr == "grad"
    return False


class MissingZeroGrad(Rule):
    info = RuleInfo(
        code="PFL503",
        name="missing-zero-grad",
        summary="A training loop steps the optimizer without zeroing gradients: they accumulate across iterations.",
        severity="error",
        hint="call `optimizer.zero_grad()` every iteration, before `.backward()` (or right after `.step()`)",
        preview=True,  # below the first-run bar (bench/fresh): runs with --preview
    )
    # `.backward()` and `.step()` in a loop, on an optimizer that the file names or builds from torch.optim.
    triggers = (("backward",), ("step",), ("optim",))
    # Calls, not loops: each backward and step call is filed under the loops it runs in, in one pass.
    subscriptions = (ast.Call,)

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._loops: dict[int, _LoopCalls] = {}
        self._helper_resets: dict[int, bool] = {}

    def visit(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Call)
        name = call_name(node)
        if name not in _BACKWARD and name != "step":
            return
        ancestors = self.ctx.ancestors
        # The loops whose own code this call is: those inside the innermost function, class or lambda.
        start = max((i for i, a in enumerate(ancestors) if isinstance(a, _SCOPES)), default=-1) + 1
        chain = [*ancestors, node]
        # Only the loop's body runs every iteration (not its `else:`, nor the `for` header).
        loops = [
            i
            for i in range(start, len(ancestors))
            if isinstance(ancestors[i], LOOPS) and position_in_block(ancestors[i], "body", chain[i + 1]) is not None
        ]
        if not loops:
            return
        if name != "step" and not self._accumulates(node):
            return
        for index in loops:
            loop = ancestors[index]
            calls = self._loops.get(id(loop))
            if calls is None:
                calls = self._loops[id(loop)] = _LoopCalls(loop, list(ancestors[:index]))  # type: ignore[arg-type]
            if name == "step":
                # Resolved in finish, and only for loops that call backward: most `.step()`s are schedulers'.
                calls.steps.append((node, list(ancestors[: loops[0] + 1])))
            else:
                calls.backward = True

    def finish(self) -> None:
        training = {}
        for key, calls in self._loops.items():
            if calls.backward:
                steps = [(c, o) for c, a in calls.steps if (o := self._stepped_optimizer(c, a)) is not None]
                if steps:
                    training[key] = (calls, steps)
        # The innermost training loop is judged on its own: an epoch loop around it is not reported again.
        outer = {id(a) for calls, _ in training.values() for a in calls.ancestors if id(a) in training}
        for key, (calls, steps) in training.items():
            if key in outer or self._resets_in(calls.loop.body, 0):
                continue
            step, optimizer = steps[0]
            if self._rebuilt_in_loop(calls.loop, optimizer):
                continue
            self.report(
                step,
                f"`{ast.unparse(step.func)}()` in a loop that calls `.backward()` but never zeroes the gradients: "
                f"they accumulate across iterations; call `{optimizer}.zero_grad()` in the loop",
            )

    # --- what the loop does ---------------------------------------------------------------------

    def _accumulates(self, call: ast.Call) -> bool:
        """A backward call that adds into `.grad`; distributed autograd keeps its gradients per context, whether
        called as `dist_autograd.backward(ctx, ...)` or as `loss.backward(ctx)` inside `with dist_autograd.context():`."""
        qualified = self.ctx.qualified_name(call.func) or ""
        if qualified.startswith("torch.distributed.autograd."):
            return False
        return not any(
            isinstance(a, (ast.With, ast.AsyncWith))
            and any(
                isinstance(item.context_expr, ast.Call)
                and self.ctx.qualified_name(item.context_expr.func) == "torch.distributed.autograd.context"
                for item in a.items
            )
            for a in self.ctx.ancestors
        )

    def _stepped_optimizer(self, call: ast.Call, ancestors: Sequence[ast.AST]) -> str | None:
        """The optimizer that `opt.step()` or `scaler.step(opt)` steps, if it is one; resolved before the loop."""
        if not isinstance(call.func, ast.Attribute):
            return None
        receiver = call.func.value
        text = ast.unparse(receiver).lower()
        if "sched" in text:
            return None
        # A GradScaler steps the optimizer it is given: `scaler.step(optimizer)`.
        given = call.args if "scaler" in text else []
        for candidate in (receiver, *given):
            if self._is_optimizer(candidate, ancestors):
                return ast.unparse(candidate)
        return None

    def _is_optimizer(self, expr: ast.expr, ancestors: Sequence[ast.AST]) -> bool:
        """An optimizer by name (`optimizer`, `self.optim_g`) or by construction (`torch.optim.*` assigned in scope)."""
        if isinstance(expr, (ast.Name, ast.Attribute, ast.Subscript, ast.Call)) and _optimizer_word(ast.unparse(expr)):
            return True
        if dotted(expr) in optimizer_variables(self.ctx, ancestors):
            return True
        if isinstance(expr, ast.Name):
            value = reaching_value(self.ctx, expr.id, expr, ancestors)
            call = value.value if isinstance(value, ast.Subscript) else value  # `deepspeed.initialize(...)[0]`
            built_by = self.ctx.qualified_name(call.func, ancestors) if isinstance(call, ast.Call) else None
            if built_by in SELF_ZEROING_ENGINES:
                return False  # `engine.step()` zeroes the gradients itself
            if is_optimizer_class(built_by):
                return True
            return value is not None and _optimizer_word(ast.unparse(value))  # opt = self.optimizers()
        return False

    def _rebuilt_in_loop(self, loop: Loop, optimizer: str) -> bool:
        """A fresh optimizer (and usually model) every iteration: nothing carries over to accumulate."""
        for node in walk_same_scope(loop.body):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                if any(dotted(t) == optimizer for t in node.targets):
                    return True
        return False

    # --- what resets the gradients ----------------------------------------------------------------

    def _resets_in(self, statements: Sequence[ast.stmt], depth: int) -> bool:
        """A reset in the statements, in a closure defined there, or in a same-file function they call or pass."""
        helpers: set[str] = set()
        for statement in statements:
            for node in ast.walk(statement):
                if _resets_gradients(node):
                    return True
                if isinstance(node, ast.Call):
                    name = call_name(node)
                    if name:
                        helpers.add(name)
                elif isinstance(node, ast.Name):
                    helpers.add(node.id)  # a closure handed over: `optimizer.step(closure)`
        if depth >= _MAX_HELPER_DEPTH:
            return False
        return any(self._helper_resets_gradients(f, depth) for name in helpers for f in functions_named(self.ctx, name))

    def _helper_resets_gradients(self, function: ast.AST, depth: int) -> bool:
        key = id(function)
        if key not in self._helper_resets:
            self._helper_resets[key] = False  # a recursive helper does not reset by recursing
            self._helper_resets[key] = self._resets_in(function.body, depth + 1)  # type: ignore[attr-defined]
        return self._helper_resets[key]


def _optimizer_word(text: str) -> bool:
    lowered = text.lower()
    return "optim" in lowered and "sched" not in lowered
