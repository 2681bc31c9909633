"""How a finding cites the place elsewhere in the project that it rests on (a wrap site, a caller)."""

from __future__ import annotations

import ast
import os
from typing import TYPE_CHECKING

from pitfall_lint.context import FileContext
from pitfall_lint.diagnostic import Related

if TYPE_CHECKING:
    from pitfall_lint.project.model import Evidence


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
