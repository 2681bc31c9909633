"""PFL305: the global rank counts processes across nodes, the local rank within one node. A device picked by the
global rank does not exist on the second node; a writer picked by `local_rank == 0` exists on every node."""

from __future__ import annotations

import ast
from collections.abc import Sequence

from pitfall_lint.analysis.buffers import writes_per_process
from pitfall_lint.analysis.one_node import spans_one_node
from pitfall_lint.analysis.rank_origin import origins
from pitfall_lint.analysis.ranks import ancestors_of, is_locally_restricted
from pitfall_lint.analysis.scopes import (
    FUNCTIONS,
    Function,
    enclosing_function,
    enclosing_method,
    local_value,
    module_function,
    parameter_slots,
    position_in_block,
    self_name,
)
from pitfall_lint.analysis.training import walk_same_scope
from pitfall_lint.context import FileContext
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.rules.base import Rule

# Calls whose first argument is a device index.
_DEVICE_SETTERS = frozenset(
    {"torch.cuda.set_device", "torch.cuda.device", "torch.xpu.set_device", "torch.accelerator.set_device_index"}
)
_DEVICE_KEYWORDS = frozenset({"device_ids", "output_device", "device_id"})
_MOVES = frozenset({"to", "cuda"})
_DEVICE_PREFIX = "cuda:"
# Calls that write a whole file, and which argument names it: two processes that run one on a shared path
# overwrite each other's bytes. (Appending logs and TensorBoard's per-host event files do not collide.)
_WRITERS = {"torch.save": 1, "torch.jit.save": 1, "safetensors.torch.save_file": 1, "numpy.save": 0, "open": 0}
_WRITE_MODES = frozenset("wx")
_GLOBAL_WORDS = (b"RANK", b"get_rank", b"global_rank", b"process_index")
# A local rank is read, or computed as a rank modulo the node's processes (`rank % ngpus_per_node`).
_LOCAL_WORDS = (
    b"LOCAL_RANK", b"local_rank", b"local_process_index", b"get_node_local_rank", b"per_node", b"PER_NODE",
    b"device_count", b"LOCAL_WORLD_SIZE", b"local_world_size",
)
_READERS = frozenset({"torch.load", "numpy.load", "safetensors.torch.load_file"})
_TERMINATORS = (ast.Return, ast.Continue, ast.Break, ast.Raise)
_VALUES = (ast.Name, ast.Attribute, ast.Call)
_HELPER_DEPTH = 1  # helpers of helpers followed
_UNTOLD = object()


def _integer(node: ast.AST) -> int | None:
    """A literal integer, negative ones (`-1`, a unary minus in the tree) included."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _integer(node.operand)
        return -inner if inner is not None else None
    return node.value if isinstance(node, ast.Constant) and type(node.value) is int else None


def _is_zero(node: ast.AST) -> bool:
    return _integer(node) == 0


def _zero_test(test: ast.expr) -> tuple[bool, ast.expr] | None:
    """(True, subject) when the test holds only if `subject` is 0 (`x == 0`, `x in [-1, 0]`, `x <= 0`, `not x`),
    (False, subject) when it holds only if `subject` is not 0 (`x != 0`, `x > 0`)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _zero_test(test.operand)
        if inner is not None:
            return not inner[0], inner[1]
        return (True, test.operand) if isinstance(test.operand, (ast.Name, ast.Attribute)) else None
    if not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return None
    left, op, right = test.left, test.ops[0], test.comparators[0]
    if _is_zero(left) and isinstance(op, (ast.Eq, ast.NotEq)):
        left, right = right, left
    if _is_zero(right):
        if isinstance(op, (ast.Eq, ast.LtE)):
            return True, left
        if isinstance(op, (ast.NotEq, ast.Gt)):
            return False, left
    if _integer(right) == 1:
        if isinstance(op, ast.Lt):
            return True, left
        if isinstance(op, ast.GtE):
            return False, left
    if isinstance(op, (ast.In, ast.NotIn)) and isinstance(right, (ast.List, ast.Tuple, ast.Set)):
        values = [_integer(e) for e in right.elts]
        if 0 in values and all(v in (0, -1) for v in values):
            return isinstance(op, ast.In), left
    return None


