"""Whether code runs: a rule about what code does when it runs (binds a port, writes a file, joins a collective)
has nothing to report where it never does.

- The body of `with pytest.raises(...)` (or of a unittest `assertRaises` context) is a test of an error: the call
  there is expected to raise, so it fails before it does what it is for (a `tcp://` URL rejected by a check binds
  nothing), and the statements after it never run.
- A helper nothing can call: a private function (`_name`), or a module-level function of a test file that pytest
  and unittest do not run by its name, which no decorator registers and whose name no file of the project spells
  but at its definition. A public function of a library or a script stays live: its users call it.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Sequence
from itertools import pairwise

from pitfall_lint.analysis.scopes import FUNCTIONS, Function
from pitfall_lint.analysis.top_level import is_pure_decorator
from pitfall_lint.context import FileContext

# Context managers that expect the block to raise, by qualified name, and unittest's methods by their own name.
_RAISES_CONTEXTS = frozenset({"pytest.raises", "numpy.testing.assert_raises", "numpy.testing.assert_raises_regex"})
_ASSERT_RAISES_METHODS = frozenset({"assertRaises", "assertRaisesRegex", "assertRaisesRegexp"})
# Where pytest and unittest look for tests and fixtures, and the names they call there without a caller in the code.
_TEST_FOLDERS = frozenset({"test", "tests", "testing"})
_TEST_FILE = re.compile(r"(test_.*|.*_test|conftest)\.py")
_RUN_BY_NAME = ("test", "setup", "teardown", "setUp", "tearDown", "pytest_", "load_tests")


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


def never_runs(ctx: FileContext, node: ast.AST, ancestors: Sequence[ast.AST]) -> bool:
    """Whether `node` (with its ancestors) is code that cannot run, or is expected to raise before its effect."""
    return expects_exception(ctx, node, ancestors) or in_unnamed_helper(ctx, ancestors)


def in_unnamed_helper(ctx: FileContext, ancestors: Sequence[ast.AST]) -> bool:
    """Whether a function around the node is a helper nothing can call (see the module's docstring)."""
    return any(
        isinstance(node, FUNCTIONS) and _called_only_by_name(ctx, node, ancestors[:index]) and _unnamed(ctx, node.name)
        for index, node in enumerate(ancestors)
    )


def _called_only_by_name(ctx: FileContext, function: Function, ancestors: Sequence[ast.AST]) -> bool:
    """Whether only code that spells its name can call the function: no user of a public API, no test runner, no
    registry a decorator fills."""
    name = function.name
    if (name.startswith("__") and name.endswith("__")) or not all(is_pure_decorator(ctx, d) for d in function.decorator_list):
        return False
    if name.startswith("_"):
        return True
    return len(ancestors) == 1 and not name.startswith(_RUN_BY_NAME) and _is_test_file(ctx)


def _is_test_file(ctx: FileContext) -> bool:
    folders, _, file_name = ctx.project.relative_path.replace(os.sep, "/").rpartition("/")
    return _TEST_FILE.fullmatch(file_name) is not None or not _TEST_FOLDERS.isdisjoint(folders.split("/"))


def _unnamed(ctx: FileContext, name: str) -> bool:
    """Whether the name is spelled once in its file (its definition) and in no other file of the project."""
    spelled = len(re.findall(rb"\b%s\b" % re.escape(name.encode()), ctx.text.data))
    return spelled == 1 and not ctx.project.named_elsewhere(name)
