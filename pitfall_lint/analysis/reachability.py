"""Whether code runs: a rule about what code does when it runs (binds a port, writes a file, joins a collective)
has nothing to report where it never does.

- The body of `with pytest.raises(...)` (or of a unittest `assertRaises` context) is a test of an error: the call
  there is expected to raise, so it fails before it does what it is for (a `tcp://` URL rejected by a check binds
  nothing), and the statements after it never run.
- A helper nothing can call: a private function (`_name`), or a module-level function of a test file that pytest
  and unittest do not run by its name, which no decorator registers and whose name no file of the project spells
  but at its definition. A public function of a library or a script stays live: its users call it.

And with which arguments: a default that every call of a function (or every construction of a dataclass) leaves
alone is the value of every run, which a rule may treat as written at the place it is used.
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
        isinstance(node, FUNCTIONS)
        and _called_only_by_name(ctx, node, ancestors[:index])
        and _unnamed(ctx, node.name, module_level=index == 1)
        for index, node in enumerate(ancestors)
    )


def _called_only_by_name(ctx: FileContext, function: Function, ancestors: Sequence[ast.AST]) -> bool:
    """Whether only code that spells its name can call the function: no user of a public API, no test runner, no
    registry a decorator fills."""
    name = function.name
    if name.startswith("__") and name.endswith("__"):
        return False
    if not all(is_pure_decorator(ctx, d) for d in function.decorator_list):
        return False
    if name.startswith("_"):
        return True
    return len(ancestors) == 1 and not name.startswith(_RUN_BY_NAME) and is_test_file(ctx)


def is_test_file(ctx: FileContext) -> bool:
    """A file of a test suite: named so (`test_x.py`, `x_test.py`, `conftest.py`) or in a tests folder."""
    folders, _, file_name = ctx.project.relative_path.replace(os.sep, "/").rpartition("/")
    return _TEST_FILE.fullmatch(file_name) is not None or not _TEST_FOLDERS.isdisjoint(folders.split("/"))


def _unnamed(ctx: FileContext, name: str, module_level: bool) -> bool:
    """Whether the name is spelled once in its file (its definition) and in no other file that may use it."""
    return _spelled(ctx, name) == 1 and not ctx.project.named_elsewhere(name, module_level)


def _spelled(ctx: FileContext, name: str) -> int:
    """How many times the file spells the identifier, in code, strings and comments alike."""
    return len(re.findall(rb"\b%s\b" % re.escape(name.encode()), ctx.text.data))


def default_always_taken(ctx: FileContext, definition: Function | ast.ClassDef, parameter: str) -> bool:
    """Whether every call of a module-level function or class leaves the parameter (a dataclass's field, a plain
    class's attribute) at its default: no other file that imports its module names it, and its own file spells the
    name only at the definition and in calls (at least one) that pass neither the parameter's keyword nor its
    position, nor `*args` / `**kwargs`; nothing there assigns the attribute (`config.port = ...`) or gives it to
    `dataclasses.replace`."""
    position = _position(ctx, definition, parameter)
    if position is None or definition not in ctx.tree.body:
        return False
    uses = _name_uses(ctx)
    loads = uses.loads.get(definition.name, [])
    calls = [parent for node, parent in loads if isinstance(parent, ast.Call) and parent.func is node]
    if not calls or len(calls) != len(loads):
        return False  # also named where it is not called: passed on, subclassed, given to a parser
    if isinstance(definition, ast.ClassDef) and parameter in uses.attribute_stores:
        return False  # `config.port = ...`, `dataclasses.replace(config, port=...)`
    for call in calls:
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg in (None, parameter) for k in call.keywords):
            return False
        if position >= 0 and len(call.args) > position:
            return False
    return _spelled(ctx, definition.name) == len(calls) + 1 and not ctx.project.named_elsewhere(definition.name, True)


_KEYWORD_ONLY = -1  # a parameter no positional argument reaches


def _position(ctx: FileContext, definition: Function | ast.ClassDef, parameter: str) -> int | None:
    """Where a call passes the parameter by position (_KEYWORD_ONLY where none does); None where the default is not
    the definition's to give (no such parameter, a base class or an `__init__` of its own in between)."""
    if isinstance(definition, FUNCTIONS):
        arguments = definition.args
        positional = [a.arg for a in [*arguments.posonlyargs, *arguments.args]]
        if parameter in positional:
            return positional.index(parameter)
        return _KEYWORD_ONLY if parameter in {a.arg for a in arguments.kwonlyargs} else None
    if definition.bases or definition.keywords:
        return None  # fields or an `__init__` inherited
    decorators = [
        ctx.qualified_name(d.func if isinstance(d, ast.Call) else d, [ctx.tree]) for d in definition.decorator_list
    ]
    if "dataclasses.dataclass" in decorators:
        fields = _init_fields(definition)
        if parameter not in fields:
            return None
        keyword_only = any(
            isinstance(d, ast.Call) and any(k.arg == "kw_only" and _is_true(k.value) for k in d.keywords)
            for d in definition.decorator_list
        )
        return _KEYWORD_ONLY if keyword_only else fields.index(parameter)
    if decorators or any(isinstance(s, FUNCTIONS) and s.name == "__init__" for s in definition.body):
        return None
    return _KEYWORD_ONLY  # a plain class's attribute: `Config()` takes no argument


def _init_fields(dataclass: ast.ClassDef) -> list[str]:
    """The fields a dataclass's `__init__` takes, in order: not the `ClassVar`s, nor a `field(init=False)`."""
    found = []
    for statement in dataclass.body:
        if not isinstance(statement, ast.AnnAssign) or not isinstance(statement.target, ast.Name):
            continue
        annotation = statement.annotation
        annotation = annotation.value if isinstance(annotation, ast.Subscript) else annotation
        if (annotation.attr if isinstance(annotation, ast.Attribute) else getattr(annotation, "id", "")) == "ClassVar":
            continue
        value = statement.value
        if isinstance(value, ast.Call) and any(k.arg == "init" and not _is_true(k.value) for k in value.keywords):
            continue
        found.append(statement.target.id)
    return found


def _is_true(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


class _NameUses:
    """Where a file reads each name, and the attributes it assigns: built once, when a default is asked about."""

    def __init__(self, ctx: FileContext) -> None:
        self.loads: dict[str, list[tuple[ast.Name, ast.AST]]] = {}
        self.attribute_stores: set[str] = set()  # assigned, or given to `dataclasses.replace`
        for parent in ast.walk(ctx.tree):
            for child in ast.iter_child_nodes(parent):
                if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Load):
                    self.loads.setdefault(child.id, []).append((child, parent))
                elif isinstance(child, ast.Attribute) and not isinstance(child.ctx, ast.Load):
                    self.attribute_stores.add(child.attr)
            if isinstance(parent, ast.Call) and ctx.qualified_name(parent.func, [ctx.tree]) == "dataclasses.replace":
                self.attribute_stores.update(k.arg for k in parent.keywords if k.arg is not None)


def _name_uses(ctx: FileContext) -> _NameUses:
    key = ("name-uses", id(ctx.tree))
    if key not in ctx.memo:
        ctx.memo[key] = _NameUses(ctx)
    return ctx.memo[key]  # type: ignore[return-value]
