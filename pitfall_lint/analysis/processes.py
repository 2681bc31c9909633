"""Calls that launch worker processes (torch's spawn, pools) or build `Process` objects to start."""

from __future__ import annotations

import ast
from collections.abc import Sequence

from pitfall_lint.context import FileContext

LAUNCHERS = frozenset(
    {
        "torch.multiprocessing.spawn",
        "torch.multiprocessing.start_processes",
        "multiprocessing.Pool",
        "multiprocessing.pool.Pool",
        "torch.multiprocessing.Pool",
        "torch_xla.distributed.xla_multiprocessing.spawn",
    }
)
PROCESS_CLASSES = frozenset({"multiprocessing.Process", "torch.multiprocessing.Process"})
_CONTEXT_FACTORIES = frozenset({"multiprocessing.get_context", "torch.multiprocessing.get_context"})
_STARTERS = LAUNCHERS | PROCESS_CLASSES


def process_call_name(ctx: FileContext, call: ast.Call, ancestors: Sequence[ast.AST] | None = None) -> str | None:
    """The qualified name of the call, in the scope being visited (or of the given ancestors); a context's
    `.Process`/`.Pool` reads as `multiprocessing.Process`/`multiprocessing.Pool`
    (`multiprocessing.get_context("spawn").Pool(2)`)."""
    func = call.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call):
        if ctx.qualified_name(func.value.func, ancestors) in _CONTEXT_FACTORIES:
            return f"multiprocessing.{func.attr}"
    return ctx.qualified_name(func, ancestors)


def launches_or_builds_processes(ctx: FileContext, call: ast.Call, ancestors: Sequence[ast.AST] | None = None) -> bool:
    return process_call_name(ctx, call, ancestors) in _STARTERS


def is_pool(qualified: str | None) -> bool:
    return qualified is not None and qualified.rpartition(".")[2] == "Pool" and qualified in LAUNCHERS
