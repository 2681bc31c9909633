"""Calls that every rank must make together: torch.distributed's collectives, and the framework calls that run one
inside (a checkpoint save that ends in a barrier, a metric logged with `sync_dist=True`, a full FSDP state_dict).

The one table of them; each entry names where its collective is documented. PFL207 reads it statically, and the
verify harness records the torch ones at run time."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass

from pitfall_lint.analysis.scopes import enclosing_function, statements_in
from pitfall_lint.analysis.wrappers import holds_wrapper
from pitfall_lint.context import FileContext

# torch.distributed functions that every rank of the group has to enter, and in the same order.
# https://docs.pytorch.org/docs/stable/distributed.html#collective-functions ; new_group and its relatives:
# "requires that all processes in the main group ... enter this function, even if they are not going to be members
# of the group" (their docstrings in torch/distributed/distributed_c10d.py).
TORCH_COLLECTIVES = frozenset(
    {
        "all_reduce", "all_gather", "all_gather_object", "all_gather_into_tensor", "reduce_scatter",
        "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "broadcast", "broadcast_object_list", "reduce",
        "gather", "gather_object", "scatter", "scatter_object_list", "barrier", "monitored_barrier", "new_group",
        "new_subgroups", "new_subgroups_by_enumeration",
    }
)
_TORCH_PREFIXES = ("torch.distributed.", "torch.distributed.nn.functional.", "torch.distributed.nn.")

# The state_dict readers, which gather only the shards of a sharded model (the setters may broadcast in any case).
_SHARD_GATHERERS = frozenset(
    {
        "torch.distributed.checkpoint.state_dict.get_model_state_dict",
        "torch.distributed.checkpoint.state_dict.get_optimizer_state_dict",
        "torch.distributed.checkpoint.state_dict.get_state_dict",
    }
)
# Functions, by qualified name, that run collectives inside.
_FUNCTIONS: dict[str, str] = {
    # Distributed checkpoints: "save_state_dict uses collectives to coordinate writes across ranks" (docstring of
    # torch/distributed/checkpoint/state_dict_saver.py); the state_dict helpers gather FSDP/DTensor shards:
    # pytorch/pytorch#157781 (set_state_dict with full_state_dict=True stuck), #134095 (DCP hangs).
    **dict.fromkeys(
        (
            "torch.distributed.checkpoint.save", "torch.distributed.checkpoint.load",
            "torch.distributed.checkpoint.save_state_dict", "torch.distributed.checkpoint.load_state_dict",
            "torch.distributed.checkpoint.state_dict_saver.save", "torch.distributed.checkpoint.state_dict_loader.load",
        ),
        "a distributed checkpoint (it coordinates the writes with collectives)",
    ),
    **dict.fromkeys(
        (
            *_SHARD_GATHERERS,
            "torch.distributed.checkpoint.state_dict.set_model_state_dict",
            "torch.distributed.checkpoint.state_dict.set_optimizer_state_dict",
            "torch.distributed.checkpoint.state_dict.set_state_dict",
        ),
        "a sharded model's state_dict (it gathers the shards from every rank)",
    ),
    # FSDP: "This needs to be called on all ranks since it uses collective communications" (docstrings of
    # full_optim_state_dict, optim_state_dict in torch/distributed/fsdp/fully_sharded_data_parallel.py).
    **dict.fromkeys(
        (
            "torch.distributed.fsdp.FullyShardedDataParallel.full_optim_state_dict",
            "torch.distributed.fsdp.FullyShardedDataParallel.optim_state_dict",
            "torch.distributed.fsdp.FullyShardedDataParallel.sharded_optim_state_dict",
        ),
        "FSDP's optimizer state_dict (it gathers the shards from every rank)",
    ),
    # Accelerate's operations: every process gathers/reduces/broadcasts; huggingface/accelerate#2733 (gather_object
    # under `if is_main_process:` hangs), huggingface/trl#1103 (the same in PPO logging).
    **dict.fromkeys(
        (
            "accelerate.utils.gather", "accelerate.utils.gather_object", "accelerate.utils.broadcast",
            "accelerate.utils.broadcast_object_list", "accelerate.utils.reduce", "accelerate.utils.pad_across_processes",
            "accelerate.utils.operations.gather", "accelerate.utils.operations.gather_object",
            "accelerate.utils.operations.broadcast", "accelerate.utils.operations.reduce",
        ),
        "Accelerate's collective operation",
    ),
}


@dataclass(frozen=True)
class _HiddenCollective:
    """`<receiver>.<method>(...)` in a file that imports one of `frameworks`, the receiver's name holding one of
    `receivers` (`trainer`, `self.trainer`); with `keyword`, only when that keyword is a literal True."""

    method: str
    receivers: tuple[str, ...]
    frameworks: tuple[str, ...]
    what: str
    keyword: str = ""
    sharded_only: bool = False  # a collective only under DeepSpeed ZeRO / FSDP: counted in files that use them
    # The first release of the framework whose call runs the collective under every strategy; before it only
    # under DeepSpeed and FSDP. Counted where the file uses them, or the project pins that release or a later one.
    since: tuple[int, ...] = ()


_LIGHTNING = ("lightning", "pytorch_lightning", "lightning_fabric")
_HIDDEN: tuple[_HiddenCollective, ...] = (
    # "This method needs to be called on all processes in case the selected strategy is handling distributed
    # checkpointing" (Trainer.save_checkpoint); it broadcasts the path and ends in strategy.barrier():
    # alan-turing-institute/autocast#386, ray-project/ray#56997, Lightning-AI/pytorch-lightning#19045. The barrier
    # came in 2.1.0 (Lightning-AI/pytorch-lightning#17408); before, only DeepSpeed's and FSDP's strategies gather or
    # save shards there.
    _HiddenCollective(
        "save_checkpoint", ("trainer",), _LIGHTNING, "Lightning's `save_checkpoint` (it broadcasts the path and waits at a barrier)",
        since=(2, 1),
    ),
    # `self.log(..., sync_dist=True)` reduces the value across ranks: "rank_zero_only ... This will prevent
    # synchronization which would produce a deadlock as not all processes would perform this log call"
    # (docs/source-pytorch/extensions/logging.rst, Lightning-AI/pytorch-lightning#19056); #19106, #19604.
    _HiddenCollective("log", ("self", "pl_module"), _LIGHTNING, "`log(..., sync_dist=True)` (it all-reduces the value)", "sync_dist"),
    _HiddenCollective("log_dict", ("self", "pl_module"), _LIGHTNING, "`log_dict(..., sync_dist=True)` (it all-reduces the values)", "sync_dist"),
    # LightningModule.all_gather and the strategy's own collectives.
    _HiddenCollective("all_gather", ("self", "pl_module", "strategy", "fabric"), _LIGHTNING, "Lightning's `all_gather`"),
    _HiddenCollective("barrier", ("strategy", "fabric"), _LIGHTNING, "Lightning's `barrier`"),
    _HiddenCollective("broadcast", ("strategy", "fabric"), _LIGHTNING, "Lightning's `broadcast`"),
    _HiddenCollective("reduce", ("strategy",), _LIGHTNING, "the strategy's `reduce`"),
    # Fabric: "This method needs to be called on all processes. Failing to do so will cause your program to stall
    # forever" (barrier, broadcast, all_gather, all_reduce); save/load: "This method must be called on all
    # processes!" (docstrings of src/lightning/fabric/fabric.py; https://lightning.ai/docs/fabric/stable/api/fabric_methods.html).
    _HiddenCollective("all_reduce", ("fabric",), _LIGHTNING, "Fabric's `all_reduce`"),
    _HiddenCollective("save", ("fabric",), _LIGHTNING, "Fabric's `save` (every process must call it)"),
    _HiddenCollective("load", ("fabric",), _LIGHTNING, "Fabric's `load` (every process must call it)"),
    # Accelerate: gather/reduce run on every process (Accelerator.gather: "This gather happens in all processes");
    # huggingface/accelerate#2785 (gather_for_metrics under is_main_process hangs), #2690 / bytedance/UNO#71
    # (wait_for_everyone under a rank guard), #1171 (save_state on the main process only hangs with DeepSpeed),
    # #3250 (get_state_dict with FSDP gathers on every process).
    *(
        _HiddenCollective(method, ("accelerator",), ("accelerate",), f"Accelerate's `{method}`")
        for method in ("gather", "gather_for_metrics", "reduce", "pad_across_processes", "wait_for_everyone")
    ),
    *(
        _HiddenCollective(method, ("accelerator",), ("accelerate",), f"Accelerate's `{method}` ({what} under DeepSpeed and FSDP)", sharded_only=True)
        for method, what in (
            ("save_state", "every process saves its shard"), ("load_state", "every process loads its shard"),
            ("get_state_dict", "it gathers the shards"),
        )
    ),
    # transformers' Trainer.save_model gathers a sharded model's weights on every rank before rank 0 writes them:
    # huggingface/transformers#10596, kyuz0/amd-strix-halo-llm-finetuning#6, pytorch/pytorch#143536.
    _HiddenCollective(
        "save_model", ("trainer",), ("transformers", "trl"), "transformers' `Trainer.save_model` (it gathers the weights under FSDP and DeepSpeed ZeRO-3)",
        sharded_only=True,
    ),
    # DeepSpeed: "Important: all processes must call this method and not just the process with rank 0 ... This
    # method will hang waiting to synchronize with other processes if it's called just for the process with rank 0"
    # (DeepSpeedEngine.save_checkpoint; https://www.deepspeed.ai/getting-started/#model-checkpointing).
    _HiddenCollective("save_checkpoint", ("engine",), ("deepspeed",), "DeepSpeed's `save_checkpoint` (every process saves its own partition)"),
)
# Properties that run a collective when read: "You must call this on all processes. Failing to do so will cause your
# program to stall forever" (Trainer.log_dir; Lightning-AI/pytorch-lightning#18148, #18179).
_HIDDEN_PROPERTIES: tuple[_HiddenCollective, ...] = (
    _HiddenCollective("log_dir", ("trainer",), _LIGHTNING, "Lightning's `trainer.log_dir` (it broadcasts the directory from rank 0)"),
)
_FSDP = frozenset({"torch.distributed.fsdp.FullyShardedDataParallel"})
# A file that prepares for sharded training, where the sharded-only entries are collectives.
_SHARDING_WORDS = (b"deepspeed", b"DeepSpeed", b"DEEPSPEED", b"fsdp", b"FSDP", b"FullyShardedDataParallel")
_DDP = frozenset({"torch.nn.parallel.DistributedDataParallel"})
# The distribution that installs each framework's import root, whose pinned version the project model reads.
_DISTRIBUTIONS = {"lightning": "lightning", "pytorch_lightning": "pytorch-lightning", "lightning_fabric": "lightning-fabric"}


def _imported_roots(ctx: FileContext) -> frozenset[str]:
    key = ("imported-roots",)
    if key not in ctx.memo:
        roots = set()
        for node in statements_in(ctx.tree):  # imports are statements: no walk of the expressions
            if isinstance(node, ast.Import):
                roots.update(alias.name.partition(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                roots.add(node.module.partition(".")[0])
        ctx.memo[key] = frozenset(roots)
    return ctx.memo[key]  # type: ignore[return-value]


def _is_true(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _receiver_words(receiver: ast.expr) -> str:
    """`trainer` for `self.trainer`, `self` for `self`: the last name, lower-cased."""
    if isinstance(receiver, ast.Attribute):
        return receiver.attr.lower()
    return receiver.id.lower() if isinstance(receiver, ast.Name) else ""


def collective_call(ctx: FileContext, call: ast.Call, ancestors: Sequence[ast.AST]) -> tuple[str, str] | None:
    """(operation, description) when every rank must make this call together, else None: `("all_reduce",
    "`dist.all_reduce`")`, `("save_checkpoint", "Lightning's `save_checkpoint` (...)")`. The operation pairs a call
    with its counterpart on the other ranks (`if rank == 0: gather(...) else: gather(...)`)."""
    func = call.func
    method = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if method is None:
        return None
    qualified = ctx.qualified_name(func, ancestors) or ""
    operation = qualified.rpartition(".")[2]
    if operation in TORCH_COLLECTIVES and qualified.startswith(_TORCH_PREFIXES):
        return operation, f"`{ast.unparse(func)}`"
    if qualified in _FUNCTIONS:
        if qualified in _SHARD_GATHERERS and _sharded_afterwards(ctx, call, ancestors):
            return None
        return operation, f"`{ast.unparse(func)}`, {_FUNCTIONS[qualified]}"
    if not isinstance(func, ast.Attribute):
        return _wrapper_forward(ctx, call, ancestors)
    receiver = func.value
    if method == "state_dict" and isinstance(receiver, ast.Name) and holds_wrapper(ctx, receiver.id, ancestors, call.lineno, _FSDP):
        return method, f"`{ast.unparse(func)}()` of an FSDP module (a full state_dict gathers the shards from every rank)"
    roots = _imported_roots(ctx)
    words = _receiver_words(receiver)
    for entry in _HIDDEN:
        if (
            entry.method == method
            and any(word in words for word in entry.receivers)
            and roots.intersection(entry.frameworks)
            and (not entry.keyword or any(k.arg == entry.keyword and _is_true(k.value) for k in call.keywords))
            and (not entry.sharded_only or _prepares_sharding(ctx))
            and (not entry.since or _prepares_sharding(ctx) or _pinned_since(ctx, roots.intersection(entry.frameworks), entry.since))
        ):
            return method, f"`{ast.unparse(func)}`, {entry.what}"
    return None


def _prepares_sharding(ctx: FileContext) -> bool:
    return any(word in ctx.text.data for word in _SHARDING_WORDS)


def _pinned_since(ctx: FileContext, roots: set[str] | frozenset[str], since: tuple[int, ...]) -> bool:
    """Whether the project's dependency files pin, for a framework the file imports, `since` or a later release as
    the lowest they admit; a framework not pinned is of unknown version, and its newer behaviour is not assumed."""
    for root in sorted(roots):
        floor = ctx.project.framework_floor(_DISTRIBUTIONS[root]) if root in _DISTRIBUTIONS else None
        if floor is not None and tuple(floor) >= since:
            return True
    return False


def _sharded_afterwards(ctx: FileContext, call: ast.Call, ancestors: Sequence[ast.AST]) -> bool:
    """The model is sharded later in the same code (`fully_shard(model)`, `FSDP(model)`, composer's
    `prepare_fully_shard(model, ...)` after rank 0 read the state to broadcast): at this call it is whole, and
    its state_dict gathers nothing (torch gathers only DTensor and ShardedTensor values: `_gather_state_dict` in
    torch/distributed/_state_dict_utils.py)."""
    model = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "model"), None)
    if not isinstance(model, ast.Name):
        return False
    for node in ast.walk(enclosing_function(ancestors) or ctx.tree):
        if isinstance(node, ast.Call) and node.lineno > call.lineno and node.args and isinstance(node.args[0], ast.Name):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            shards = "fully_shard" in name.lower() or ctx.qualified_name(func, ancestors) in _FSDP
            if shards and node.args[0].id == model.id:
                return True
    return False


def collective_property(ctx: FileContext, node: ast.Attribute) -> tuple[str, str] | None:
    """(operation, description) for reading a property that runs a collective (`trainer.log_dir`), else None."""
    if not isinstance(node.ctx, ast.Load):
        return None
    words = _receiver_words(node.value)
    for entry in _HIDDEN_PROPERTIES:
        if entry.method == node.attr and any(w in words for w in entry.receivers) and _imported_roots(ctx).intersection(entry.frameworks):
            return entry.method, f"`{ast.unparse(node)}`, {entry.what}"
    return None


def _wrapper_forward(ctx: FileContext, call: ast.Call, ancestors: Sequence[ast.AST]) -> tuple[str, str] | None:
    """`ddp_model(x)`: DDP's forward broadcasts the buffers from rank 0, and the backward of its output all-reduces."""
    if isinstance(call.func, ast.Name) and holds_wrapper(ctx, call.func.id, ancestors, call.lineno, _DDP):
        return "forward", f"`{call.func.id}(...)`, the forward of a DistributedDataParallel module (it broadcasts the buffers from rank 0, and its backward all-reduces the gradients)"
    return None


