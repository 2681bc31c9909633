"""The walks read each field's kind from the grammar `ast` documents; what they reach must be what a walk that looks at
every field's values reaches, in the same order."""

from __future__ import annotations

import ast
from types import SimpleNamespace

from pitfall_lint.traversal import nodes_of, parent_map, traverse

SOURCE = '''
import os
from . import sibling as near
global_names = {**os.environ, "a": 1, None: [x async for x in y]}
@decorate(key=lambda a, *, b=None, **c: a)
async def f(p: int, /, q: "str" = 1, *args, r, s=2, **kwargs) -> dict[str, int]:
    global counter
    nonlocal_value = f"{p!r:>{q}} and {r=}"
    with open(p) as (h, g), other():
        del h
    try:
        raise ValueError from None
    except (KeyError, OSError) as error:
        pass
    match p:
        case {"k": 1, **rest} if rest:
            return
        case Point(x=0, y=[1, *others]) | None as found:
            yield found
        case _:
            assert p, "message"
    return -p if p else not q
class C(Base, metaclass=Meta):
    x: int = 3
    def m(self):
        return self.x[1:2, ::3], (yield), [i for i in range(3) if i]
'''


def every_field_walk(tree: ast.AST) -> list[tuple[ast.AST, int]]:
    """The reference: every field's values looked at, in the order of `_fields`, lists in order."""
    found: list[tuple[ast.AST, int]] = []

    def visit(node: ast.AST, depth: int) -> None:
        found.append((node, depth))
        for name in node._fields:
            if name in ("ctx", "op", "ops"):
                continue
            value = getattr(node, name, None)
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, ast.AST):
                    visit(item, depth + 1)

    visit(tree, 0)
    return found


def traversed(tree: ast.AST) -> list[tuple[ast.AST, int]]:
    ctx = SimpleNamespace(tree=tree, ancestors=[], resolver=SimpleNamespace(note_local_import=lambda node, ancestors: None))
    found: list[tuple[ast.AST, int]] = []
    node_types = {type(node) for node, _ in every_field_walk(tree)}
    traverse(ctx, {node_type: [lambda node: found.append((node, len(ctx.ancestors)))] for node_type in node_types})  # type: ignore[arg-type]
    return found


def test_the_walks_reach_what_a_walk_of_every_field_reaches_in_its_order() -> None:
    tree = ast.parse(SOURCE)
    reference = every_field_walk(tree)
    assert [(id(node), depth) for node, depth in traversed(tree)] == [(id(node), depth) for node, depth in reference]
    wanted = (ast.Call, ast.Name, ast.arg, ast.keyword, ast.match_case, ast.alias)
    assert [id(node) for node in nodes_of(tree, wanted)] == [id(node) for node, _ in reference if isinstance(node, wanted)]
    parents = parent_map(tree)
    stack: list[ast.AST] = []
    for node, depth in reference:
        del stack[depth:]
        if stack:
            assert parents[id(node)] is stack[-1]
        stack.append(node)
    assert len(parents) == len(reference) - 1


class Undocumented(ast.expr):
    """A node class whose signature this text does not give: its fields are looked at value by value."""

    _fields = ("label", "value", "items")


def test_a_node_class_without_a_documented_signature_is_walked_by_its_values() -> None:
    inner = ast.Call(ast.Name("g", ast.Load()), [], [])
    odd = Undocumented()
    odd.label, odd.value, odd.items = "a name", ast.Name("v", ast.Load()), [ast.Constant(1), inner, None]
    tree = ast.Module([ast.Expr(odd)], [])
    reached = [type(node).__name__ for node, _ in traversed(tree)]
    assert reached == ["Module", "Expr", "Undocumented", "Name", "Constant", "Call", "Name"]
    assert [type(node).__name__ for node in nodes_of(tree, (ast.Call, ast.Name))] == ["Name", "Call", "Name"]
    assert parent_map(tree)[id(inner)] is odd
