"""How to run a file: as a script, through torch.distributed.run, or through its example function."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from pitfall_lint.analysis.distributed import sets_up_distributed
from pitfall_lint.analysis.scopes import is_main_guard
from pitfall_lint.context import FileContext
from pitfall_lint.project.model import ProjectModel
from pitfall_lint.source import SourceText

DEFAULT_EXAMPLE = "pitfall_lint_example"
_LAUNCHERS = frozenset({"torch.multiprocessing.spawn", "torch.multiprocessing.start_processes"})
_DEFINITIONS = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign)


@dataclass(frozen=True)
class Plan:
    kind: str | None  # "script", "distributed", "example", or None when nothing can run the file
    reason: str
    example: str | None = None


def _runs_something_at_import(tree: ast.Module) -> bool:
    """A main guard, or statements beyond definitions: what `python FILE` would execute."""
    for statement in tree.body:
        if isinstance(statement, ast.If) and is_main_guard(statement.test):
            return True
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
            continue  # a docstring
        if not isinstance(statement, _DEFINITIONS):
            return True
    return False


def _launches_itself(ctx: FileContext) -> bool:
    return any(
        isinstance(node, ast.Call) and ctx.qualified_name(node.func, []) in _LAUNCHERS for node in ast.walk(ctx.tree)
    )


def plan_run(path: str, data: bytes, tree: ast.Module, example: str | None) -> Plan:
    ctx = FileContext(path, tree, SourceText(data), ProjectModel.single_file(path, data).view(path))
    functions = {s.name for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
    if example is not None:
        if example not in functions:
            return Plan(None, f"there is no module-level function {example}() in {path}")
        return Plan("example", f"{example}() builds the model and its inputs", example)
    if _runs_something_at_import(tree):
        if sets_up_distributed(ctx) and not _launches_itself(ctx):
            return Plan("distributed", "it sets up distributed training, so it runs as N ranks under torch.distributed.run")
        return Plan("script", "it has an entry point, so it runs as `python FILE` would")
    if DEFAULT_EXAMPLE in functions:
        return Plan("example", f"{DEFAULT_EXAMPLE}() builds the model and its inputs", DEFAULT_EXAMPLE)
    return Plan(
        None,
        f"no entry point ran this module: add `{DEFAULT_EXAMPLE}()` returning (model, args) or (model, args, kwargs)",
    )
