"""Does this file set up distributed training? (init_process_group, DDP/FSDP built, torchrun's environment)"""

from __future__ import annotations

import ast

from pitfall_lint.context import FileContext

# Distinctive enough to match by their last name, so function-local imports and aliases need no
# resolution. Only calls count: a test that mocks or isinstance-checks DDP sets nothing up.
_SETUP_CALLS = frozenset({"init_process_group", "DistributedDataParallel", "FullyShardedDataParallel"})
_LAUNCHER_VARIABLES = frozenset({"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"})
# The trigger words of a rule that needs a distributed file: one of them is in every file that
# sets_up_distributed() recognises ("RANK" and "WORLD_SIZE" also match their LOCAL_ forms).
DISTRIBUTED_TRIGGERS: tuple[str, ...] = (*sorted(_SETUP_CALLS), "RANK", "WORLD_SIZE")
_ENVIRONMENT_READERS = ("environ.get", "getenv", "environ.setdefault")


def _last_name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else ""


def _dotted(node: ast.AST) -> str:
    return ast.unparse(node) if isinstance(node, (ast.Name, ast.Attribute)) else ""


def _is_launcher_variable(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value in _LAUNCHER_VARIABLES


def _is_setup_node(ctx: FileContext, node: ast.AST) -> bool:
    if isinstance(node, ast.Call):
        # The spelling (`DistributedDataParallel(...)`) or a module-level alias (`DDP(...)`).
        qualified = ctx.qualified_name(node.func, []) or ""
        if _last_name(node.func) in _SETUP_CALLS or qualified.rpartition(".")[2] in _SETUP_CALLS:
            return True
        # os.environ.get("LOCAL_RANK"), os.getenv("RANK")
        return _dotted(node.func).endswith(_ENVIRONMENT_READERS) and bool(node.args) and _is_launcher_variable(node.args[0])
    if isinstance(node, ast.Subscript):  # os.environ["LOCAL_RANK"]
        return _dotted(node.value).endswith("environ") and _is_launcher_variable(node.slice)
    if isinstance(node, ast.Compare):  # "LOCAL_RANK" in os.environ
        return _is_launcher_variable(node.left) and any(_dotted(c).endswith("environ") for c in node.comparators)
    return False


def sets_up_distributed(ctx: FileContext) -> bool:
    key = ("sets-up-distributed",)
    if key not in ctx.memo:
        ctx.memo[key] = any(_is_setup_node(ctx, node) for node in ast.walk(ctx.tree))
    return ctx.memo[key]  # type: ignore[return-value]
