"""How a finding cites the place elsewhere in the project that it rests on (a wrap site, a caller)."""

from __future__ import annotations

import ast
import os
from typing import Literal

from pitfall_lint.context import FileContext
from pitfall_lint.diagnostic import Related

# The project model's answers are written in these terms; defined here, with the analyses that read them, so that
# data flows one way: the model (pitfall_lint/project/) builds on the per-file analyses, never the reverse.
# (path, line, what) of the place that proves a fact; empty when the fact rests on no place (a setting).
Evidence = list
WrapperKind = Literal["DataParallel", "DistributedDataParallel"]
# How evidence of a reach names the class that holds the module: "" when the module is the wrapped one (or a base
# class of it), "?" when the wrap's module could not be told from the source.
WRAPPED_ITSELF, WRAPPED_UNKNOWN = "", "?"


def cite(ctx: FileContext, evidence: Evidence | None, what: str) -> tuple[str, tuple[Related, ...]]:
    """` (what at train.py:42)` for the message when the place is in another file (the reader sees the rest),
    and the place as a related location in any case."""
    if not evidence:
        return "", ()
    path, line = evidence[:2]
    elsewhere = os.path.abspath(path) != os.path.abspath(ctx.path)
    return (f" ({what} at {path}:{line})" if elsewhere else ""), (Related(path, line, what),)


def snippet(node: ast.AST, limit: int = 60) -> str:
    """The source of a node for a message, cut to `limit` characters."""
    text = ast.unparse(node)
    return text if len(text) <= limit else text[: limit - 3] + "..."
