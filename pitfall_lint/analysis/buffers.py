"""Save targets that no two processes share: in-memory buffers, per-rank paths, per-process temporary folders."""

from __future__ import annotations

import ast
from collections.abc import Sequence

from pitfall_lint.analysis.ranks import depends_on_rank
from pitfall_lint.analysis.scopes import enclosing_class, enclosing_function, local_value
from pitfall_lint.context import FileContext

# pytest's fixtures: a folder per test, and per test process under pytest-xdist.
_PYTEST_FOLDERS = frozenset({"tmp_path", "tmpdir", "tmp_path_factory", "tmpdir_factory"})
# A fresh, unique name on every call, so on every process.
_UNIQUE_TEMPORARIES = frozenset(
    {"tempfile.mkdtemp", "tempfile.mkstemp", "tempfile.TemporaryDirectory", "tempfile.NamedTemporaryFile", "tempfile.TemporaryFile"}
)
_MAX_DEPTH = 3


def is_in_memory_buffer(ctx: FileContext, target: ast.expr, ancestors: Sequence[ast.AST]) -> bool:
    """`io.BytesIO(...)` itself, or a local variable last assigned one before this use."""
    if isinstance(target, ast.Name):
        value = local_value(target.id, enclosing_function(ancestors), target.lineno, ctx.tree)
        target = value if isinstance(value, ast.expr) else target
    return isinstance(target, ast.Call) and ctx.qualified_name(target.func, ancestors) == "io.BytesIO"


def _instance_values(ctx: FileContext, cls: ast.ClassDef, attribute: str) -> list[ast.expr]:
    """What the class's methods assign to `self.<attribute>` (`self.tmp = tempfile.mkdtemp()` in `setUp`)."""
    key = ("instance-values", id(cls))
    if key not in ctx.memo:
        table: dict[str, list[ast.expr]] = {}
        for node in ast.walk(cls):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                        table.setdefault(target.attr, []).append(node.value)
        ctx.memo[key] = table
    return ctx.memo[key].get(attribute, [])  # type: ignore[attr-defined]


def _per_process_folder(ctx: FileContext, path: ast.AST, ancestors: Sequence[ast.AST], depth: int = 0) -> bool:
    """Built from pytest's tmp_path (and relatives) or from a unique temporary name, through local variables and
    the instance's attributes."""
    function = enclosing_function(ancestors)
    cls = enclosing_class(ancestors)
    for node in ast.walk(path):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self" and cls is not None:
            if depth < _MAX_DEPTH and any(_per_process_folder(ctx, v, ancestors, depth + 1) for v in _instance_values(ctx, cls, node.attr)):
                return True
        if isinstance(node, ast.Name) and node.id in _PYTEST_FOLDERS:
            return True
        if isinstance(node, ast.Call) and ctx.qualified_name(node.func, ancestors) in _UNIQUE_TEMPORARIES:
            return True
        if isinstance(node, ast.Name) and depth < _MAX_DEPTH:
            value = local_value(node.id, function, node.lineno, ctx.tree)
            if value is not None and _per_process_folder(ctx, value, ancestors, depth + 1):
                return True
    return False


def writes_per_process(ctx: FileContext, target: ast.expr, ancestors: Sequence[ast.AST]) -> bool:
    """Whether every process writes its own target: the rank in the path, a buffer, a per-process folder."""
    return (
        depends_on_rank(ctx, target, ancestors)
        or is_in_memory_buffer(ctx, target, ancestors)
        or _per_process_folder(ctx, target, ancestors)
    )
