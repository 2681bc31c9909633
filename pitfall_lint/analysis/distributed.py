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
# Each starts nprocs processes on this machine that call `fn(index, *args)`.
SPAWNERS = frozenset(
    {"torch.multiprocessing.spawn", "torch.multiprocessing.start_processes", "torch_xla.distributed.xla_multiprocessing.spawn"}
)
_ENVIRONMENT_READERS = ("environ.get", "getenv", "environ.setdefault")
_LAUNCHER_ENVIRONMENT = "torchrun's environment"


def _last_name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else ""


def _dotted(node: ast.AST) -> str:
    return ast.unparse(node) if isinstance(node, (ast.Name, ast.Attribute)) else ""


def _is_launcher_variable(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value in _LAUNCHER_VARIABLES


def launcher_variable_read(node: ast.AST) -> str | None:
    """The launcher's variable (RANK, LOCAL_RANK, ...) that `node` reads from the environment:
    `os.environ["LOCAL_RANK"]`, `os.environ.get("RANK")`, `os.getenv("RANK")`, `"LOCAL_RANK" in os.environ`."""
    if isinstance(node, ast.Call):
        reads = _dotted(node.func).endswith(_ENVIRONMENT_READERS) and bool(node.args) and _is_launcher_variable(node.args[0])
        return node.args[0].value if reads else None  # type: ignore[attr-defined]
    if isinstance(node, ast.Subscript):
        reads = _dotted(node.value).endswith("environ") and _is_launcher_variable(node.slice)
        return node.slice.value if reads else None  # type: ignore[attr-defined]
    if isinstance(node, ast.Compare):
        reads = _is_launcher_variable(node.left) and any(_dotted(c).endswith("environ") for c in node.comparators)
        return node.left.value if reads else None  # type: ignore[attr-defined]
    return None


def setup_kind(ctx: FileContext, node: ast.AST) -> str | None:
    """What about `node` sets up distributed training, None when nothing does."""
    if isinstance(node, ast.Call):
        # The spelling (`DistributedDataParallel(...)`) or a module-level alias (`DDP(...)`).
        qualified = (ctx.qualified_name(node.func, []) or "").rpartition(".")[2]
        for name in (_last_name(node.func), qualified):
            if name in _SETUP_CALLS:
                return name
    return _LAUNCHER_ENVIRONMENT if launcher_variable_read(node) is not None else None


# The node types setup_kind() recognises.
SETUP_NODES: tuple[type[ast.AST], ...] = (ast.Call, ast.Subscript, ast.Compare)


def distributed_setups(ctx: FileContext) -> list[tuple[str, int]]:
    """(what, line) for every place that sets up distributed training, in source order."""
    key = ("distributed-setups",)
    if key not in ctx.memo:
        from pitfall_lint.traversal import traverse

        found: list[tuple[str, int]] = []
        walk = ctx.for_another_walk()

        def note(node: ast.AST) -> None:
            kind = setup_kind(walk, node)
            if kind is not None:
                found.append((kind, getattr(node, "lineno", 1)))

        traverse(walk, {node_type: [note] for node_type in SETUP_NODES})
        ctx.memo[key] = found
    return ctx.memo[key]  # type: ignore[return-value]


def sets_up_distributed(ctx: FileContext) -> bool:
    return bool(distributed_setups(ctx))
