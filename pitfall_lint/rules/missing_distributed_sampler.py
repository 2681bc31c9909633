"""PFL401: a training DataLoader without a DistributedSampler gives every rank the whole dataset."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

from pitfall_lint.analysis.distributed import DISTRIBUTED_TRIGGERS, sets_up_distributed
from pitfall_lint.analysis.ranks import is_restricted_to_one_rank, mentions_rank
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
from pitfall_lint.analysis.scopes import FUNCTIONS, enclosing_function, local_value, module_assignments, preceded_by
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
    # DataLoader, in a file that sets_up_distributed() could recognise.
    triggers = (("DataLoader",), DISTRIBUTED_TRIGGERS)
    subscriptions = (ast.Call,)

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._loaders: list[tuple[ast.Call, list[ast.AST]]] = []

    def visit(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Call)
        if self.ctx.qualified_name(node.func) in DATA_LOADERS:
            self._loaders.append((node, list(self.ctx.ancestors)))

    def finish(self) -> None:
        if not self._loaders or not sets_up_distributed(self.ctx) or uses_loader_framework(self.ctx):
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
        """A per-rank shard (`full[rank::world]`, `split_dataset_by_node(...)`) or an iterable dataset."""
        if mentions_rank(dataset) or self._is_streaming(dataset, ancestors):
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

    @staticmethod
    def _single_process_branch(call: ast.Call, ancestors: Sequence[ast.AST]) -> bool:
        """`if args.distributed: ... else: DataLoader(..., shuffle=True)`, or after `if distributed: return ...`."""
        if any(
            isinstance(a, (ast.If, ast.IfExp, ast.While)) and _DISTRIBUTED_TEST.search(ast.unparse(a.test))
            for a in ancestors
        ):
            return True
        return preceded_by(call, ancestors, _exits_when_distributed)


def _exits_when_distributed(statement: ast.stmt) -> bool:
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
