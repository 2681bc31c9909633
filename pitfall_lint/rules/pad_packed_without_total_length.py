"""PFL102: each DataParallel replica pads to its own longest sequence, and the gather fails."""

from __future__ import annotations

import ast

from pitfall_lint.analysis.modules import is_module_class
from pitfall_lint.analysis.scopes import enclosing_class
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.rules.base import Rule

_TOTAL_LENGTH_POSITION = 3  # pad_packed_sequence(sequence, batch_first, padding_value, total_length)
_BATCH_FIRST_POSITION = 1


class PadPackedWithoutTotalLength(Rule):
    info = RuleInfo(
        code="PFL102",
        name="pad-packed-without-total-length",
        summary="pad_packed_sequence without total_length in a Module: DataParallel's gather fails.",
        severity="warning",
        hint='pass `total_length=<padded input>.size(1)` (batch-first) or `.size(0)`, so every replica pads to the same length',
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
        cls = enclosing_class(self.ctx.ancestors)
        if cls is None or not is_module_class(self.ctx, cls):
            return
        self.report(
            node,
            "`pad_packed_sequence` without `total_length`: nn.DataParallel replicas pad to different "
            f"lengths and the gather fails; pass `total_length={self._padded_length_hint(node)}`",
        )

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
