"""Where a statement runs: on one rank only, in a single-process run only, or on every rank.

A branch's test is read as a formula over a few kinds of atom, each recognised by what it is, not by a word
somewhere in it: a rank value (`dist.get_rank()`, `os.environ["LOCAL_RANK"]`, `args.rank`, the index that
`mp.spawn` passes first, a variable set from one of them), a main-process predicate
(`accelerator.is_main_process`, `is_main_process()`, `trainer.is_global_zero`, `leader = rank == 0`), and a
distributed switch (`args.distributed`, `dist.is_initialized()`, `world_size > 1`). A name only counts when the
whole name is a rank's or a predicate's (`local_rank`, `is_master`): `args.lora_rank > 0` and
`args.master_weights` guard nothing. Direction matters: `if rank == 0: ... else: <here>` runs on every other
rank; a test whose direction cannot be told (`if rank % 2:`) still counts as restricting.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from enum import Enum

from pitfall_lint.analysis.scopes import (
    FUNCTIONS,
    Function,
    decorator_names,
    enclosing_function,
    enclosing_method,
    local_value,
    module_function,
    preceded_in,
    self_name,
)
from pitfall_lint.analysis.training import walk_same_scope
from pitfall_lint.context import FileContext
from pitfall_lint.traversal import nodes_of, parent_map

# Whole names (of a variable, an attribute or a called function) that hold a process's rank.
_RANK_VALUE = re.compile(
    r"(?:(?:local|global|world|ddp|ddp_local|my|proc|process|node_local|dist|cur|current|gpu|worker"
    r"|(?:data|tensor|pipeline|model|sequence|expert|context|tensor_model|pipeline_model|virtual_pipeline_model)_parallel"
    r"|dp|tp|pp|mp|cp|ep|sp)_?)?rank"
    r"(?:_?(?:id|idx|index|num))?|(?:local_)?gpu(?:_?id)?|(?:local_)?process_index|procid|proc_id"
    r"|(?:get_)?(?:global_|local_|node_local_)?(?:rank|ordinal)",
    re.IGNORECASE,
)
# Whole names that say "this is the one process that writes" (true on one rank).
_MAIN_PREDICATE = re.compile(
    r"(?:is_|am_)?(?:(?:local|global|node)_)?(?:main|master|primary|chief|leader)(?:_?(?:process|proc|rank|node|worker|host|gpu))?"
    r"|(?:is_)?(?:global|local)_zero|(?:is_)?rank_?(?:0|zero)|is_root(?:_process|_rank)?",
    re.IGNORECASE,
)
# Decorators that run the function on one process only.
_ONE_PROCESS_DECORATOR = re.compile(r"rank_?zero|main_process|master_only|rank0|on_main|on_local_main", re.IGNORECASE)
# A word that every name the three expressions above match, and every rank variable below, spells in some case.
_RANK_WORDS = (
    b"rank", b"gpu", b"process_index", b"procid", b"proc_id", b"ordinal", b"main", b"master", b"primary", b"chief",
    b"leader", b"zero", b"is_root", b"localid",
)
# Whole names of a distributed switch (true when the run has several processes).
_DISTRIBUTED_SWITCH = re.compile(
    r"(?:is_|use_|using_|multiprocessing_|enable_)?(?:distributed|ddp|fsdp|dist|multi_?gpu|multi_?process(?:ing)?)"
    r"(?:_(?:mode|training|run|enabled|available|initialized|initialised))?|is_(?:dist_)?(?:avail_and_)?initiali[sz]ed",
    re.IGNORECASE,
)
_WORLD_SIZE = re.compile(r"(?:get_)?world_?size|num_?(?:processes|procs|replicas|nodes)|n_?procs|nprocs", re.IGNORECASE)
_RANK_VARIABLES = frozenset({"RANK", "LOCAL_RANK", "GROUP_RANK", "SLURM_PROCID", "SLURM_LOCALID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"})
_SPAWNERS = frozenset({"torch.multiprocessing.spawn", "torch.multiprocessing.start_processes"})
# A name that resolves to a spawner spells its last part as a whole word (`mp.spawn(`, `import spawn as launch`);
# `ddp_spawn` or `_spawn_worker` are not one.
_SPAWNER_WORD = re.compile(rb"\b(?:spawn|start_processes)\b")
# Calls that start worker processes: the function that makes them runs in the parent, once.
_WORKER_STARTERS = frozenset({"spawn", "start_processes", "Process", "Pool"})
_WORKER_STARTER_BYTES = tuple(word.encode() for word in _WORKER_STARTERS)
# Objects that exist only in a distributed run: `if self.fabric is None:` is the single-process side.
_DISTRIBUTED_OBJECTS = frozenset({"fabric", "accelerator", "process_group", "ddp_model"})
_TERMINATORS = (ast.Return, ast.Raise, ast.Continue, ast.Break)
_MAX_DEPTH = 3


class _Atom(Enum):
    ONE = "true on one rank"
    OTHERS = "true on every rank but one"
    RANK = "depends on the rank, in a way not told"
    SINGLE = "true in a single-process run only"
    MULTI = "true in a distributed run only"


_RESTRICTED_WHEN_TRUE = (_Atom.ONE, _Atom.RANK, _Atom.SINGLE)
_RESTRICTED_WHEN_FALSE = (_Atom.OTHERS, _Atom.RANK, _Atom.MULTI)
_FLIP = {_Atom.ONE: _Atom.OTHERS, _Atom.OTHERS: _Atom.ONE, _Atom.SINGLE: _Atom.MULTI, _Atom.MULTI: _Atom.SINGLE, _Atom.RANK: _Atom.RANK}


def _last_name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return _last_name(node.func) if isinstance(node, ast.Call) else ""


def _reads_rank_variable(node: ast.AST) -> bool:
    """`os.environ["RANK"]`, `os.environ.get("LOCAL_RANK")`, `os.getenv("SLURM_PROCID")`."""
    if isinstance(node, ast.Subscript):
        key = node.slice
    elif isinstance(node, ast.Call) and node.args and _last_name(node.func) in ("get", "getenv", "setdefault"):
        key = node.args[0]
    else:
        return False
    return isinstance(key, ast.Constant) and key.value in _RANK_VARIABLES


def _spawned_here(ctx: FileContext) -> set[str]:
    """The names of the functions that this file starts with mp.spawn / start_processes."""
    key = ("spawned-here",)
    if key not in ctx.memo:
        found = set()
        data = ctx.text.data
        if _SPAWNER_WORD.search(data):  # a name that only NFKC folds into one (`ｓｐａｗｎ`) is not followed
            for node in nodes_of(ctx.tree, (ast.Call,)):  # the calls alone: ast.walk took twice as long
                if node.args and isinstance(node.args[0], ast.Name):  # type: ignore[attr-defined]
                    if ctx.qualified_name(node.func, []) in _SPAWNERS:
                        found.add(node.args[0].id)
        ctx.memo[key] = found
    return ctx.memo[key]  # type: ignore[return-value]


def _spawned_parameters(ctx: FileContext, function: Function, ancestors: Sequence[ast.AST]) -> bool:
    """Whether `function` is started by mp.spawn (here, or in another file when the project may be asked):
    its first parameter is then the process index."""
    if function.name in _spawned_here(ctx):
        return True
    key = ("spawned", id(function), ctx.project.online)
    if key not in ctx.memo:
        ctx.memo[key] = ctx.project.spawn_site(function, ancestors) is not None
    return ctx.memo[key]  # type: ignore[return-value]


def _is_spawn_index(ctx: FileContext, name: str, ancestors: Sequence[ast.AST]) -> bool:
    chain = list(ancestors)
    for index in range(len(chain) - 1, -1, -1):
        function = chain[index]
        if isinstance(function, FUNCTIONS):
            positional = [*function.args.posonlyargs, *function.args.args]
            if positional and positional[0].arg == name:
                return _spawned_parameters(ctx, function, chain[:index])
            if any(a.arg == name for a in [*positional, *function.args.kwonlyargs]):
                return False  # another parameter of the innermost function that binds it
    return False


class _Reader:
    """Reads tests and expressions of one file, following local variables a few assignments back."""

    def __init__(self, ctx: FileContext, ancestors: Sequence[ast.AST]) -> None:
        self.ctx = ctx
        self.ancestors = ancestors

    def _assigned(self, name: ast.Name, depth: int) -> ast.AST | None:
        if depth >= _MAX_DEPTH:
            return None
        function = enclosing_function(self.ancestors)
        value = local_value(name.id, function, name.lineno, self.ctx.tree)
        if value is None and function is not None:
            value = local_value(name.id, None, name.lineno, self.ctx.tree)
        return value

    def kind(self, node: ast.AST, depth: int = 0) -> _Atom | None:
        """What a value is: a rank (truthy on every rank but 0), a main-process predicate, a switch."""
        key = ("rank-kind", id(node))
        if key not in self.ctx.memo:
            self.ctx.memo[key] = self._kind(node, depth)
        return self.ctx.memo[key]  # type: ignore[return-value]

    def _kind(self, node: ast.AST, depth: int) -> _Atom | None:
        if isinstance(node, ast.Call) and _last_name(node.func) in ("int", "str", "bool") and node.args:
            return self.kind(node.args[0], depth)
        if _reads_rank_variable(node):
            return _Atom.OTHERS
        name = _last_name(node) if isinstance(node, (ast.Name, ast.Attribute, ast.Call)) else ""
        if name:
            if _MAIN_PREDICATE.fullmatch(name):
                return _Atom.ONE
            if _RANK_VALUE.fullmatch(name):
                return _Atom.OTHERS
            if _DISTRIBUTED_SWITCH.fullmatch(name):
                return _Atom.MULTI
        if isinstance(node, ast.Call):
            qualified = self.ctx.qualified_name(node.func, self.ancestors) or ""
            if qualified in ("torch.distributed.is_initialized", "torch.distributed.is_available"):
                return _Atom.MULTI
            if isinstance(node.func, ast.Name) and depth < _MAX_DEPTH:
                return self._helper_returns(node.func.id, depth)
        if isinstance(node, ast.Name):
            if _is_spawn_index(self.ctx, node.id, self.ancestors):
                return _Atom.OTHERS
            value = self._assigned(node, depth)
            if value is not None:
                return self.atom(value, depth + 1)
        return None

    def _helper_returns(self, name: str, depth: int) -> _Atom | None:
        """What a module-level helper of this file returns, when all its returns agree (`def is_leader(): return
        dist.get_rank() == 0`)."""
        helper = module_function(self.ctx.tree, name)
        if helper is None:
            return None
        values = [n.value for n in ast.walk(helper) if isinstance(n, ast.Return) and n.value is not None]
        kinds = {_Reader(self.ctx, [self.ctx.tree, helper]).atom(value, depth + 1) for value in values}
        return kinds.pop() if len(kinds) == 1 else None

    def atom(self, test: ast.AST, depth: int = 0) -> _Atom | None:
        """The kind of a test that is not a boolean combination."""
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            return self._comparison(test.left, test.ops[0], test.comparators[0], depth)
        if isinstance(test, ast.BoolOp) or (isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)):
            # `leader = rank == 0 and save` read through a variable: its value as a test.
            if self.holds(test, True, depth):
                return _Atom.ONE if not self.holds(test, False, depth) else _Atom.RANK
            return _Atom.OTHERS if self.holds(test, False, depth) else None
        return self.kind(test, depth)

    def _comparison(self, left: ast.AST, op: ast.cmpop, right: ast.AST, depth: int) -> _Atom | None:
        left_kind, right_kind = self.kind(left, depth), self.kind(right, depth)
        if left_kind is None and right_kind is None:
            if isinstance(right, ast.Constant) and right.value is None and _last_name(left) in _DISTRIBUTED_OBJECTS:
                if isinstance(op, (ast.Is, ast.Eq)):
                    return _Atom.SINGLE
                if isinstance(op, (ast.IsNot, ast.NotEq)):
                    return _Atom.MULTI
            switch = self._world_size_comparison(left, op, right)
            if switch is not None:
                return switch
            # `rank % 2 == 0`: a comparison of something computed from the rank.
            return _Atom.RANK if self.mentions(left, depth) or self.mentions(right, depth) else None
        value, other = (left, right) if left_kind is not None else (right, left)
        kind = left_kind or right_kind
        literal = isinstance(other, ast.Constant) or (
            isinstance(other, (ast.Tuple, ast.List, ast.Set)) and all(isinstance(e, ast.Constant) for e in other.elts)
        )
        if kind is _Atom.ONE:  # `is_main_process() == True`
            if literal and isinstance(other, ast.Constant) and isinstance(op, (ast.Eq, ast.Is, ast.NotEq, ast.IsNot)):
                positive = bool(other.value) == isinstance(op, (ast.Eq, ast.Is))
                return _Atom.ONE if positive else _Atom.OTHERS
            return _Atom.RANK
        if kind is not _Atom.OTHERS or not literal:
            return _Atom.RANK if kind in (_Atom.OTHERS, _Atom.RANK) else None
        if value is right:  # `0 == rank`: read it as `rank == 0`
            op = {ast.Lt: ast.Gt(), ast.Gt: ast.Lt(), ast.LtE: ast.GtE(), ast.GtE: ast.LtE()}.get(type(op), op)  # type: ignore[assignment]
        if isinstance(op, (ast.Eq, ast.Is, ast.In)):
            return _Atom.ONE
        if isinstance(op, (ast.NotEq, ast.IsNot, ast.NotIn)):
            return _Atom.OTHERS
        bound = other.value if isinstance(other, ast.Constant) else None
        if isinstance(bound, int):
            if isinstance(op, ast.Lt) and bound <= 1 or isinstance(op, ast.LtE) and bound <= 0:
                return _Atom.ONE
            if isinstance(op, ast.Gt) and bound >= 0 or isinstance(op, ast.GtE) and bound >= 1:
                return _Atom.OTHERS
        return _Atom.RANK

    @staticmethod
    def _world_size_comparison(left: ast.AST, op: ast.cmpop, right: ast.AST) -> _Atom | None:
        """`world_size > 1` (distributed) and `world_size == 1` (single process)."""
        if not (_WORLD_SIZE.fullmatch(_last_name(left)) and isinstance(right, ast.Constant) and isinstance(right.value, int)):
            return None
        bound = right.value
        if isinstance(op, ast.Gt) and bound >= 1 or isinstance(op, ast.GtE) and bound >= 2 or isinstance(op, ast.NotEq) and bound == 1:
            return _Atom.MULTI
        if isinstance(op, ast.Eq) and bound == 1 or isinstance(op, ast.Lt) and bound == 2 or isinstance(op, ast.LtE) and bound == 1:
            return _Atom.SINGLE
        return None

    def holds(self, test: ast.AST, truth: bool, depth: int = 0) -> bool:
        """Whether the test having this truth value lets only one rank, or only a single-process run, through."""
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return self.holds(test.operand, not truth, depth)
        if isinstance(test, ast.BoolOp):
            parts = [self.holds(value, truth, depth) for value in test.values]
            # `a and b` true, or `a or b` false: every part has that value, so one restricting part is enough.
            every_part = isinstance(test.op, ast.And) == truth
            return any(parts) if every_part else all(parts)
        atom = self.atom(test, depth)
        return atom is not None and atom in (_RESTRICTED_WHEN_TRUE if truth else _RESTRICTED_WHEN_FALSE)

    def mentions(self, node: ast.AST, depth: int = 0) -> bool:
        """Whether the expression's value depends on the rank (a per-rank path, a per-rank seed)."""
        key = ("rank-mentions", id(node))
        if key not in self.ctx.memo:
            self.ctx.memo[key] = False  # a variable defined through itself does not depend on the rank by that
            self.ctx.memo[key] = self._mentions(node, depth)
        return self.ctx.memo[key]  # type: ignore[return-value]

    def _mentions(self, node: ast.AST, depth: int) -> bool:
        for child in ast.walk(node):
            if isinstance(child, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)):
                kind = self.kind(child, depth)
                if kind in (_Atom.ONE, _Atom.OTHERS, _Atom.RANK):
                    return True
            if isinstance(child, ast.Name) and depth < _MAX_DEPTH:
                value = self._assigned(child, depth)
                if value is not None and self.mentions(value, depth + 1):
                    return True
            if isinstance(child, ast.Call) and depth < _MAX_DEPTH and self._helper_returns_rank(child, depth):
                return True
        return False

    def _helper_returns_rank(self, call: ast.Call, depth: int) -> bool:
        """Whether the call runs a helper of this file (a module-level function, or a method of the enclosing class
        called through the instance) that returns a value built from the rank: `checkpoint_name(step)` with
        `return f"ckpt_{dist.get_rank()}_{step}.pt"`."""
        func = call.func
        helper: Function | None = None
        if isinstance(func, ast.Name) and self.ctx.resolver.qualified_name(func, self.ancestors) == func.id:
            helper = module_function(self.ctx.tree, func.id)
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            method = enclosing_method(self.ancestors)
            if method is not None and func.value.id == self_name(method[1]):
                helper = next((f for f in method[0].body if isinstance(f, FUNCTIONS) and f.name == func.attr), None)
        if helper is None:
            return False
        reader = _Reader(self.ctx, [*ancestors_of(self.ctx, helper), helper])
        returned = [n.value for n in walk_same_scope(helper.body) if isinstance(n, ast.Return) and n.value is not None]
        return any(reader.mentions(value, depth + 1) for value in returned)


