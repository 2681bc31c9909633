"""The one walk over a file's tree: handlers by node type, `ctx.ancestors` kept, function-local imports noted."""

from __future__ import annotations

import ast
from collections.abc import Callable

from pitfall_lint.context import FileContext

Handler = Callable[[ast.AST], None]

# Fields that never hold a node a rule could want: expression contexts and operators.
_SKIPPED_FIELDS = frozenset({"ctx", "op", "ops"})
_CHILD_FIELDS: dict[type[ast.AST], tuple[str, ...]] = {}
_LEAF_TYPES = frozenset({ast.Name, ast.Constant})


def _child_fields(node_type: type[ast.AST]) -> tuple[str, ...]:
    return tuple(reversed([f for f in node_type._fields if f not in _SKIPPED_FIELDS]))


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
        for name in fields:
            value = getattr(node, name, None)
            if type(value) is list:
                for item in reversed(value):
                    if isinstance(item, ast.AST) and type(item) not in leaves:
                        stack.append((item, depth))
            elif isinstance(value, ast.AST) and type(value) not in leaves:
                stack.append((value, depth))
    del ancestors[:]


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
        for name in fields:
            value = getattr(node, name, None)
            if type(value) is list:
                for item in value:
                    if isinstance(item, ast.AST):
                        parents[id(item)] = node
                        if type(item) not in leaves:
                            todo.append(item)
            elif isinstance(value, ast.AST):
                parents[id(value)] = node
                if type(value) not in leaves:
                    todo.append(value)
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
        for name in fields:
            value = getattr(node, name, None)
            if type(value) is list:
                for item in reversed(value):
                    if isinstance(item, ast.AST) and type(item) not in leaves:
                        stack.append(item)
            elif isinstance(value, ast.AST) and type(value) not in leaves:
                stack.append(value)
    return found
