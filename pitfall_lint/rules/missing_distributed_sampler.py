"""PFL401: a training DataLoader without a DistributedSampler gives every rank the whole dataset."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

from pitfall_lint.analysis.distributed import (
    NON_LIGHTNING_DISTRIBUTED_TRIGGERS,
    sets_up_distributed,
    uses_tensor_parallelism,
)
from pitfall_lint.analysis.loader_frameworks import (
    loader_sharding_framework,
    torchtnt_distributes,
)
from pitfall_lint.analysis.ranks import depends_on_rank, is_restricted_to_one_rank
from pitfall_lint.analysis.samplers import (
    DATA_LOADERS,
    LOADER_SAMPLER_POSITIONS,
    call_argument,
    describe,
    has_unpacked_arguments,
    says_evaluation,
    says_training,
    uses_loader_framework,
)
from pitfall_lint.analysis.scopes import (
    FUNCTIONS,
    enclosing_function,
    local_value,
    module_assignments,
    module_function,
    preceded_by,
)
from pitfall_lint.context import FileContext
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.rules.base import Rule

_DATASET_POSITION = 0
_SHUFFLE_POSITION = 2
# A test that tells distributed and single-process runs apart: the loader under it is the single-process one.
_DISTRIBUTED_TEST = re.compile(
    r"distributed|world|ddp|fsdp|is_initialized|multi_?gpu|n_?gpus?\b|num_?gpus|num_replicas|parallel|rank",
    re.IGNORECASE,
)
_RANDOM_TENSORS = frozenset(
    {"torch.randn", "torch.rand", "torch.randint", "torch.randperm", "torch.normal", "torch.randn_like", "torch.rand_like"}
)
_RANDOM_FILLS = frozenset({"random_", "uniform_", "normal_", "bernoulli_"})
_BLANK_TENSORS = frozenset({"torch.empty", "torch.zeros", "torch.ones", "torch.Tensor", "torch.FloatTensor", "torch.LongTensor"})
# Datasets that shard themselves per rank (or per worker) and accept no sampler.
_STREAMING = re.compile(r"IterableDataset|IterDataPipe|WebDataset|webdataset|torchdata|StreamingDataset|wds\.")
_STREAMING_MODULES = ("webdataset", "torchdata", "streaming", "datasets.distributed")
_MAX_VALUE_DEPTH = 3
_JAX = frozenset({"jax", "flax"})


class MissingDistributedSampler(Rule):
    info = RuleInfo(
        code="PFL401",
        name="missing-distributed-sampler",
        summary="A training DataLoader without a DistributedSampler in a DDP script: every rank iterates the whole dataset.",
        severity="warning",
        verifiable=True,
    )
    # DataLoader, in a file that sets_up_distributed() could recognise (not through Lightning alone) or torchtnt's.
    triggers = (("DataLoader",), (*NON_LIGHTNING_DISTRIBUTED_TRIGGERS, "torchtnt"))
    subscriptions = (ast.Call,)

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._loaders: list[tuple[ast.Call, list[ast.AST]]] = []

    def visit(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Call)
        if self.ctx.qualified_name(node.func) in DATA_LOADERS:
            self._loaders.append((node, list(self.ctx.ancestors)))

    def finish(self) -> None:
        # The cheap looks first: a loader given a sampler is never told, and a file that imports Lightning or
        # Accelerate says so in its first lines; the walk for the file's set-ups comes after them.
        if all(self._has_sampler(call) for call, _ in self._loaders) or uses_loader_framework(self.ctx):
            return
        if not (sets_up_distributed(self.ctx) or torchtnt_distributes(self.ctx)) or loader_sharding_framework(self.ctx):
            return
        if uses_tensor_parallelism(self.ctx):  # the ranks of a tensor-parallel group must read the same batches
            return
        if self._uses_jax():
            return  # one process feeds every device through pmap; LOCAL_RANK there is a leftover argument
        for call, ancestors in self._loaders:
            if self._has_sampler(call) or not self._is_training(call, ancestors):
                continue
            dataset = call_argument(call, "dataset", _DATASET_POSITION)
            if dataset is None or self._shards_itself(dataset, ancestors):
                continue
            if self._single_process_branch(call, ancestors) or is_restricted_to_one_rank(self.ctx, call, ancestors):
                continue
            self.report(
                call,
                "`DataLoader` without a `DistributedSampler` in a distributed script: every rank iterates the whole "
                "dataset; pass `sampler=DistributedSampler(dataset)` (instead of `shuffle=True`) and call "
                "`sampler.set_epoch(epoch)` each epoch",
            )

    def _uses_jax(self) -> bool:
        return any(
            (isinstance(n, ast.Import) and any(a.name.partition(".")[0] in _JAX for a in n.names))
            or (isinstance(n, ast.ImportFrom) and (n.module or "").partition(".")[0] in _JAX)
            for n in ast.walk(self.ctx.tree)
        )

    @staticmethod
    def _has_sampler(call: ast.Call) -> bool:
        """A sampler or batch sampler passed (or possibly hidden in `*args`/`**kwargs`)."""
        if has_unpacked_arguments(call):
            return True
        for keyword, position in LOADER_SAMPLER_POSITIONS.items():
            value = call_argument(call, keyword, position)
            if value is not None and not (isinstance(value, ast.Constant) and value.value is None):
                return True
        return False

    def _is_training(self, call: ast.Call, ancestors: Sequence[ast.AST]) -> bool:
        """`shuffle=True`, or a loader, dataset or function named for training; never one named for evaluation."""
        names = describe(self._names(call, ancestors))
        if says_evaluation(names):
            return False
        shuffle = call_argument(call, "shuffle", _SHUFFLE_POSITION)
        if isinstance(shuffle, ast.Constant) and shuffle.value is True:
            return True
        return says_training(names)

    def _names(self, call: ast.Call, ancestors: Sequence[ast.AST]) -> list[str]:
        """What the loader is called: its target, its dataset (and that dataset's value), the function it is built in."""
        names: list[str] = []
        chain = [*ancestors, call]
        for parent, child in zip(reversed(chain[:-1]), reversed(chain[1:])):
            if isinstance(parent, (ast.IfExp, ast.BoolOp)):
                continue
            if isinstance(parent, ast.Assign) and parent.value is child:
                names.extend(ast.unparse(t) for t in parent.targets)
            elif isinstance(parent, (ast.AnnAssign, ast.NamedExpr)) and parent.value is child:
                names.append(ast.unparse(parent.target))
            elif isinstance(parent, ast.keyword) and parent.arg:
                names.append(parent.arg)
            elif isinstance(parent, ast.Dict):
                names.extend(ast.unparse(k) for k, v in zip(parent.keys, parent.values) if v is child and k is not None)
            break
        dataset = call_argument(call, "dataset", _DATASET_POSITION)
        if dataset is not None:
            names.append(ast.unparse(dataset))
            if isinstance(dataset, ast.Name):
                value = local_value(dataset.id, enclosing_function(ancestors), call.lineno)
                if value is not None:
                    names.append(ast.unparse(value))
        function = enclosing_function(ancestors)
        if function is not None:
            names.append(function.name)
        return names

    def _shards_itself(self, dataset: ast.expr, ancestors: Sequence[ast.AST], _depth: int = 0) -> bool:
        """A per-rank shard (`full[rank::world]`, `split_dataset_by_node(...)`), an iterable dataset, or synthetic
        random tensors (a benchmark's: each rank makes its own, there is nothing to split)."""
        if depends_on_rank(self.ctx, dataset, ancestors) or self._is_streaming(dataset, ancestors):
            return True
        if self._is_synthetic(dataset, ancestors):
            return True
        if _depth >= _MAX_VALUE_DEPTH:
            return False
        function = enclosing_function(ancestors)
        for name in (n for n in ast.walk(dataset) if isinstance(n, ast.Name)):
            value = local_value(name.id, function, getattr(name, "lineno", 0))
            if value is None and function is None:
                value = _module_value(self.ctx.tree, name.id)
            if value is not None and self._shards_itself(value, ancestors, _depth + 1):  # type: ignore[arg-type]
                return True
        if isinstance(dataset, ast.Name) and function is not None and _is_parameter(function, dataset.id):
            # Built elsewhere: unknown, unless this file has no way to build a streaming dataset.
            return self._file_has_streaming_datasets()
        return False

    def _is_synthetic(self, dataset: ast.AST, ancestors: Sequence[ast.AST], depth: int = 0) -> bool:
        """`TensorDataset(torch.randn(n, d), torch.randint(0, k, (n,)))`: every tensor made up on the spot, through
        local variables and a same-file helper that returns such a dataset."""
        value = self._traced(dataset, ancestors, depth)
        if not isinstance(value, ast.Call) or depth > _MAX_VALUE_DEPTH:
            return False
        if (self.ctx.qualified_name(value.func, ancestors) or "").endswith("TensorDataset"):
            return bool(value.args) and all(self._is_random_tensor(a, ancestors, depth + 1) for a in value.args)
        helper = module_function(self.ctx.tree, value.func.id) if isinstance(value.func, ast.Name) else None
        returns = [n.value for n in ast.walk(helper) if isinstance(n, ast.Return) and n.value is not None] if helper else []
        return bool(returns) and all(self._is_synthetic(r, [self.ctx.tree, helper], depth + 1) for r in returns)  # type: ignore[list-item]

    def _is_random_tensor(self, tensor: ast.AST, ancestors: Sequence[ast.AST], depth: int) -> bool:
        value = self._traced(tensor, ancestors, depth)
        filled = False
        while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in _RANDOM_FILLS:
            value, filled = value.func.value, True  # `torch.empty(n).random_(k)`
        if not isinstance(value, ast.Call):
            return False
        made = self.ctx.qualified_name(value.func, ancestors) or ""
        return made in _RANDOM_TENSORS or (filled and made in _BLANK_TENSORS)

    def _traced(self, node: ast.AST, ancestors: Sequence[ast.AST], depth: int) -> ast.AST:
        """A name's last local value (a few assignments back), else the node itself."""
        function = enclosing_function(ancestors)
        while isinstance(node, ast.Name) and depth <= _MAX_VALUE_DEPTH:
            value = local_value(node.id, function, node.lineno, self.ctx.tree)
            if value is None:
                break
            node, depth = value, depth + 1
        return node

    def _is_streaming(self, dataset: ast.expr, ancestors: Sequence[ast.AST]) -> bool:
        if _STREAMING.search(ast.unparse(dataset)):
            return True
        for call in (n for n in ast.walk(dataset) if isinstance(n, ast.Call)):
            qualified = self.ctx.qualified_name(call.func, ancestors) or ""
            if _STREAMING.search(qualified) or qualified.startswith(_STREAMING_MODULES):
                return True
            if isinstance(call.func, ast.Name) and call.func.id in self._iterable_dataset_classes():
                return True
        return False

    def _iterable_dataset_classes(self) -> set[str]:
        """Classes of this file that derive from an IterableDataset, directly or through each other."""
        key = ("iterable-dataset-classes",)
        if key not in self.ctx.memo:
            classes = {n.name: n for n in ast.walk(self.ctx.tree) if isinstance(n, ast.ClassDef)}
            found: set[str] = set()
            changed = True
            while changed:
                changed = False
                for name, cls in classes.items():
                    if name in found:
                        continue
                    for base in cls.bases:
                        qualified = self.ctx.qualified_name(base, []) or ast.unparse(base)
                        if _STREAMING.search(qualified) or (isinstance(base, ast.Name) and base.id in found):
                            found.add(name)
                            changed = True
                            break
            self.ctx.memo[key] = found
        return self.ctx.memo[key]  # type: ignore[return-value]

    def _file_has_streaming_datasets(self) -> bool:
        key = ("file-has-streaming-datasets",)
        if key not in self.ctx.memo:
            self.ctx.memo[key] = bool(self._iterable_dataset_classes()) or any(
                (isinstance(node, ast.Import) and any(a.name.startswith(_STREAMING_MODULES) for a in node.names))
                or (isinstance(node, ast.ImportFrom) and (node.module or "").startswith(_STREAMING_MODULES))
                for node in ast.walk(self.ctx.tree)
            )
        return self.ctx.memo[key]  # type: ignore[return-value]

    def _single_process_branch(self, call: ast.Call, ancestors: Sequence[ast.AST]) -> bool:
        """`if args.distributed: ... else: DataLoader(..., shuffle=True)`, or after `if distributed: return ...`."""
        if any(
            isinstance(a, (ast.If, ast.IfExp, ast.While)) and _DISTRIBUTED_TEST.search(ast.unparse(a.test))
            for a in ancestors
        ):
            return True
        return preceded_by(self.ctx, call, ancestors, _exits_when_distributed)


def _exits_when_distributed(ctx: FileContext, statement: ast.stmt, ancestors: Sequence[ast.AST]) -> bool:
    return (
        isinstance(statement, ast.If)
        and bool(_DISTRIBUTED_TEST.search(ast.unparse(statement.test)))
        and isinstance(statement.body[-1], (ast.Return, ast.Raise, ast.Continue, ast.Break))
    )


def _is_parameter(function: ast.AST, name: str) -> bool:
    assert isinstance(function, FUNCTIONS)
    arguments = function.args
    every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    return any(a.arg == name for a in every)


def _module_value(tree: ast.Module, name: str) -> ast.AST | None:
    assignments = module_assignments(tree).get(name)
    return assignments[-1].value if assignments else None