# The words a file must hold to make any of these calls: PFL207's trigger words.
COLLECTIVE_WORDS: tuple[str, ...] = tuple(
    sorted(
        {
            *TORCH_COLLECTIVES,
            *(name.rpartition(".")[2] for name in _FUNCTIONS),
            *(entry.keyword or entry.method for entry in _HIDDEN if entry.method not in ("save", "load")),
            *(entry.method for entry in _HIDDEN_PROPERTIES),
            "fabric",  # fabric.save / fabric.load
            "state_dict",
            "DistributedDataParallel",
        }
    )
)
# Names a call must end in to be one of them (a cheap look before any name is resolved); a bare name may be a
# DDP module called.
CANDIDATE_METHODS = frozenset({*TORCH_COLLECTIVES, *(n.rpartition(".")[2] for n in _FUNCTIONS), *(e.method for e in _HIDDEN), "state_dict"})
CANDIDATE_PROPERTIES = frozenset(entry.method for entry in _HIDDEN_PROPERTIES)
_PROPERTY_BYTES = tuple(name.encode() for name in sorted(CANDIDATE_PROPERTIES))


def may_read_collective_property(data: bytes) -> bool:
    """Whether a source can read a property that runs a collective: it spells one. Source that is not ASCII is not
    judged: NFKC, which Python applies to identifiers, can make these names of other characters."""
    return not data.isascii() or any(name in data for name in _PROPERTY_BYTES)
