"""The one walk over a file's tree: handlers by node type, `ctx.ancestors` kept, function-local imports noted."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

from pitfall_lint.context import FileContext

Handler = Callable[[ast.AST], None]

# Fields that never hold a node a rule could want: expression contexts and operators.
_SKIPPED_FIELDS = frozenset({"ctx", "op", "ops"})
# What a field holds, from its type in Python's grammar: `expr* args` a list, `expr? returns` a node or None,
# `identifier name` no node at all; a field the grammar's text does not name is looked at value by value.
_LIST, _NODE, _ANY = 1, 2, 3
_NOT_NODES = frozenset({"identifier", "string", "int", "constant"})
_SIGNATURE = re.compile(r"\w+\((.*)\)")
_CHILD_FIELDS: dict[type[ast.AST], tuple[tuple[str, int], ...]] = {}
_LEAF_TYPES = frozenset({ast.Name, ast.Constant})


def _declared_kinds(node_type: type[ast.AST]) -> dict[str, int | None]:
    """The fields' kinds (None: no node) as the signature `ast` documents each class with declares them:
    `Call(expr func, expr* args, keyword* keywords)`."""
    match = _SIGNATURE.fullmatch((node_type.__doc__ or "").partition("\n")[0].strip())
    kinds: dict[str, int | None] = {}
    for declared in match.group(1).split(",") if match and match.group(1) else ():
        spelled, _, name = declared.strip().rpartition(" ")
        kinds[name] = None if spelled.rstrip("*?") in _NOT_NODES else _LIST if spelled.endswith("*") else _NODE
    return kinds


def _child_fields(node_type: type[ast.AST]) -> tuple[tuple[str, int], ...]:
    """The fields that may hold a node a rule could want, each with its kind, last first: names, strings and numbers
    are never looked at (a sixth of a walk went to them)."""
    declared = _declared_kinds(node_type)
    kinds = [(name, declared.get(name, _ANY)) for name in node_type._fields if name not in _SKIPPED_FIELDS]
    return tuple(reversed([(name, kind) for name, kind in kinds if kind is not None]))


def traverse(ctx: FileContext, dispatch: dict[type[ast.AST], list[Handler]]) -> None:
    """Every node in source order; each handler of its type sees it with `ctx.ancestors` set."""
    dispatch = {node_type: list(handlers) for node_type, handlers in dispatch.items()}
    imports: tuple[type[ast.AST], ...] = (ast.Import, ast.ImportFrom)
    for node_type in imports:
        dispatch.setdefault(node_type, []).insert(
            0, lambda node: ctx.resolver.note_local_import(node, ctx.ancestors)  # type: ignore[arg-type]
        )
    ancestors = ctx.ancestors
    stack: list[tuple[ast.AST, int]] = [(ctx.tree, 0)]
    fields_of = _CHILD_FIELDS
    # Names and constants are half of all nodes and have no children: skip them unless subscribed.
    leaves = _LEAF_TYPES.difference(dispatch)
    while stack:
        node, depth = stack.pop()
        del ancestors[depth:]
        node_type = type(node)
        handlers = dispatch.get(node_type)
        if handlers:
            for handler in handlers:
                handler(node)
        ancestors.append(node)
        fields = fields_of.get(node_type)
        if fields is None:
            fields = fields_of[node_type] = _child_fields(node_type)
        depth += 1
        # Children are pushed last-first so that they pop in source order.
        for name, kind in fields:
            value = getattr(node, name, None)
            if kind == _LIST:
                for item in reversed(value or ()):
                    if item is not None and type(item) not in leaves:  # None: `**kw` among a dict's keys
                        stack.append((item, depth))
            elif kind == _NODE:
                if value is not None and type(value) not in leaves:
                    stack.append((value, depth))
            else:
                stack.extend((child, depth) for child in reversed(_nodes_in(value)) if type(child) not in leaves)
    del ancestors[:]


def _nodes_in(value: object) -> list[ast.AST]:
    """The nodes a field of a kind the grammar's text does not tell holds."""
    items = value if type(value) is list else [value]
    return [item for item in items if isinstance(item, ast.AST)]


def parent_map(tree: ast.AST) -> dict[int, ast.AST]:
    """Each node's parent, by the child's id: one pass over the fields that can hold a node a rule could want (ast.walk
    with iter_child_nodes took twice as long, and every node's children twice)."""
    parents: dict[int, ast.AST] = {}
    todo = [tree]
    fields_of = _CHILD_FIELDS
    leaves = _LEAF_TYPES
    while todo:
        node = todo.pop()
        node_type = type(node)
        fields = fields_of.get(node_type)
        if fields is None:
            fields = fields_of[node_type] = _child_fields(node_type)
        for name, kind in fields:
            value = getattr(node, name, None)
            children = (value or ()) if kind == _LIST else (value,) if kind == _NODE else _nodes_in(value)
            for child in children:
                if child is not None:
                    parents[id(child)] = node
                    if type(child) not in leaves:
                        todo.append(child)
    return parents


def nodes_of(tree: ast.AST, node_types: tuple[type[ast.AST], ...]) -> list[ast.AST]:
    """The nodes of these types, in source order (traverse's), for a look that needs no scope: no ancestors kept and
    no handler called for each node, which made such a walk cost as much as the engine's."""
    found: list[ast.AST] = []
    wanted = frozenset(node_types)
    leaves = _LEAF_TYPES.difference(wanted)
    fields_of = _CHILD_FIELDS
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        node_type = type(node)
        if node_type in wanted:
            found.append(node)
        fields = fields_of.get(node_type)
        if fields is None:
            fields = fields_of[node_type] = _child_fields(node_type)
        for name, kind in fields:
            value = getattr(node, name, None)
            if kind == _LIST:
                for item in reversed(value or ()):
                    if item is not None and type(item) not in leaves:
                        stack.append(item)
            elif kind == _NODE:
                if value is not None and type(value) not in leaves:
                    stack.append(value)
            else:
                stack.extend(child for child in reversed(_nodes_in(value)) if type(child) not in leaves)
    return found
