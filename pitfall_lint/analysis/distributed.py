"""Does this file set up distributed training? (init_process_group, DDP/FSDP built, torchrun's environment)"""

from __future__ import annotations

import ast

from pitfall_lint.context import FileContext

# Distinctive enough to match by their last name, so function-local imports and aliases need no
# resolution. Only calls count: a test that mocks or isinstance-checks DDP sets nothing up.
_SETUP_CALLS = frozenset({"init_process_group", "DistributedDataParallel", "FullyShardedDataParallel"})
_LAUNCHER_VARIABLES = frozenset({"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"})
# Frameworks that start the process group themselves: the script is distributed all the same.
_FRAMEWORK_SETUPS = {
    "deepspeed.initialize": "deepspeed.initialize",
    "deepspeed.init_distributed": "deepspeed.init_distributed",
    "accelerate.Accelerator": "accelerate's Accelerator",
    "accelerate.accelerator.Accelerator": "accelerate's Accelerator",
    "colossalai.launch": "colossalai.launch",
    "colossalai.launch_from_torch": "colossalai.launch_from_torch",
    "colossalai.launch_from_slurm": "colossalai.launch_from_slurm",
    "colossalai.launch_from_openmpi": "colossalai.launch_from_openmpi",
    "horovod.torch.init": "horovod's init",
}
# Lightning's entry points distribute when given a multi-process strategy or several devices or nodes.
_LIGHTNING_ENTRIES = frozenset({"Trainer", "Fabric"})


def _lightning_setup(entry: str) -> str:
    return f"Lightning's {entry} with several processes"


# The barrier of a framework that starts the processes itself, by its set-up: what its users call (Horovod's
# processes have no torch.distributed group for `dist.barrier()` to use).
_FRAMEWORK_BARRIERS = {
    _lightning_setup("Trainer"): "trainer.strategy.barrier()",
    _lightning_setup("Fabric"): "fabric.barrier()",
    "accelerate's Accelerator": "accelerator.wait_for_everyone()",
    "horovod's init": "hvd.barrier()",
}
_LIGHTNING_ROOTS = ("lightning", "pytorch_lightning", "lightning_fabric")
_MULTI_PROCESS_STRATEGY = ("ddp", "fsdp", "deepspeed", "xla", "horovod")
# The trigger words of a rule that needs a distributed file: one of them is in every file that
# sets_up_distributed() recognises ("RANK" and "WORLD_SIZE" also match their LOCAL_ forms; "Trainer" and "Fabric"
# Lightning's entry points, given several devices; "ddp", "fsdp" and "deepspeed" its strategies; "Accelerator",
# "colossalai" and "horovod" those frameworks).
DISTRIBUTED_TRIGGERS: tuple[str, ...] = (
    *sorted(_SETUP_CALLS), "RANK", "WORLD_SIZE", *sorted(_LIGHTNING_ENTRIES), "deepspeed", "Accelerator", "colossalai",
    "horovod", "ddp", "fsdp",
)
_TRIGGER_BYTES = tuple(word.encode() for word in DISTRIBUTED_TRIGGERS)


def may_set_up_distributed(data: bytes) -> bool:
    """Whether a source can hold a set-up that setup_kind() recognises: it spells one of the trigger words."""
    return any(word in data for word in _TRIGGER_BYTES)


# The same without Lightning's entry points, for the rules that stay quiet where Lightning loads the data (samplers
# and seeds: uses_loader_framework): a file distributed by a Trainer or Fabric alone imports Lightning.
NON_LIGHTNING_DISTRIBUTED_TRIGGERS = tuple(word for word in DISTRIBUTED_TRIGGERS if word not in _LIGHTNING_ENTRIES)
# The last names of every call setup_kind() recognises: anything else is not looked at further.
_SETUP_LAST_NAMES = frozenset(
    {*_SETUP_CALLS, *(name.rpartition(".")[2] for name in _FRAMEWORK_SETUPS), *_LIGHTNING_ENTRIES, "get", "getenv"}
)
# Tensor-parallel set-ups: every rank of a group must read the same batches.
_TENSOR_PARALLEL_CALLS = frozenset({"initialize_model_parallel", "parallelize_module"})
# Reads only: `os.environ["RANK"] = "0"` or `setdefault` sets a one-process run up, it does not join a launch.
_ENVIRONMENT_READERS = ("environ.get", "getenv")
# Each starts nprocs processes on this machine that call `fn(index, *args)`.
SPAWNERS = frozenset(
    {"torch.multiprocessing.spawn", "torch.multiprocessing.start_processes", "torch_xla.distributed.xla_multiprocessing.spawn"}
)
_LAUNCHER_ENVIRONMENT = "torchrun's environment"


def _last_name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else ""