def depends_on_rank(ctx: FileContext, node: ast.AST, ancestors: Sequence[ast.AST]) -> bool:
    """Whether the value of an expression (a path, a seed, a dataset) differs from rank to rank."""
    return _Reader(ctx, ancestors).mentions(node)


def is_rank_test(ctx: FileContext, test: ast.AST, ancestors: Sequence[ast.AST]) -> bool:
    """Whether a branch's test lets only some ranks (or only a single process) through, either way."""
    reader = _Reader(ctx, ancestors)
    return reader.holds(test, True) or reader.holds(test, False)


def _ends_early(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.If) and bool(statement.body) and isinstance(statement.body[-1], _TERMINATORS)


def _exits_early_on_rank(ctx: FileContext, statement: ast.stmt, ancestors: Sequence[ast.AST]) -> bool:
    """`if rank != 0: return` and its relatives: what follows runs only where the test is false."""
    return _ends_early(statement) and _Reader(ctx, ancestors).holds(statement.test, False)  # type: ignore[attr-defined]


def may_name_a_rank(data: bytes) -> bool:
    """Whether a source can hold what `names_rank` or `one_process_decorators` recognises: its bytes, in any case,
    hold one of the words they all spell. Source that is not ASCII is not judged: NFKC, which Python applies to
    identifiers, can make these words of other characters."""
    if not data.isascii():
        return True
    lowered = data.lower()
    return any(word in lowered for word in _RANK_WORDS)


