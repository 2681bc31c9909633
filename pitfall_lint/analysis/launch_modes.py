"""Launch modes: the side of a script's mode switch that a distributed launch never takes.

A script that runs in two ways (`--mode single` as one plain process, `--mode dist` under torchrun) picks its way
with a test on a value that every process of one launch shares: an argparse option, a configuration value. When
every place that sets up distributed training lies on the other side of that test (directly, or in a function or
class that only the other side uses), the code on this side never runs in a distributed launch: one process runs
it, whatever it writes or waits for.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

from pitfall_lint.analysis.ranks import depends_on_rank, names_rank
from pitfall_lint.analysis.scopes import FUNCTIONS, position_in_block
from pitfall_lint.context import FileContext

# What a test may be built of to be the same in every process of a launch: names, attributes, literals and
# comparisons of them (`args.mode == "single"`, `cfg["mode"] in ("eval", "test")`, `not args.ddp`). A call may
# answer differently from process to process (`is_main_process()`), and is not read.
_SHARED_PARTS = (
    ast.Name, ast.Attribute, ast.Constant, ast.Compare, ast.BoolOp, ast.UnaryOp, ast.Subscript, ast.Tuple, ast.List,
    ast.Set, ast.expr_context, ast.cmpop, ast.boolop, ast.unaryop,
)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
Span = tuple[int, int]  # first and last line


def _shared_by_a_launch(ctx: FileContext, test: ast.expr, ancestors: Sequence[ast.AST]) -> bool:
    """Whether every process of one launch computes the test alike: built of shared parts, with no rank in it."""
    return (
        all(isinstance(node, _SHARED_PARTS) for node in ast.walk(test))
        and not names_rank(test)
        and not depends_on_rank(ctx, test, ancestors)
    )


def _span(block: Sequence[ast.stmt]) -> Span:
    return block[0].lineno, block[-1].end_lineno or block[-1].lineno


def _other_sides(ctx: FileContext, node: ast.AST, ancestors: Sequence[ast.AST]) -> list[Span]:
    """The lines of the other side of each mode switch around `node`: an `if` on a value the launch shares, not
    inside a loop of its own scope (a loop could take both sides in one process, one after the other)."""
    chain = [*ancestors, node]
    found: list[Span] = []
    for index in range(len(chain) - 1, 0, -1):
        parent, child = chain[index - 1], chain[index]
        if isinstance(parent, (*FUNCTIONS, ast.Lambda)):
            break  # what encloses the function runs when it is defined, not when it is called
        if isinstance(parent, _LOOPS):
            found.clear()  # the switches inside the loop; a loop inside a switch's side changes nothing
            continue
        if not isinstance(parent, ast.If) or child is parent.test:
            continue
        other = parent.orelse if position_in_block(parent, "body", child) is not None else parent.body
        if other and _shared_by_a_launch(ctx, parent.test, chain[: index - 1]):
            found.append(_span(other))
    return found


def _within(line: int, spans: Sequence[Span]) -> bool:
    return any(first <= line <= last for first, last in spans)


def _definitions(ctx: FileContext) -> dict[str, Span]:
    """The file's module-level functions and classes, by name, with their lines (decorators included)."""
    key = ("launch-mode-definitions",)
    if key not in ctx.memo:
        found: dict[str, Span] = {}
        for statement in ctx.tree.body:
            if isinstance(statement, (*FUNCTIONS, ast.ClassDef)):
                first = min([statement.lineno, *(d.lineno for d in statement.decorator_list)])
                found[statement.name] = (first, statement.end_lineno or statement.lineno)
        ctx.memo[key] = found
    return ctx.memo[key]  # type: ignore[return-value]


def _uses(ctx: FileContext) -> dict[str, list[int]]:
    """The lines that read each module-level definition's name (a call, or a function handed to `mp.spawn`)."""
    key = ("launch-mode-uses",)
    if key not in ctx.memo:
        names = _definitions(ctx)
        found: dict[str, list[int]] = {}
        for node in ast.walk(ctx.tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in names:
                found.setdefault(node.id, []).append(node.lineno)
        ctx.memo[key] = found
    return ctx.memo[key]  # type: ignore[return-value]


def _used_only_within(ctx: FileContext, spans: list[Span]) -> list[Span]:
    """`spans` and the lines of every module-level definition that only code within them uses, directly or
    through other such definitions; one that nothing in the file uses is not among them."""
    definitions, uses = _definitions(ctx), _uses(ctx)
    reached = list(spans)
    pending = dict(definitions)
    grew = True
    while grew:
        grew = False
        for name, own in list(pending.items()):
            outside = [line for line in uses.get(name, ()) if not own[0] <= line <= own[1]]
            if outside and all(_within(line, reached) for line in outside):
                reached.append(own)
                del pending[name]
                grew = True
    return reached


def runs_outside_distributed_launch(
    ctx: FileContext, node: ast.AST, ancestors: Sequence[ast.AST], setup_lines: Sequence[int]
) -> bool:
    """Whether `node` is on one side of a mode switch while every set-up of distributed training of the file
    (`setup_lines`) is on the other side, or in a function or class that only the other side uses."""
    if not setup_lines:
        return False
    sides = _other_sides(ctx, node, ancestors)
    if not sides:
        return False
    if all(_within(line, sides) for line in setup_lines):
        return True
    reached = _used_only_within(ctx, sides)
    return all(_within(line, reached) for line in setup_lines)


def may_run_outside_distributed_launch(ancestors: Sequence[ast.AST]) -> bool:
    """The cheap look first: an `if` with two sides encloses the node in its own scope."""
    for parent in reversed(ancestors):
        if isinstance(parent, (*FUNCTIONS, ast.Lambda)):
            return False
        if isinstance(parent, ast.If) and parent.body and parent.orelse:
            return True
    return False
