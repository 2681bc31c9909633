"""Where the ranks part ways in a function's own code: a rank guard around a statement, its `else`, an early rank
exit before it (`if rank != 0: return`), a one-process decorator. Only splits that can be spelled out count: the
test must name a rank and be able to differ between ranks, unlike `local_rank != -1` (is the run distributed?)
or a value a collective agreed on. PFL207 reads a collective's restrictions here, and the rules that a rank guard
breaks in other ways (a device mesh built on some ranks, a loop left on one) read theirs."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from itertools import pairwise

from pitfall_lint.analysis.evidence import snippet
from pitfall_lint.analysis.ranks import names_rank, one_process_decorators
from pitfall_lint.analysis.scopes import (
    FUNCTIONS,
    position_in_block,
    ruled_out_by_place,
)
from pitfall_lint.context import FileContext

# What ends a block early on some ranks; a `raise` is a failed check, not another path through the program.
_TERMINATORS = (ast.Return, ast.Continue, ast.Break)
# Values a rank is compared with to ask "is this run distributed at all?", the same answer on every rank.
_NOT_A_RANK = (-1, None)
# Calls whose result every rank shares: a collective's.
_AGREED_WORDS = ("reduce", "broadcast", "gather", "all_", "agree")


@dataclass(frozen=True)
class Restriction:
    """What keeps some ranks away from the call: a guard it is in, an early exit before it, a decorator."""

    kind: str  # "guard", "else", "exit", "decorator"
    node: ast.AST
    text: str

    @property
    def key(self) -> tuple[int, str]:
        return id(self.node), self.kind

    def where(self) -> str:
        """Where the call runs, in the words of a message: "where `rank == 0` holds (line 12)"."""
        line = getattr(self.node, "lineno", 0)
        if self.kind == "guard":
            return f"where `{self.text}` holds (line {line})"
        if self.kind == "else":
            return f"where `{self.text}` is false (the `else` of line {line})"
        if self.kind == "exit":
            return f"on the ranks that get past `{self.text}` (line {line})"
        return f"on one rank (`@{self.text}` on `{self.node.name}`)"  # type: ignore[attr-defined]


def _constant(node: ast.AST) -> object:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        return -node.operand.value if isinstance(node.operand.value, (int, float)) else node.operand
    return node.value if isinstance(node, ast.Constant) else node


def _agreed(test: ast.AST) -> bool:
    """A value every rank computes alike because a collective produced it (`reduce_boolean_decision(...)`,
    `broadcast(...)`): a test on it takes the same branch everywhere."""
    for node in ast.walk(test):
        if isinstance(node, ast.Call):
            func = node.func
            name = (func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else "").lower()
            if any(word in name for word in _AGREED_WORDS):
                return True
    return False


def splits_ranks(test: ast.AST) -> bool:
    """Whether a test can be true on some ranks and false on others: `rank == 0`, `is_main_process()`,
    `local_rank in [-1, 0]`; not `local_rank != -1`, `rank is not None`, `rank >= 0` nor `"RANK" in os.environ`,
    which ask whether the run is distributed, nor `is_main or is_deepspeed`, which holds on every rank under
    DeepSpeed, nor a test of a value a collective agreed on."""
    if _agreed(test):
        return False
    if isinstance(test, ast.BoolOp):
        splits = [splits_ranks(value) for value in test.values]
        return all(splits) if isinstance(test.op, ast.Or) else any(splits)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return splits_ranks(test.operand)
    if isinstance(test, ast.Compare):
        if not names_rank(test):
            return False
        sides = [test.left, *test.comparators]
        if any(isinstance(op, (ast.In, ast.NotIn)) for op in test.ops) and all(
            isinstance(s, ast.Constant) or not names_rank(s) for s in sides
        ):
            return False  # `"LOCAL_RANK" in os.environ`
        for op, right in zip(test.ops, test.comparators):
            value = _constant(right)
            if value in _NOT_A_RANK and not isinstance(value, bool):
                continue
            if (isinstance(op, ast.GtE) and value == 0) or (isinstance(op, ast.Lt) and value == 0):
                continue  # `rank >= 0`, `rank < 0`
            return True
        return False
    return names_rank(test)


def block_of(parent: ast.AST, child: ast.AST) -> str:
    for name in ("body", "orelse", "finalbody", "handlers"):
        if position_in_block(parent, name, child) is not None:
            return name
    if isinstance(parent, ast.IfExp):
        return "body" if child is parent.body else "orelse" if child is parent.orelse else "test"
    return ""


def _exit_word(statement: ast.stmt) -> str | None:
    """`return`/`continue`/`break` for `if <rank test>: return`, `raise` for a failed check, else None."""
    if isinstance(statement, ast.If) and statement.body and names_rank(statement.test):
        last = statement.body[-1]
        if isinstance(last, (*_TERMINATORS, ast.Raise)):
            return type(last).__name__.lower()
    return None


def _exits_in(ctx: FileContext, parent: ast.AST, block_name: str) -> list[tuple[int, ast.stmt, str]]:
    """The early rank exits of a block with their places, found once per block: a long block is not read again for
    every collective in it."""
    key = ("rank-exits", id(parent), block_name)
    if key not in ctx.memo:
        block = getattr(parent, block_name)
        ctx.memo[key] = [(i, s, word) for i, s in enumerate(block) if (word := _exit_word(s)) is not None]
    return ctx.memo[key]  # type: ignore[return-value]


def rank_restrictions(ctx: FileContext, call: ast.AST, ancestors: list[ast.AST]) -> tuple[Restriction, ...]:
    """The rank guards, early rank exits and rank-only decorators of the call's own code that split the ranks; not a
    test every rank answers alike, a list of ranks, or a `raise` on a failed check."""
    found: list[Restriction] = []
    chain = [*ancestors, call]
    for parent, child in pairwise(chain):
        if isinstance(parent, (ast.If, ast.IfExp, ast.While)) and names_rank(parent.test):
            block = block_of(parent, child)
            if block in ("body", "orelse") and splits_ranks(parent.test):
                found.append(Restriction("guard" if block == "body" else "else", parent, snippet(parent.test)))
        if isinstance(parent, FUNCTIONS):
            rank_decorators = one_process_decorators(parent)
            if rank_decorators:
                found.append(Restriction("decorator", parent, rank_decorators[0]))
        block_name = block_of(parent, child)
        if block_name not in ("body", "orelse", "finalbody"):
            continue
        place = position_in_block(parent, block_name, child)
        if place is None:  # a branch of a conditional expression: no statements before it
            continue
        for index, statement, word in _exits_in(ctx, parent, block_name):
            if index >= place:
                break
            if word != "raise" and splits_ranks(statement.test) and not ruled_out_by_place(statement.test, chain):  # type: ignore[attr-defined]
                found.append(Restriction("exit", statement, f"if {snippet(statement.test)}: {word}"))  # type: ignore[attr-defined]
    return tuple(found)
