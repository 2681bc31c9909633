"""PFL102: each DataParallel replica pads to its own longest sequence, and the gather fails."""

from __future__ import annotations

import ast

from pitfall_lint.analysis.modules import data_parallel_reach, is_module_class, wrapped_at
from pitfall_lint.analysis.scopes import enclosing_class, enclosing_function, is_rebound_between, local_value
from pitfall_lint.context import FileContext
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.rules.base import WrappedModuleRule
from pitfall_lint.traversal import parent_map

_TOTAL_LENGTH_POSITION = 3  # pad_packed_sequence(sequence, batch_first, padding_value, total_length)
_BATCH_FIRST_POSITION = 1
_PACK_BATCH_FIRST_POSITION = 2  # pack_padded_sequence(input, lengths, batch_first, enforce_sorted)
_PACK = "torch.nn.utils.rnn.pack_padded_sequence"
_TRACE_STEPS = 6  # unpacked <- rnn(...) <- packed <- pack_padded_sequence(...), with room for a few renames


_REDUCTIONS = frozenset({"mean", "sum", "max", "min", "amax", "amin", "logsumexp", "prod", "argmax", "argmin", "norm", "std", "var"})
_SHAPE_QUERIES = frozenset({"size", "dim", "shape", "ndim", "numel", "device", "dtype"})
_PAD_BACK = frozenset({"torch.nn.functional.pad", "torch.cat", "torch.concat", "torch.concatenate"})
_MAX_FOLLOW = 6


def _stays_inside(ctx: FileContext, unpack: ast.Call, ancestors: list[ast.AST]) -> bool:
    """Whether the padded tensor never leaves the method with its replica's length: every use of it (through
    renames and element-wise transforms) ends re-packed, reduced over time, cut to one step or padded back."""
    function = enclosing_function(ancestors)
    if function is None:
        return False
    parents = parent_map(function)
    return _ends_inside(ctx, unpack, parents, function, 0)


def _ends_inside(ctx: FileContext, expr: ast.AST, parents: dict[int, ast.AST], function: ast.AST, depth: int) -> bool:
    if depth > _MAX_FOLLOW:
        return False
    parent = parents.get(id(expr))
    if isinstance(parent, ast.Subscript) and parent.value is expr and _is_first_element(parent):
        return _ends_inside(ctx, parent, parents, function, depth + 1)  # `pad_packed_sequence(...)[0]`
    if isinstance(parent, (ast.Assign, ast.AnnAssign)):
        names = _bound_names(parent, expr)
        if names is None:
            return False  # stored on an attribute or in a container: it leaves
        return all(_uses_end_inside(ctx, name, parent, parents, function, depth + 1) for name in names)
    return _use_ends_inside(ctx, expr, parents, function, depth)


def _is_first_element(subscript: ast.Subscript) -> bool:
    return isinstance(subscript.slice, ast.Constant) and subscript.slice.value == 0


def _bound_names(assign: ast.Assign | ast.AnnAssign, value: ast.AST) -> list[str] | None:
    """The names `value` lands in: `out = value`, or `out, lengths = value` (the padded tensor is the first)."""
    targets = assign.targets if isinstance(assign, ast.Assign) else [assign.target]
    names = []
    for target in targets:
        if isinstance(target, ast.Name):
            names.append(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)) and target.elts and isinstance(target.elts[0], ast.Name):
            names.append(target.elts[0].id)
        else:
            return None
    return names


def _uses_end_inside(
    ctx: FileContext, name: str, assign: ast.AST, parents: dict[int, ast.AST], function: ast.AST, depth: int
) -> bool:
    line = getattr(assign, "end_lineno", None) or getattr(assign, "lineno", 0)
    later = [n for n in ast.walk(function) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) and n.lineno > line]
    rebound = min(
        (n.lineno for n in ast.walk(function) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store) and n.lineno > line),
        default=None,
    )
    uses = [n for n in later if rebound is None or n.lineno <= rebound]
    return all(_use_ends_inside(ctx, use, parents, function, depth) for use in uses)


def _use_ends_inside(ctx: FileContext, use: ast.AST, parents: dict[int, ast.AST], function: ast.AST, depth: int) -> bool:
    parent = parents.get(id(use))
    if isinstance(parent, ast.Attribute) and parent.value is use:
        if parent.attr in _SHAPE_QUERIES:
            return True
        call = parents.get(id(parent))
        if isinstance(call, ast.Call) and call.func is parent:
            if parent.attr in _REDUCTIONS and (call.args or call.keywords):
                return True  # pooled over an axis
            return _ends_inside(ctx, call, parents, function, depth + 1)  # `.float()`, `.masked_fill(...)`
        return False
    if isinstance(parent, ast.Subscript) and parent.value is use:
        if _selects_one_step(parent):
            return True  # `out[:, -1]`, `out[-1]`
        return _ends_inside(ctx, parent, parents, function, depth + 1)
    if isinstance(parent, (ast.BinOp, ast.UnaryOp)):
        return _ends_inside(ctx, parent, parents, function, depth + 1)  # `weights * out`
    if isinstance(parent, ast.Expr) or isinstance(parent, (ast.Compare, ast.Assert)):
        return True  # discarded, or only compared
    container = parents.get(id(parent)) if isinstance(parent, (ast.List, ast.Tuple)) else None
    call = container if isinstance(container, ast.Call) else parent
    if isinstance(call, ast.Call) and call is not use:
        qualified = ctx.qualified_name(call.func, []) or ""
        if qualified == _PACK or qualified in _PAD_BACK:
            return True  # re-packed, or padded back to the full length by hand
        if qualified.startswith("torch.") and qualified.rpartition(".")[2] in _REDUCTIONS and len(call.args) + len(call.keywords) > 1:
            return True  # `torch.mean(out, 1)`
        if isinstance(call.func, ast.Name) and call.func.id == "len":
            return True
        return _ends_inside(ctx, call, parents, function, depth + 1)  # `self.fc(out)`, `F.relu(out)`
    return False  # returned, yielded, stored: it leaves the method padded to this replica's longest sequence