def names_rank(node: ast.AST) -> bool:
    """Whether the expression itself names this process's rank or a main-process predicate (`rank`, `args.local_rank`,
    `is_main_process()`, `os.environ["RANK"]`), without following variables: a group of ranks (`ranks`,
    `load_on_all_ranks`) or a value that merely contains the word (`lora_rank`) is not one."""
    for child in ast.walk(node):
        if _reads_rank_variable(child):
            return True
        name = _last_name(child) if isinstance(child, (ast.Name, ast.Attribute)) else ""
        if name and (_RANK_VALUE.fullmatch(name) or _MAIN_PREDICATE.fullmatch(name)):
            return True
    return False


def one_process_decorators(function: Function) -> list[str]:
    """The decorators that run the function on one process only (`@rank_zero_only`, `@accelerator.on_main_process`)."""
    return [d for d in decorator_names(function) if _ONE_PROCESS_DECORATOR.search(d.rpartition(".")[2])]


def _one_process_decorated(ctx: FileContext, function: Function) -> bool:
    """`@rank_zero_only`, `@accelerator.on_main_process` and their relatives."""
    key = ("one-process-decorated", id(function))
    if key not in ctx.memo:
        ctx.memo[key] = bool(one_process_decorators(function))
    return ctx.memo[key]  # type: ignore[return-value]


