"""Import and alias resolution: turns `tnn.DataParallel` into `torch.nn.DataParallel`.

Rules match qualified names, never spellings, so every import style and alias works the same
way, and a local function that merely shares a torch name (`def save(...)`) never matches.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence

# Public spellings of objects that torch also exposes under their defining module.
_CANONICAL_PREFIXES: dict[str, str] = {
    "torch.nn.modules.module.Module": "torch.nn.Module",
    "torch.nn.parallel.distributed.DistributedDataParallel": "torch.nn.parallel.DistributedDataParallel",
    "torch.nn.parallel.data_parallel.DataParallel": "torch.nn.DataParallel",
    "torch.nn.parallel.DataParallel": "torch.nn.DataParallel",
    "torch.nn.DistributedDataParallel": "torch.nn.parallel.DistributedDataParallel",
    "torch.serialization.save": "torch.save",
    "torch.serialization.load": "torch.load",
    "torch.multiprocessing.spawn.spawn": "torch.multiprocessing.spawn",
    "torch.multiprocessing.spawn.start_processes": "torch.multiprocessing.start_processes",
    "torch.distributed.distributed_c10d.": "torch.distributed.",
}

_PREFIX_ROOTS = tuple({prefix.partition(".")[0] + "." for prefix in _CANONICAL_PREFIXES})

_FUNCTION_NODES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_Scope = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda


def canonical(name: str) -> str:
    if not name.startswith(_PREFIX_ROOTS):
        return name  # the cheap look first: most names are not torch's
    for prefix, replacement in _CANONICAL_PREFIXES.items():
        if name.startswith(prefix):
            return replacement + name[len(prefix) :]
    return name


def _import_bindings(node: ast.Import | ast.ImportFrom) -> Iterable[tuple[str, str]]:
    """(local name, qualified name) pairs that an import statement binds."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname:
                yield alias.asname, alias.name
            else:
                top = alias.name.partition(".")[0]
                yield top, top
        return
    module = "." * node.level + (node.module or "")
    for alias in node.names:
        if alias.name != "*":
            # `from . import x` is `.x`, `from .pkg import x` is `.pkg.x`
            joined = f"{module}{alias.name}" if module.endswith(".") else f"{module}.{alias.name}"
            yield alias.asname or alias.name, joined if module else alias.name


def _assigned_names(target: ast.expr) -> Iterable[str]:
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            yield from _assigned_names(element)
    elif isinstance(target, ast.Starred):
        yield from _assigned_names(target.value)


def _module_level_statements(body: Sequence[ast.stmt]) -> Iterable[ast.stmt]:
    """Statements that run at import time, including those nested in if/try/with blocks."""
    for statement in body:
        yield statement
        if isinstance(statement, (ast.If, ast.For, ast.While, ast.With, ast.AsyncWith)):
            yield from _module_level_statements(statement.body)
            yield from _module_level_statements(getattr(statement, "orelse", []))
        elif isinstance(statement, ast.Try):
            for block in (statement.body, statement.orelse, statement.finalbody):
                yield from _module_level_statements(block)
            for handler in statement.handlers:
                yield from _module_level_statements(handler.body)


class NameResolver:
    """Module bindings are read up front; function-local imports are added during the traversal."""

    def __init__(self, tree: ast.Module) -> None:
        self._module: dict[str, str] = {}
        self._imported: set[str] = set()  # module-level names that an import binds
        self._local_imports: dict[int, dict[str, str]] = {}
        self._parameters: dict[int, frozenset[str]] = {}
        for statement in _module_level_statements(tree.body):
            self._bind_module_statement(statement)

    def _bind_module_statement(self, statement: ast.stmt) -> None:
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            bindings = dict(_import_bindings(statement))
            self._module.update(bindings)
            self._imported.update(bindings)
        elif isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self._module[statement.name] = statement.name
        elif isinstance(statement, (ast.Assign, ast.AnnAssign)):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            for target in targets:
                for name in _assigned_names(target):
                    self._module[name] = name

    def module_alias(self, qualified: str) -> str | None:
        """A module-level name bound to exactly this (`dist` for `torch.distributed`)."""
        return next((local for local, bound in self._module.items() if bound == qualified), None)

    def note_local_import(self, node: ast.Import | ast.ImportFrom, ancestors: Sequence[ast.AST]) -> None:
        scope = next((a for a in reversed(ancestors) if isinstance(a, _FUNCTION_NODES)), None)
        if scope is not None:
            self._local_imports.setdefault(id(scope), {}).update(_import_bindings(node))

    def is_imported(self, name: str, ancestors: Sequence[ast.AST]) -> bool:
        """Whether `name`, read where `ancestors` lead, is bound by an import (of the module or of a function)."""
        for scope in reversed(ancestors):
            if isinstance(scope, _FUNCTION_NODES):
                if name in self._local_imports.get(id(scope), ()):
                    return True
                if name in self._parameter_names(scope):
                    return False
        return name in self._imported

    def _parameter_names(self, scope: _Scope) -> frozenset[str]:
        cached = self._parameters.get(id(scope))
        if cached is None:
            args = scope.args
            every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
            cached = frozenset(a.arg for a in every if a is not None)
            self._parameters[id(scope)] = cached
        return cached

    def _lookup(self, name: str, ancestors: Sequence[ast.AST]) -> str | None:
        for scope in reversed(ancestors):
            if isinstance(scope, _FUNCTION_NODES):
                local = self._local_imports.get(id(scope))
                if local and name in local:
                    return local[name]
                if name in self._parameter_names(scope):
                    return None
        return self._module.get(name, name)

    def qualified_name(self, expr: ast.AST, ancestors: Sequence[ast.AST]) -> str | None:
        """`torch.nn.utils.rnn.pad_packed_sequence` for any spelling of it, None when unknowable."""
        attributes: list[str] = []
        while isinstance(expr, ast.Attribute):
            attributes.append(expr.attr)
            expr = expr.value
        if not isinstance(expr, ast.Name):
            return None
        base = self._lookup(expr.id, ancestors)
        if base is None:
            return None
        return canonical(".".join([base, *reversed(attributes)]))
