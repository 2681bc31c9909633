"""Whether code runs: a rule about what code does when it runs (binds a port, writes a file, joins a collective)
has nothing to report where it never does.

- The body of `with pytest.raises(...)` (or of a unittest `assertRaises` context) is a test of an error: the call
  there is expected to raise, so it fails before it does what it is for (a `tcp://` URL rejected by a check binds
  nothing), and the statements after it never run.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from itertools import pairwise

from pitfall_lint.context import FileContext

# Context managers that expect the block to raise, by qualified name, and unittest's methods by their own name.
_RAISES_CONTEXTS = frozenset({"pytest.raises", "numpy.testing.assert_raises", "numpy.testing.assert_raises_regex"})
_ASSERT_RAISES_METHODS = frozenset({"assertRaises", "assertRaisesRegex", "assertRaisesRegexp"})


def _expects_raise(ctx: FileContext, item: ast.withitem, ancestors: Sequence[ast.AST]) -> bool:
    call = item.context_expr
    if not isinstance(call, ast.Call):
        return False
    if isinstance(call.func, ast.Attribute) and call.func.attr in _ASSERT_RAISES_METHODS:
        return True  # `self.assertRaises(ValueError)`, whatever the test case is called
    return ctx.qualified_name(call.func, ancestors) in _RAISES_CONTEXTS


def expects_exception(ctx: FileContext, node: ast.AST, ancestors: Sequence[ast.AST]) -> bool:
    """Whether `node` (with its ancestors) is in the body of a `with` block that expects an exception."""
    chain = [*ancestors, node]
    return any(
        isinstance(parent, (ast.With, ast.AsyncWith))
        and isinstance(child, ast.stmt)
        and any(_expects_raise(ctx, item, chain[:index]) for item in parent.items)
        for index, (parent, child) in enumerate(pairwise(chain))
    )