_BRANCHES = (ast.If, ast.IfExp, ast.While)


def _branch_restricts(ctx: FileContext, branch: ast.AST, child: ast.AST, ancestors: Sequence[ast.AST]) -> bool:
    """Whether the branch statement (if / conditional expression / while) lets only one rank reach `child`."""
    if isinstance(branch, (ast.If, ast.IfExp)):
        if child is branch.test:
            return False
        in_body = child in branch.body if isinstance(branch, ast.If) else child is branch.body
        truth = in_body
    elif isinstance(branch, ast.While) and child is not branch.test and child in branch.body:
        truth = True
    else:
        return False
    key = ("branch-restricts", id(branch), truth)
    if key not in ctx.memo:
        ctx.memo[key] = _Reader(ctx, ancestors).holds(branch.test, truth)
    return ctx.memo[key]  # type: ignore[return-value]


def _starts_workers(ctx: FileContext, function: Function) -> bool:
    """Whether the function itself starts worker processes (`mp.spawn(worker, ...)`): it is their parent."""
    if "may-start-workers" not in ctx.memo:  # the cheap look first, once per file: without these words, no workers
        data = ctx.text.data
        # A starter is told by its module's name or by `get_context(...)`, which the file must then spell too.
        ctx.memo["may-start-workers"] = any(word in data for word in _WORKER_STARTER_BYTES) and (
            b"multiprocessing" in data or b"get_context" in data
        )
    if not ctx.memo["may-start-workers"]:
        return False
    key = ("starts-workers", id(function))
    if key not in ctx.memo:
        ctx.memo[key] = any(
            isinstance(node, ast.Call)
            and _last_name(node.func) in _WORKER_STARTERS
            and any(word in (ctx.qualified_name(node.func, [function]) or "") + ast.unparse(node.func) for word in ("multiprocessing", "get_context("))
            for node in walk_same_scope(function.body)
        )
    return ctx.memo[key]  # type: ignore[return-value]


