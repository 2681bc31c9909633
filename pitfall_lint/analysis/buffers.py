"""In-memory file objects: a save into or a load from `io.BytesIO` touches no shared file or device path."""

from __future__ import annotations

import ast
from collections.abc import Sequence

from pitfall_lint.analysis.scopes import enclosing_function, local_value
from pitfall_lint.context import FileContext


def is_in_memory_buffer(ctx: FileContext, target: ast.expr, ancestors: Sequence[ast.AST]) -> bool:
    """`io.BytesIO(...)` itself, or a local variable last assigned one before this use."""
    if isinstance(target, ast.Name):
        value = local_value(target.id, enclosing_function(ancestors), target.lineno, ctx.tree)
        target = value if isinstance(value, ast.expr) else target
    return isinstance(target, ast.Call) and ctx.qualified_name(target.func, ancestors) == "io.BytesIO"
