"""PFL102: each DataParallel replica pads to its own longest sequence, and the gather fails."""

from __future__ import annotations

import ast

from pitfall_lint.analysis.modules import data_parallel_reach, is_module_class, wrapped_at
from pitfall_lint.analysis.scopes import enclosing_class, enclosing_function, is_rebound_between, local_value
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.rules.base import Rule

_TOTAL_LENGTH_POSITION = 3  # pad_packed_sequence(sequence, batch_first, padding_value, total_length)
_BATCH_FIRST_POSITION = 1
_PACK_BATCH_FIRST_POSITION = 2  # pack_padded_sequence(input, lengths, batch_first, enforce_sorted)
_PACK = "torch.nn.utils.rnn.pack_padded_sequence"
_TRACE_STEPS = 6  # unpacked <- rnn(...) <- packed <- pack_padded_sequence(...), with room for a few renames


class PadPackedWithoutTotalLength(Rule):
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