def is_locally_restricted(ctx: FileContext, node: ast.AST, ancestors: Sequence[ast.AST]) -> bool:
    """Whether the node's own code lets only one rank (or only a single-process run) reach it: a branch around
    it, a one-process decorator, an early exit before it, or a function that starts the workers (their parent)."""
    function = enclosing_function(ancestors)
    if function is not None and _starts_workers(ctx, function):
        return True
    chain = [*ancestors, node]
    # What the levels above a statement tell is kept by statement: a summary asks this of every call, and the calls
    # of one statement, or of one block, share all but their last few levels.
    root, end = id(chain[0]), len(chain) - 1
    known_at, known = 0, False
    unknown: list[int] = []  # the statements of the chain whose levels above are not told yet, innermost first
    for index in range(end, 0, -1):
        if isinstance(chain[index], ast.stmt):
            found = ctx.memo.get(("restricted-above", root, id(chain[index])))
            if found is not None:
                known_at, known = index, found
                break
            unknown.append(index)
    for index in reversed(unknown):
        known = known or any(_level_restricts(ctx, chain, level) for level in range(known_at, index))
        ctx.memo[("restricted-above", root, id(chain[index]))] = known
        known_at = index
    return known or any(_level_restricts(ctx, chain, level) for level in range(known_at, end))  # type: ignore[return-value]