class RankVsLocalRank(Rule):
    info = RuleInfo(
        code="PFL305",
        name="rank-vs-local-rank",
        summary="The global rank picks a CUDA device (there is no cuda:8 on the second node), or `local_rank == 0` "
        "picks the one writer of a file (every node has a local rank 0).",
        severity="warning",
        hint='pick the device with LOCAL_RANK (`int(os.environ["LOCAL_RANK"])`) and the one writer with the global rank '
        "(`dist.get_rank() == 0`)",
        verifiable=True,
        preview=True,  # below the first-run bar (bench/fresh): runs with --preview
    )
    triggers = (("rank", "RANK", "process_index"),)
    subscriptions = (ast.Call, ast.JoinedStr, ast.BinOp)

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        # Without a word that can name the global (local) rank, no device (writer) can be picked by it.
        data = ctx.text.data
        self._global_words = any(word in data for word in _GLOBAL_WORDS)
        self._local_words = any(word in data for word in _LOCAL_WORDS)

    def visit(self, node: ast.AST) -> None:
        for index in self._device_indices(node) if self._global_words else ():
            if origins(self.ctx, index, self.ctx.ancestors) == {"global"} and not self._on_one_machine():
                text = ast.unparse(index)
                self.report(
                    index,
                    f"`{text}` is the global rank (RANK, `dist.get_rank()`) and picks a CUDA device: it counts the "
                    f"processes of every node, so on the second node it asks for devices that node does not have "
                    f"(rank 8 of two 8-GPU nodes asks for cuda:8: \"CUDA error: invalid device ordinal\"); pick the "
                    f"device with the local rank, `int(os.environ[\"LOCAL_RANK\"])`",
                )
        if isinstance(node, ast.Call) and self._local_words:
            self._check_writer(node)

    def _device_indices(self, node: ast.AST) -> list[ast.expr]:
        """The expressions that pick a device index in this node: `set_device(i)`, `f"cuda:{i}"`, `device_ids=[i]`, `.to(i)`."""
        if isinstance(node, ast.JoinedStr):
            values = node.values
            return [
                value.value for before, value in zip(values, values[1:])
                if isinstance(before, ast.Constant) and str(before.value).endswith(_DEVICE_PREFIX) and isinstance(value, ast.FormattedValue)
            ]
        if isinstance(node, ast.BinOp):  # "cuda:%d" % i, "cuda:" + str(i)
            template = node.left
            if isinstance(template, ast.Constant) and isinstance(template.value, str):
                if isinstance(node.op, ast.Mod) and template.value.startswith(_DEVICE_PREFIX) and "%" in template.value:
                    return [node.right]
                if isinstance(node.op, ast.Add) and template.value.endswith(_DEVICE_PREFIX):
                    return [node.right]
            return []
        assert isinstance(node, ast.Call)
        found: list[ast.expr] = []
        for keyword in node.keywords:
            if keyword.arg in _DEVICE_KEYWORDS:
                value = keyword.value
                found += value.elts if isinstance(value, (ast.List, ast.Tuple)) and len(value.elts) == 1 else [value]
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "format" and isinstance(func.value, ast.Constant):
            if str(func.value.value).startswith(_DEVICE_PREFIX) and len(node.args) == 1:
                found.append(node.args[0])
            return found
        qualified = self.ctx.qualified_name(func) or ""
        first = node.args[0] if node.args else None
        if first is None:
            return found
        if qualified in _DEVICE_SETTERS:
            found.append(first)
        elif qualified == "torch.device":
            is_cuda = isinstance(first, ast.Constant) and first.value == "cuda"
            found.append(node.args[1] if is_cuda and len(node.args) > 1 else first)
        elif isinstance(func, ast.Attribute) and func.attr in _MOVES and not qualified.startswith("torch."):
            found.append(first)
        return found

    def _on_one_machine(self) -> bool:
        """The process group can only span one node, where the global rank is the local one and every writer of
        a local rank 0 is the only one (analysis/one_node.py)."""
        return spans_one_node(self.ctx, self.ctx.ancestors)

    def _per_node(self, path: ast.expr, ancestors: Sequence[ast.AST]) -> bool:
        """A target per node or per process (the path names the node or the host, or the rank; an in-memory buffer, a
        unique temporary name): no two processes share it."""
        text = ast.unparse(path).lower()
        return any(word in text for word in ("node", "host")) or writes_per_process(self.ctx, path, ancestors)

    def _read_back(self, path: ast.expr, scope: Function | ast.Module) -> bool:
        """The written file is loaded again later in the function that writes it (by the same path, or one of the
        same pattern: `f"{out}/{name}_{i}.npy"`): a cache that each node's first process makes for the others on that
        node, where the file system may be the node's own."""
        return self._last_reads_in(scope).get(self._pattern(path, scope), 0) > path.lineno

    def _last_reads_in(self, scope: Function | ast.Module) -> dict[str, int]:
        """The line of the scope's last load of each path pattern: built once per scope."""
        key = ("pfl305-reads", id(scope))
        if key not in self.ctx.memo:
            reads: dict[str, int] = {}
            for node in ast.walk(scope):
                if isinstance(node, ast.Call) and node.args and self.ctx.qualified_name(node.func, [self.ctx.tree, scope]) in _READERS:
                    pattern = self._pattern(node.args[0], scope)
                    reads[pattern] = max(reads.get(pattern, 0), node.lineno)
            self.ctx.memo[key] = reads
        return self.ctx.memo[key]  # type: ignore[return-value]

    def _pattern(self, path: ast.expr, scope: Function | ast.Module) -> str:
        """The path as spelled, a variable read as its value, and an f-string's values as `{}`."""
        if isinstance(path, ast.Name):
            function = scope if isinstance(scope, FUNCTIONS) else None
            value = local_value(path.id, function, path.lineno, self.ctx.tree)
            path = value if isinstance(value, ast.expr) else path
        if isinstance(path, ast.JoinedStr):
            return "".join(str(part.value) if isinstance(part, ast.Constant) else "{}" for part in path.values)
        return ast.unparse(path)

    # -- the one writer

    def _check_writer(self, call: ast.Call) -> None:
        ancestors = self.ctx.ancestors
        what = self._written(call, ancestors)
        helper = self._helper(call, ancestors) if what is None else None
        if what is None and helper is None:
            return
        guard = self._local_zero_guard(call, ancestors)
        if guard is None or self._on_one_machine():
            return
        if what is not None:
            name, path = what
            scope = enclosing_function(ancestors) or self.ctx.tree
            if path is not None and (self._per_node(path, ancestors) or self._read_back(path, scope)):
                return
            runs = f"`{name}`"
        else:
            assert helper is not None
            write = self._shared_write(call, *helper)
            if write is None:
                return
            runs = f"`{helper[0].name}(...)`, which writes with `{write[0]}` (line {write[1]})"
        self.report(
            call,
            f"`{ast.unparse(guard)}` (line {guard.lineno}) picks the one process that runs {runs}, but it tests the "
            f"local rank and a local rank 0 exists on every node: on two nodes two processes write, the same file when "
            f"the file system is shared; pick the writer with the global rank (`dist.get_rank() == 0`)",
        )

    def _written(self, call: ast.Call, ancestors: Sequence[ast.AST]) -> tuple[str, ast.expr | None] | None:
        """How the call writes (as the message names it), and the path when it names one."""
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "save_pretrained":
            return "save_pretrained", call.args[0] if call.args else None
        qualified = self.ctx.qualified_name(func) if ancestors is self.ctx.ancestors else self.ctx.qualified_name(func, ancestors)
        if qualified not in _WRITERS:
            return None
        if qualified == "open":
            mode = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "mode"), None)
            if not (isinstance(mode, ast.Constant) and isinstance(mode.value, str) and _WRITE_MODES & set(mode.value)):
                return None
            qualified = f"open(..., {mode.value!r})"
        position = _WRITERS.get(qualified, 0)
        return qualified, call.args[position] if len(call.args) > position else None

    # -- writes made by a helper of the file

    def _helper(self, call: ast.Call, ancestors: Sequence[ast.AST]) -> tuple[Function, list[ast.AST]] | None:
        """The function of this file that the call runs, with its own ancestors: a module-level function called by
        name (`save_checkpoint(state)`), or a method of the enclosing class called through the instance
        (`self._save_snapshot(epoch)`)."""
        func = call.func
        if isinstance(func, ast.Name):
            function = module_function(self.ctx.tree, func.id)
            bound_elsewhere = self.ctx.qualified_name(func, ancestors) != func.id  # a parameter or an import
            return (function, [self.ctx.tree]) if function is not None and not bound_elsewhere else None
        method = enclosing_method(ancestors)
        if method is None or not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
            return None
        cls, caller = method
        if func.value.id != self_name(caller):
            return None
        called = next((f for f in cls.body if isinstance(f, FUNCTIONS) and f.name == func.attr), None)
        return (called, [*ancestors_of(self.ctx, cls), cls]) if called is not None else None

    def _shared_write(self, call: ast.Call, function: Function, owner: list[ast.AST]) -> tuple[str, int] | None:
        """(writer, line) of a write that the helper makes to a path every process shares, where this call gives it
        no per-rank or per-node path: a path built from a parameter is judged by what the call passes."""
        writes = self._passed_on(call, self.ctx.ancestors, None, [], self._writes_in(function, owner))
        return (writes[0][0], writes[0][1]) if writes else None

    def _writes_in(self, function: Function, owner: list[ast.AST], depth: int = 0) -> list[tuple[str, int, list[str]]]:
        """(writer, line, parameter slots of its path) of each write the function makes on every process it runs in
        (none under its own rank test) to a path that is not per rank or per node; those of the helpers it calls in
        turn, one level down, when their paths come from no parameter. Once per function."""
        key = ("pfl305-helper-writes", id(function), depth)
        if key not in self.ctx.memo:
            found: list[tuple[str, int, list[str]]] = []
            for node in walk_same_scope(function.body):
                if not isinstance(node, ast.Call):
                    continue
                ancestors = ancestors_of(self.ctx, node)
                written = self._written(node, ancestors)
                if written is None:
                    helper = self._helper(node, ancestors) if depth < _HELPER_DEPTH else None
                    if helper is not None and helper[0] is not function and not is_locally_restricted(self.ctx, node, ancestors):
                        found += self._passed_on(node, ancestors, function, owner, self._writes_in(*helper, depth + 1))
                    continue
                writer, path = written
                if is_locally_restricted(self.ctx, node, ancestors):
                    continue  # the helper picks its own writer
                if path is not None and (self._per_node(path, ancestors) or self._read_back(path, function)):
                    continue  # a file of its own, or a cache it reads back
                found.append((writer, node.lineno, parameter_slots(path, function, owner) if path is not None else []))
            self.ctx.memo[key] = found
        return self.ctx.memo[key]  # type: ignore[return-value]

    def _passed_on(
        self,
        call: ast.Call,
        ancestors: Sequence[ast.AST],
        function: Function | None,
        owner: list[ast.AST],
        writes: list[tuple[str, int, list[str]]],
    ) -> list[tuple[str, int, list[str]]]:
        """The writes of the helper that the call runs, with their paths' parameters read through the call: a
        default or a literal is shared, a per-rank or per-node value is not, and a parameter of `function` (the
        caller, when it is a helper itself) gives the write its slot there."""
        found = []
        for writer, line, slots in writes:
            argument = _argument(call, slots) if slots else None
            if argument is _UNTOLD or (isinstance(argument, ast.expr) and self._per_node(argument, ancestors)):
                continue
            passed = function is not None and isinstance(argument, ast.expr)
            found.append((writer, line, parameter_slots(argument, function, owner) if passed else []))  # type: ignore[arg-type]
        return found

    def _local_zero_guard(self, node: ast.AST, ancestors: Sequence[ast.AST]) -> ast.expr | None:
        """The test that lets only local rank 0 reach `node`: an enclosing `if local_rank == 0:` (or the else of
        `if local_rank != 0:`), or an earlier `if local_rank != 0: return` in an enclosing block."""
        chain = [*ancestors, node]
        for parent, child in zip(chain, chain[1:]):
            if isinstance(parent, ast.If):
                in_body, in_else = (position_in_block(parent, f, child) is not None for f in ("body", "orelse"))
                branch = True if in_body else False if in_else else None
                if branch is not None and self._tests_local_zero(parent.test) is branch:
                    return parent.test
            for field in ("body", "orelse", "finalbody"):
                place = position_in_block(parent, field, child)
                if place is None:
                    continue
                for index, statement in self._early_exits(parent, field):
                    if index >= place:
                        break
                    if self._tests_local_zero(statement.test) is False:
                        return statement.test
        return None

    def _early_exits(self, parent: ast.AST, field: str) -> list[tuple[int, ast.If]]:
        """The `if ...: return` statements of a block with their places, found once per block."""
        key = ("pfl305-early-exits", id(parent), field)
        if key not in self.ctx.memo:
            self.ctx.memo[key] = [
                (i, s) for i, s in enumerate(getattr(parent, field))
                if isinstance(s, ast.If) and s.body and isinstance(s.body[-1], _TERMINATORS)
            ]
        return self.ctx.memo[key]  # type: ignore[return-value]

    def _tests_local_zero(self, test: ast.expr) -> bool | None:
        """True when the test holds only on local rank 0 (a node's first process), False only elsewhere, None when
        it does not test the local rank alone (a test of the global rank too makes a global guard). The parts of
        `and` and `or`, nested ones too, are read alike: `not args.distributed or (args.distributed and args.rank %
        ngpus_per_node == 0)` is a local test (the rank modulo the node's processes is the local rank)."""
        verdicts = set()
        for part in _parts(test):
            zero = _zero_test(part)
            found = origins(self.ctx, zero[1], self.ctx.ancestors) if zero else set()
            if zero is not None and found == {"local"}:
                verdicts.add(zero[0])
            elif any("global" in origins(self.ctx, n, self.ctx.ancestors) for n in ast.walk(part) if isinstance(n, _VALUES)):
                return None
        return verdicts.pop() if len(verdicts) == 1 else None


def _argument(call: ast.Call, slots: list[str]) -> ast.expr | object | None:
    """What the call passes for the parameter of these slots (position, name): None when it passes nothing (the
    default), _UNTOLD when a `*args` or `**kwargs` may hold it."""
    for keyword in call.keywords:
        if keyword.arg in slots:
            return keyword.value
    positions = [int(slot) for slot in slots if slot.isdigit()]
    for index, argument in enumerate(call.args):
        if isinstance(argument, ast.Starred):
            return _UNTOLD
        if index in positions:
            return argument
    return _UNTOLD if any(k.arg is None for k in call.keywords) else None


def _parts(test: ast.expr) -> list[ast.expr]:
    """The tests an `and` or `or` joins, nested ones flattened."""
    if isinstance(test, ast.BoolOp):
        return [part for value in test.values for part in _parts(value)]
    return [test]
