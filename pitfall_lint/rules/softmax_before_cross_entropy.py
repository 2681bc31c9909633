"""PFL502: cross_entropy (and nll_loss) fed probabilities from softmax instead of logits (log-probabilities)."""

from __future__ import annotations

import ast
from collections.abc import Sequence

from pitfall_lint.analysis.scopes import (
    enclosing_class,
    enclosing_function,
    enclosing_method,
    module_assignments,
    self_name,
    statements_in,
)
from pitfall_lint.analysis.training import reaching_value, stored_names, walk_same_scope
from pitfall_lint.context import FileContext
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.rules.base import Rule

_FUNCTIONAL_LOSSES = {
    "torch.nn.functional.cross_entropy": "cross_entropy",
    "torch.nn.functional.nll_loss": "nll_loss",
}
_LOSS_CLASSES = {"CrossEntropyLoss": "cross_entropy", "NLLLoss": "nll_loss"}
_SOFTMAX_FUNCTIONS = frozenset(
    {"torch.softmax", "torch.nn.functional.softmax", "torch.special.softmax", "torch.Tensor.softmax"}
)
_SOFTMAX_CLASSES = frozenset({"Softmax"})
# Tensor methods that keep the values, so `probs.view(-1, n)` is still probabilities.
_VALUE_PRESERVING = frozenset(
    {"view", "reshape", "float", "double", "half", "bfloat16", "contiguous", "squeeze", "unsqueeze",
     "permute", "transpose", "flatten", "to", "type", "clone", "cuda", "cpu"}
)
_MAX_DEPTH = 3


def _torch_nn_class(qualified: str | None, names: dict[str, str] | frozenset[str]) -> str | None:
    """The class name when `qualified` is one of `names` under torch.nn (any of its module paths)."""
    if not qualified or not qualified.startswith("torch.nn."):
        return None
    last = qualified.rpartition(".")[2]
    return last if last in names else None


def _bound_names(ctx: FileContext, function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The function's parameters and the names its own code binds."""
    key = ("pfl502-bound-names", id(function))
    if key not in ctx.memo:
        arguments = function.args
        every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg]
        names = {a.arg for a in every if a is not None}
        names.update(n for node in walk_same_scope(function.body) for n in stored_names(node))
        ctx.memo[key] = names
    return ctx.memo[key]  # type: ignore[return-value]


def _attribute_values(ctx: FileContext, cls: ast.ClassDef) -> dict[str, list[ast.expr]]:
    """What the class's code assigns to `<name>.<attribute>`, by attribute."""
    key = ("pfl502-attribute-values", id(cls))
    if key not in ctx.memo:
        found: dict[str, list[ast.expr]] = {}
        for node in ast.walk(cls):
            if isinstance(node, ast.Assign):
                for attribute in dict.fromkeys(
                    t.attr for t in node.targets if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                ):
                    found.setdefault(attribute, []).append(node.value)
        ctx.memo[key] = found
    return ctx.memo[key]  # type: ignore[return-value]