def _level_restricts(ctx: FileContext, chain: Sequence[ast.AST], index: int) -> bool:
    """Whether chain[index] lets only one rank reach its child chain[index + 1]: a branch, a one-process decorator,
    an early exit before the child in its block."""
    parent = chain[index]
    # The type first: most of a call's ancestors are neither a branch nor a function.
    if isinstance(parent, _BRANCHES) and _branch_restricts(ctx, parent, chain[index + 1], chain[:index]):
        return True
    if isinstance(parent, FUNCTIONS) and _one_process_decorated(ctx, parent):
        return True
    return preceded_in(ctx, chain, index, _exits_early_on_rank)


def called_on_one_rank(ctx: FileContext, function: Function, ancestors: Sequence[ast.AST]) -> bool:
    """Whether every call of the function, anywhere in the project, is restricted to one rank."""
    return ctx.project.callers_restricted(function, ancestors) is not None


def is_restricted_to_one_rank(ctx: FileContext, node: ast.AST, ancestors: Sequence[ast.AST]) -> bool:
    """Whether something stops every rank but one (or a distributed run) from reaching `node`: a guard around
    it, or, for code in a function, a guard around every call of that function anywhere in the project."""
    if is_locally_restricted(ctx, node, ancestors):
        return True
    function = enclosing_function(ancestors)
    return function is not None and called_on_one_rank(ctx, function, ancestors)


def _parents(ctx: FileContext) -> dict[int, ast.AST]:
    key = ("parents",)
    if key not in ctx.memo:
        ctx.memo[key] = parent_map(ctx.tree)
    return ctx.memo[key]  # type: ignore[return-value]


def ancestors_of(ctx: FileContext, node: ast.AST) -> list[ast.AST]:
    parents = _parents(ctx)
    chain = []
    while id(node) in parents:
        node = parents[id(node)]
        chain.append(node)
    chain.reverse()
    return chain
