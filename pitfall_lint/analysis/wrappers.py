"""Does a name hold a DataParallel / DistributedDataParallel wrapper (and not the bare model) at a given line?"""

from __future__ import annotations

import ast
from collections.abc import Sequence

from pitfall_lint.analysis.scopes import enclosing_function, local_value
from pitfall_lint.context import FileContext

WRAPPERS = frozenset({"torch.nn.DataParallel", "torch.nn.parallel.DistributedDataParallel"})


def holds_wrapper(ctx: FileContext, name: str, ancestors: Sequence[ast.AST], line: int) -> bool:
    """True when the last assignment to `name` before `line` (in the function, else at module level) wraps."""
    function = enclosing_function(ancestors)
    value = local_value(name, function, line, ctx.tree)
    if value is None and function is not None:
        value = local_value(name, None, line, ctx.tree)
    return isinstance(value, ast.Call) and ctx.qualified_name(value.func, ancestors) in WRAPPERS