class SoftmaxBeforeCrossEntropy(Rule):
    info = RuleInfo(
        code="PFL502",
        name="softmax-before-cross-entropy",
        summary="cross_entropy or nll_loss fed softmax probabilities: the loss is wrong and training stalls.",
        severity="error",
        hint="pass the logits to cross_entropy; give nll_loss `log_softmax` output",
    )
    # A softmax of some spelling, and one of the losses.
    triggers = (("softmax", "Softmax"), ("cross_entropy", "CrossEntropyLoss", "nll_loss", "NLLLoss"))
    subscriptions = (ast.Call,)

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._imported: set[str] | None = None

    def visit(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Call)
        ancestors = self.ctx.ancestors
        loss = self._loss_kind(node, ancestors)
        if loss is None:
            return
        given = next((k.value for k in node.keywords if k.arg == "input"), node.args[0] if node.args else None)
        if given is None or not self._is_softmax_output(given, ancestors, 0):
            return
        if loss == "cross_entropy":
            self.report(
                node,
                "cross-entropy input is `softmax` output, but cross-entropy applies log_softmax itself: it gets "
                "squashed probabilities and barely trains; pass the logits",
            )
        else:
            self.report(
                node,
                "nll_loss input is `softmax` output, but nll_loss expects log-probabilities; "
                "use `log_softmax` (or pass the logits to cross_entropy)",
            )

    # --- the loss -------------------------------------------------------------------------------

    def _loss_kind(self, call: ast.Call, ancestors: Sequence[ast.AST]) -> str | None:
        func = call.func
        qualified = self.ctx.qualified_name(func)  # the node being visited: resolved once for every rule
        if qualified in _FUNCTIONAL_LOSSES:
            return _FUNCTIONAL_LOSSES[qualified]
        if not self._may_hold_a_loss(func):
            return None  # the cheap look first: most calls are of something no loss was ever assigned to
        constructed = self._constructed_class(func, ancestors, _LOSS_CLASSES)
        return _LOSS_CLASSES[constructed] if constructed else None

    def _may_hold_a_loss(self, func: ast.expr) -> bool:
        """Whether the callee is built in place or named like a target that some `x = nn.CrossEntropyLoss()` or
        `self.loss = nn.NLLLoss()` of the file assigns: the only values `_constructed_class` can find a loss in."""
        if isinstance(func, ast.Call):
            return True
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        return name is not None and name in self._loss_holders()

    def _loss_holders(self) -> set[str]:
        key = ("pfl502-loss-holders",)
        if key not in self.ctx.memo:
            self.ctx.memo[key] = {
                target.id if isinstance(target, ast.Name) else target.attr
                for node in statements_in(self.ctx.tree)
                if isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Call)
                and _torch_nn_class(self.ctx.qualified_name(node.value.func, []), _LOSS_CLASSES)
                for target in node.targets
                if isinstance(target, (ast.Name, ast.Attribute))
            }
        return self.ctx.memo[key]  # type: ignore[return-value]

    def _constructed_class(
        self, func: ast.expr, ancestors: Sequence[ast.AST], classes: dict[str, str] | frozenset[str]
    ) -> str | None:
        """Which torch.nn class of `classes` built the module being called: `nn.Softmax(1)(x)`,
        `criterion(x)` after `criterion = nn.CrossEntropyLoss()`, `self.loss(x)` after `self.loss = ...`."""
        if isinstance(func, ast.Call):
            return _torch_nn_class(self.ctx.qualified_name(func.func, ancestors), classes)
        for value in self._values_of(func, ancestors):
            if isinstance(value, ast.Call):
                found = _torch_nn_class(self.ctx.qualified_name(value.func, []), classes)
                if found:
                    return found
        return None

    def _values_of(self, target: ast.expr, ancestors: Sequence[ast.AST]) -> list[ast.expr]:
        """What a called name or `self.attribute` was assigned: locally, at module level, or in the class."""
        if isinstance(target, ast.Name):
            local = reaching_value(self.ctx, target.id, target, ancestors)
            if local is not None:
                return [local]
            function = enclosing_function(ancestors)
            if function is not None and target.id in _bound_names(self.ctx, function):
                return []  # a parameter or a local of its own, not the module's
            return [s.value for s in module_assignments(self.ctx.tree).get(target.id, [])]
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
            found = enclosing_method(ancestors)
            cls = enclosing_class(ancestors)
            if found is None or cls is None or target.value.id != self_name(found[1]):
                return []
            return _attribute_values(self.ctx, cls).get(target.attr, [])
        return []

    # --- the input ------------------------------------------------------------------------------

    def _imported_names(self) -> set[str]:
        if self._imported is None:
            self._imported = set()
            for node in ast.walk(self.ctx.tree):
                if isinstance(node, ast.Import):
                    self._imported.update((a.asname or a.name).partition(".")[0] for a in node.names)
                elif isinstance(node, ast.ImportFrom):
                    self._imported.update(a.asname or a.name for a in node.names)
        return self._imported

    def _is_softmax_output(self, expr: ast.expr, ancestors: Sequence[ast.AST], depth: int) -> bool:
        if depth > _MAX_DEPTH:
            return False
        if isinstance(expr, ast.Subscript):  # probs[mask]
            return self._is_softmax_output(expr.value, ancestors, depth + 1)
        if isinstance(expr, ast.Name):
            value = reaching_value(self.ctx, expr.id, expr, ancestors)
            return value is not None and self._is_softmax_output(value, ancestors, depth + 1)
        if not isinstance(expr, ast.Call):
            return False
        func = expr.func
        if self.ctx.qualified_name(func, ancestors) in _SOFTMAX_FUNCTIONS:
            return True
        if isinstance(func, ast.Attribute):
            receiver = func.value
            if func.attr == "softmax" and self._is_tensor_expression(receiver):
                return True  # logits.softmax(dim=-1)
            if func.attr in _VALUE_PRESERVING and self._is_tensor_expression(receiver):
                return self._is_softmax_output(receiver, ancestors, depth + 1)
        return self._constructed_class(func, ancestors, _SOFTMAX_CLASSES) is not None

    def _is_tensor_expression(self, receiver: ast.expr) -> bool:
        """A receiver whose methods are tensor methods: not a module alias (`F`), nor `self`/`cls`."""
        root = receiver
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name):
            return root.id not in self._imported_names() and root.id not in ("self", "cls")
        return isinstance(root, (ast.Call, ast.Subscript, ast.BinOp))
