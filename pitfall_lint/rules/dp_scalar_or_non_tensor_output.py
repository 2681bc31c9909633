"""PFL105: what forward returns is gathered from every replica along dim 0; scalars and non-tensors do not gather.

torch 2.13's gather (torch/nn/parallel/scatter_gather.py, _functions.Gather): 0-dim tensors are unsqueezed into a
vector of one value per replica, with a warning; a Python number fails (`TypeError: 'float' object is not
iterable`); a string silently becomes `'<map object at 0x...>'`; None is passed through.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Literal

from pitfall_lint.analysis.modules import data_parallel_reach, is_module_class, is_torch_module_name, wrapped_at
from pitfall_lint.analysis.scopes import FUNCTIONS, Function, enclosing_method, is_name, reaching_values, self_name
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.rules.base import WrappedModuleRule

Kind = Literal["scalar", "number", "string"]
Part = tuple[str, str, Kind, str]  # place in the output, what is returned there, kind, Python type of a number

# Reductions that give a 0-dim tensor when called without a dimension.
_REDUCTIONS = frozenset(
    {"mean", "sum", "prod", "norm", "std", "var", "max", "min", "amax", "amin", "median", "nansum", "nanmean", "all", "any", "logsumexp", "count_nonzero"}
)
_DIMENSION_KEYWORDS = frozenset({"dim", "axis", "dims"})
_NUMBER_BUILTINS = frozenset({"float", "int", "bool", "len", "round", "abs"})
_LOSS_FUNCTIONS = "torch.nn.functional."
_LOSS_NAMES = frozenset(
    {
        "cross_entropy", "nll_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "mse_loss",
        "l1_loss", "smooth_l1_loss", "huber_loss", "poisson_nll_loss", "gaussian_nll_loss", "cosine_embedding_loss",
        "margin_ranking_loss", "hinge_embedding_loss", "multilabel_margin_loss", "multilabel_soft_margin_loss",
        "multi_margin_loss", "soft_margin_loss", "triplet_margin_loss", "ctc_loss",
    }
)
_MAX_DEPTH = 4


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _reduces(call: ast.Call) -> bool:
    """A loss left at its default reduction ('mean') or given 'mean'/'sum'; not 'none'."""
    reduction = _keyword(call, "reduction")
    return reduction is None or (isinstance(reduction, ast.Constant) and reduction.value in ("mean", "sum"))


class DpScalarOrNonTensorOutput(WrappedModuleRule):
    info = RuleInfo(
        code="PFL105",
        name="dp-scalar-or-non-tensor-output",
        summary="forward of a module that nn.DataParallel wraps returns a 0-dim tensor, a Python number or a string: gathering it fails or changes it.",
        severity="warning",
        hint="return per-sample values (a tensor with the batch on dim 0) and reduce them after the DataParallel call",
        verifiable=True,
    )
    triggers = (("class",), ("forward",), ("return",))
    subscriptions = (ast.Return,)

    def visit(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Return)
        if node.value is None:
            return
        ancestors = self.ctx.ancestors
        found = enclosing_method(ancestors)
        if found is None or found[1].name != "forward" or not self._directly_in(found[1], ancestors):
            return
        cls, forward = found
        instance = self_name(forward)
        if instance is None:
            return
        parts = list(self._parts(node.value, "", forward, node, ancestors, 0))
        if not parts:
            return
        if not is_module_class(self.ctx, cls, ancestors):
            return
        reach = data_parallel_reach(self.ctx, cls, ancestors, wrapped_only=True, told_only=True)
        if reach is None:
            return
        where, related = wrapped_at(self.ctx, reach)
        self.report(node, self._message(cls.name, parts, where), related=related)

    @staticmethod
    def _directly_in(function: Function, ancestors: list[ast.AST]) -> bool:
        """The return belongs to forward itself, not to a function or lambda nested in it."""
        inner = ancestors[ancestors.index(function) + 1 :]
        return not any(isinstance(a, (*FUNCTIONS, ast.Lambda, ast.ClassDef)) for a in inner)

    def _parts(
        self, value: ast.AST, place: str, forward: Function, use: ast.AST, ancestors: list[ast.AST], depth: int
    ) -> Iterator[Part]:
        """(place in the output, expression, kind) of every part of the returned value that does not gather."""
        if depth > _MAX_DEPTH:
            return
        if isinstance(value, (ast.Tuple, ast.List)):
            for index, element in enumerate(value.elts):
                yield from self._parts(element, f"{place}[{index}]", forward, use, ancestors, depth + 1)
            return
        if isinstance(value, ast.Dict):
            for key, element in zip(value.keys, value.values):
                label = repr(key.value) if isinstance(key, ast.Constant) else "..."
                yield from self._parts(element, f"{place}[{label}]", forward, use, ancestors, depth + 1)
            return
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "dict" and not value.args:
            for keyword in value.keywords:
                if keyword.arg is not None:
                    yield from self._parts(keyword.value, f"{place}[{keyword.arg!r}]", forward, use, ancestors, depth + 1)
            return
        if isinstance(value, ast.Name):
            # Every value it may hold must be one that does not gather (None aside, which the gather passes on).
            assigned = [v for v in reaching_values(value.id, forward, use, ancestors) if not _is_none(v)]
            kinds = [self._kind(v, forward, depth, use, ancestors) for v in assigned]
            if assigned and None not in kinds:
                yield place, f"`{value.id}` (`{value.id} = {_short(assigned[0])}`)", *kinds[0]  # type: ignore[misc]
            return
        kind = self._kind(value, forward, depth, use, ancestors)
        if kind is not None:
            yield place, f"`{_short(value)}`", *kind

    def _kind(
        self, value: ast.AST, forward: Function, depth: int, use: ast.AST, ancestors: list[ast.AST]
    ) -> tuple[Kind, str] | None:
        """What the expression gives, if it is not a tensor that gathers: ("number", "float"), ("scalar", "")."""
        if isinstance(value, ast.Constant):
            if isinstance(value.value, str):
                return "string", "str"
            if isinstance(value.value, (int, float, complex)):  # bool included
                return "number", type(value.value).__name__
            return None
        if isinstance(value, ast.JoinedStr):
            return "string", "str"
        if isinstance(value, ast.BinOp) and depth < _MAX_DEPTH:
            sides = [self._operand(side, forward, depth + 1, use, ancestors) for side in (value.left, value.right)]
            left, right = sides
            if left and right and left[0] == right[0] == "number":
                return "number", "float" if "float" in (left[1], right[1]) or isinstance(value.op, ast.Div) else left[1]
            # `loss * 0.5`, `loss / num_masked`, `loss * self.weight`: a 0-dim tensor with a number or another one
            # (with an operand that may be a batch, as in `x / x.norm()`, the result may well keep the batch).
            if any(k and k[0] == "scalar" for k in sides) and all(k is not None and k[0] != "string" for k in sides):
                return "scalar", ""
            return None
        if not isinstance(value, ast.Call):
            return None
        function = value.func
        keywords = {k.arg for k in value.keywords}
        if isinstance(function, ast.Attribute):
            if function.attr == "item" and not value.args:
                return "number", "float"
            if function.attr in _REDUCTIONS and not value.args and not keywords & _DIMENSION_KEYWORDS and function.attr != "logsumexp":
                return "scalar", ""
        qualified = self.ctx.qualified_name(function) or ""
        if isinstance(function, ast.Name) and qualified == function.id:
            if function.id in _NUMBER_BUILTINS:
                return "number", {"len": "int", "round": "int", "abs": "float"}.get(function.id, function.id)
            if function.id == "str":
                return "string", "str"
        if qualified.startswith("torch.") and qualified.rpartition(".")[2] in _REDUCTIONS and len(value.args) == 1:
            return None if keywords & _DIMENSION_KEYWORDS else ("scalar", "")
        if qualified.startswith(_LOSS_FUNCTIONS) and qualified.rpartition(".")[2] in _LOSS_NAMES and _reduces(value):
            return "scalar", ""
        instance = self_name(forward)
        if isinstance(function, ast.Attribute) and instance is not None and is_name(function.value, instance):
            criterion = self._criterion(function.attr)
            if criterion is not None and _reduces(criterion):
                return "scalar", ""
        return None

    def _operand(
        self, value: ast.AST, forward: Function, depth: int, use: ast.AST, ancestors: list[ast.AST]
    ) -> tuple[Kind, str] | None:
        """An operand of arithmetic: a local name by what it holds, and the module's own attribute (`self.weight`,
        a setting) taken for a number; forward's arguments and anything else stay unknown (they may hold a batch)."""
        if isinstance(value, ast.Name) and depth <= _MAX_DEPTH:
            assigned = reaching_values(value.id, forward, use, ancestors)
            kinds = [self._kind(v, forward, depth + 1, use, ancestors) for v in assigned]
            return kinds[0] if assigned and None not in kinds and len(set(kinds)) == 1 else None
        if isinstance(value, ast.Attribute) and is_name(value.value, self_name(forward) or ""):
            return "number", "float"
        return self._kind(value, forward, depth, use, ancestors)

    def _criterion(self, attribute: str) -> ast.Call | None:
        """`nn.CrossEntropyLoss(...)` when the class assigns one to `self.<attribute>` (a loss module: 0-dim output)."""
        found = enclosing_method(self.ctx.ancestors)
        if found is None:
            return None
        cls = found[0]
        for method in (m for m in cls.body if isinstance(m, FUNCTIONS)):
            instance = self_name(method)
            for node in ast.walk(method):
                if (
                    isinstance(node, ast.Assign)
                    and isinstance(node.value, ast.Call)
                    and any(isinstance(t, ast.Attribute) and t.attr == attribute and is_name(t.value, instance or "") for t in node.targets)
                ):
                    called = self.ctx.qualified_name(node.value.func, [cls, method]) or ""
                    if is_torch_module_name(called) and called.endswith("Loss"):
                        return node.value
        return None

    @staticmethod
    def _message(cls: str, parts: list[Part], where: str) -> str:
        place, expression, kind, python_type = parts[0]
        head = f"`{cls}.forward` returns {expression}" + (f" as output{place}" if place else "")
        if kind == "scalar":
            return (
                f"{head}, a 0-dim tensor: nn.DataParallel{where} gathers one per replica into a vector (\"Was asked to "
                "gather along dimension 0, but all input tensors were scalars; will instead unsqueeze and return a "
                "vector.\"), so `.backward()` on it fails and its `.mean()` weighs unequal chunks equally; return "
                "per-sample values and reduce after the call"
            )
        if kind == "number":
            return (
                f"{head}, a Python number: nn.DataParallel{where} cannot gather it (TypeError: '{python_type}' object is "
                "not iterable); return a tensor with the batch on dim 0"
            )
        return (
            f"{head}, a string: nn.DataParallel{where} gathers it into the text '<map object at 0x...>'; keep strings "
            "out of forward's output"
        )


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _short(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 50 else f"{text[:47]}..."