def _dotted(node: ast.AST) -> str:
    return ast.unparse(node) if isinstance(node, (ast.Name, ast.Attribute)) else ""


def _is_launcher_variable(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value in _LAUNCHER_VARIABLES


def _lightning_distributes(qualified: str, call: ast.Call) -> bool:
    if not (qualified.partition(".")[0] in _LIGHTNING_ROOTS and qualified.rpartition(".")[2] in _LIGHTNING_ENTRIES):
        return False
    for keyword in call.keywords:
        value = keyword.value
        if keyword.arg == "strategy" and isinstance(value, ast.Constant) and isinstance(value.value, str):
            if value.value.startswith(_MULTI_PROCESS_STRATEGY):
                return True
        if keyword.arg in ("devices", "num_nodes", "gpus") and isinstance(value, ast.Constant) and isinstance(value.value, int):
            if value.value > 1 or value.value == -1:
                return True
    return False


def launcher_variable_read(node: ast.AST) -> str | None:
    """The launcher's variable (RANK, LOCAL_RANK, ...) that `node` reads from the environment:
    `os.environ["LOCAL_RANK"]`, `os.environ.get("RANK")`, `os.getenv("RANK")`, `"LOCAL_RANK" in os.environ`.
    Writing one (`os.environ["RANK"] = "0"`, `setdefault`) is no read."""
    if isinstance(node, ast.Call):
        # The argument first: spelling the callee out costs more than the rest of the look at every call.
        reads = bool(node.args) and _is_launcher_variable(node.args[0]) and _dotted(node.func).endswith(_ENVIRONMENT_READERS)
        return node.args[0].value if reads else None  # type: ignore[attr-defined]
    if isinstance(node, ast.Subscript):
        reads = isinstance(node.ctx, ast.Load) and _is_launcher_variable(node.slice) and _last_name(node.value) == "environ"
        return node.slice.value if reads else None  # type: ignore[attr-defined]
    if isinstance(node, ast.Compare):
        reads = _is_launcher_variable(node.left) and any(_last_name(c) == "environ" for c in node.comparators)
        return node.left.value if reads else None  # type: ignore[attr-defined]
    return None

def setup_kind(ctx: FileContext, node: ast.AST) -> str | None:
    """What about `node` sets up distributed training, None when nothing does."""
    if isinstance(node, ast.Call):
        aliased = isinstance(node.func, ast.Name) and ctx.resolver.is_imported(node.func.id, [])
        if _last_name(node.func) not in _SETUP_LAST_NAMES and not aliased:
            return None  # the cheap look first: every set-up call ends in one of these names, or is an alias
        full = ctx.qualified_name(node.func, []) or ""
        if full in _FRAMEWORK_SETUPS:
            return _FRAMEWORK_SETUPS[full]
        if _lightning_distributes(full, node):
            return _lightning_setup(full.rpartition(".")[2])
        # The spelling (`DistributedDataParallel(...)`) or a module-level alias (`DDP(...)`).
        qualified = full.rpartition(".")[2]
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
        from pitfall_lint.traversal import nodes_of

        # setup_kind reads every name at module level (no ancestors), and a file without a set-up word has no set-up.
        candidates = nodes_of(ctx.tree, SETUP_NODES) if may_set_up_distributed(ctx.text.data) else []
        ctx.memo[key] = [(kind, getattr(node, "lineno", 1)) for node in candidates if (kind := setup_kind(ctx, node)) is not None]
    return ctx.memo[key]  # type: ignore[return-value]


def sets_up_distributed(ctx: FileContext) -> bool:
    return bool(distributed_setups(ctx))


def starts_process_group(ctx: FileContext) -> bool:
    """A set-up that makes this file's processes train together (a process group, DDP, FSDP, a framework's launch),
    not only a read of torchrun's variables, which one-process scripts copy into their arguments too."""
    return any(kind != _LAUNCHER_ENVIRONMENT for kind, _ in distributed_setups(ctx))


def barrier_call(ctx: FileContext) -> str:
    """The barrier to advise in this file: that of the framework that set the run up, else torch.distributed's."""
    return next((_FRAMEWORK_BARRIERS[kind] for kind, _ in distributed_setups(ctx) if kind in _FRAMEWORK_BARRIERS), "dist.barrier()")


def uses_tensor_parallelism(ctx: FileContext) -> bool:
    """Megatron's `initialize_model_parallel(tensor_model_parallel_size=N)`, torch's `parallelize_module`."""
    key = ("tensor-parallel",)
    if key not in ctx.memo:
        ctx.memo[key] = any(
            isinstance(node, ast.Call) and _last_name(node.func) in _TENSOR_PARALLEL_CALLS for node in ast.walk(ctx.tree)
        )
    return ctx.memo[key]  # type: ignore[return-value]