def _selects_one_step(subscript: ast.Subscript) -> bool:
    """An index that drops the time axis: `[-1]`, `[:, -1]`, `[:, 0]` (a step, not a slice, of time)."""
    index = subscript.slice
    parts = index.elts if isinstance(index, ast.Tuple) else [index]
    return any(not isinstance(p, ast.Slice) and isinstance(p, (ast.Constant, ast.UnaryOp)) for p in parts[:2])


class PadPackedWithoutTotalLength(WrappedModuleRule):
    info = RuleInfo(
        code="PFL102",
        name="pad-packed-without-total-length",
        summary="pad_packed_sequence without total_length in a Module: DataParallel's gather fails.",
        severity="warning",
        hint='pass `total_length=<padded input>.size(1)` (batch-first) or `.size(0)`, so every replica pads to the same length',
        fix="safe",
        verifiable=True,
    )
    triggers = (("pad_packed_sequence",), ("class",))
    subscriptions = (ast.Call,)

    def visit(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Call)
        if self.ctx.qualified_name(node.func) != "torch.nn.utils.rnn.pad_packed_sequence":
            return
        keywords = {k.arg for k in node.keywords}
        if "total_length" in keywords or None in keywords:  # None: **kwargs may carry it
            return
        if len(node.args) > _TOTAL_LENGTH_POSITION or any(isinstance(a, ast.Starred) for a in node.args):
            return
        ancestors = self.ctx.ancestors
        cls = enclosing_class(ancestors)
        if cls is None or not is_module_class(self.ctx, cls, ancestors):
            return
        reach = data_parallel_reach(self.ctx, cls, ancestors)
        if reach is None:
            return  # nothing in the project can run this module under nn.DataParallel
        if _stays_inside(self.ctx, node, ancestors):
            return  # re-packed, pooled over time or padded back: the gather never sees the replica's length
        where, related = wrapped_at(self.ctx, reach)
        traced = self._padded_length(node)
        self.report(
            node,
            f"`pad_packed_sequence` without `total_length`: nn.DataParallel replicas{where} pad to different "
            f"lengths and the gather fails; pass `total_length={traced or self._padded_length_hint(node)}`",
            fix={"total_length": traced} if traced else None,
            related=related,
        )

    def _padded_length(self, unpack: ast.Call) -> str | None:
        """`padded.size(1)`: the packed value followed back to its pack_padded_sequence call in this function."""
        function = enclosing_function(self.ctx.ancestors)
        value: ast.AST | None = unpack.args[0] if unpack.args else next((k.value for k in unpack.keywords if k.arg == "sequence"), None)
        for _ in range(_TRACE_STEPS):
            if isinstance(value, ast.Subscript):  # `self.rnn(packed)[0]`
                value = value.value
            if isinstance(value, ast.Name):
                value = local_value(value.id, function, value.lineno, unpacked=True)
            elif isinstance(value, ast.Call) and self.ctx.qualified_name(value.func) == _PACK:
                return self._size_of_padded(value, unpack, function)
            elif isinstance(value, ast.Call) and value.args:  # through the RNN: `self.lstm(packed, state)`
                value = value.args[0]
            else:
                return None
        return None

    @staticmethod
    def _size_of_padded(pack: ast.Call, unpack: ast.Call, function: ast.AST | None) -> str | None:
        padded = pack.args[0] if pack.args else next((k.value for k in pack.keywords if k.arg == "input"), None)
        batch_first = next((k.value for k in pack.keywords if k.arg == "batch_first"), None)
        if batch_first is None and len(pack.args) > _PACK_BATCH_FIRST_POSITION:
            batch_first = pack.args[_PACK_BATCH_FIRST_POSITION]
        dimension = 1 if isinstance(batch_first, ast.Constant) and batch_first.value is True else 0
        if batch_first is not None and not isinstance(batch_first, ast.Constant):
            return None  # the padded dimension is only known at run time
        if not isinstance(padded, ast.Name) or function is None or is_rebound_between(padded.id, function, pack.lineno - 1, unpack.lineno):
            return None  # only a name that still holds the padded input can be reused
        return f"{padded.id}.size({dimension})"

    @staticmethod
    def _padded_length_hint(call: ast.Call) -> str:
        batch_first: ast.expr | None = next((k.value for k in call.keywords if k.arg == "batch_first"), None)
        if batch_first is None and len(call.args) > _BATCH_FIRST_POSITION:
            batch_first = call.args[_BATCH_FIRST_POSITION]
        if batch_first is None or (isinstance(batch_first, ast.Constant) and batch_first.value is False):
            return "<padded input>.size(0)"
        if isinstance(batch_first, ast.Constant) and batch_first.value is True:
            return "<padded input>.size(1)"
        return "<padded input>.size(1)` (batch-first) or `.size(0)"
