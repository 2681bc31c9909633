"""Whether a process group can only span one node, so that the global rank is the local one and a file in /tmp is
the node's own: its rendezvous is on this machine (`tcp://127.0.0.1:...`, `MASTER_ADDR = "localhost"`, a file store
in a temporary folder), its processes are started here and ranked by their index (`mp.spawn` with `rank=index`),
its world is sized by this machine's devices (or asserted to fit them), or a test harness that starts its processes
here runs it (`MultiProcessTestCase`, `@torch_spawn`).

The facts are read per function and for the whole file (`one_node_facts`, which the project summary keeps), and a
function without facts of its own runs on one node when every call of it does (`spans_one_node`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from pitfall_lint.analysis.distributed import SPAWNERS, launcher_variable_read
from pitfall_lint.analysis.rank_origin import counts_node_processes, origins, spawned_functions
from pitfall_lint.analysis.scopes import FUNCTIONS, Function, decorator_names, local_value, module_function, scope_path
from pitfall_lint.context import FileContext
from pitfall_lint.traversal import Handler, traverse

# A source without one of these words holds none of the facts below.
_WORDS = (
    b"MASTER_ADDR", b"init_method", b"dist_url", b"master_addr", b"://", b"Store", b"init_process_group", b"spawn",
    b"start_processes", b"device_count", b"TestCase", b"TestBase", b"ContinousTest",
)
# Hosts that name this machine: a peer on another node that connects there reaches its own machine.
_LOOPBACK = re.compile(r"localhost|127(?:\.\d+){3}|\[?::1\]?|0\.0\.0\.0", re.IGNORECASE)
# Names that hold a rendezvous address (`init_method`, `args.dist_url`, a `--dist-url` option, `master_addr`).
_RENDEZVOUS_NAME = re.compile(r"init_method|dist_url|master_addr|rdzv_endpoint|init_url", re.IGNORECASE)
# Folders that every machine has of its own.
_HOST_FOLDERS = ("/tmp/", "/dev/shm/", "/var/tmp/")
# A name that says it holds a temporary file (`temp_file`, `tmpdir`, `tempfile_name`; not `template` or `attempt`).
_TEMPORARY_WORD = re.compile(r"(?:^|_)(?:tmp|temp)(?:_|$|file|dir|name|path)", re.IGNORECASE)
# Test harnesses that start every process of the group on this machine (torch's, and mmengine's copy of it).
_LOCAL_HARNESSES = frozenset({"MultiProcessTestCase", "MultiProcContinousTest", "DistributedTestBase"})
_WORLD_SIZE = re.compile(r"(?:get_)?world_?size|nprocs|num_processes", re.IGNORECASE)
_SPAWN_NAMES = frozenset(name.rpartition(".")[2] for name in SPAWNERS)
_STORES = frozenset({"TCPStore", "FileStore"})
_ENVIRONMENT_WRITERS = frozenset({"setdefault", "update", "putenv"})
_MAX_DEPTH = 3

# What a place says about the rendezvous.
_HERE = "this machine"
_ENVIRONMENT = "the launcher's environment"  # env://, or no address at all: MASTER_ADDR as the launcher sets it
_ELSEWHERE = "another machine, or the user's choice"  # a remote literal, a command-line option
_UNKNOWN = "not shown here"  # a parameter's attribute, a variable computed from the input


@dataclass
class _Scope:
    kinds: set[str] = field(default_factory=set)
    master_here: bool = False  # sets MASTER_ADDR to this machine itself, which answers its own env:// rendezvous
    confined: bool = False  # run by a harness that starts it here, or asserts that the world fits this machine

    def verdict(self) -> bool | None:
        """True: one node; False: the rendezvous can be on another node; None: its own code does not tell."""
        if self.confined:
            return True
        if _ELSEWHERE in self.kinds:
            return False
        environment_answered = _ENVIRONMENT not in self.kinds or self.master_here
        if _HERE in self.kinds and _UNKNOWN not in self.kinds and environment_answered:
            return True
        return None


@dataclass(frozen=True)
class OneNodeFacts:
    whole_file: bool  # every process group the file sets up spans one node
    functions: dict[str, bool]  # scope path -> the verdict of the function's own code, where it gives one


def _last_name(node: ast.AST) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def _leading_text(value: ast.AST) -> tuple[str | None, ast.AST | None]:
    """The literal text a string expression starts with, and the first part that is not literal (None: all of it is
    literal): `f"tcp://localhost:{port}"` gives ("tcp://localhost:", port)."""
    if isinstance(value, ast.Constant):
        return (value.value, None) if isinstance(value.value, str) else (None, value)
    if isinstance(value, ast.JoinedStr):
        text = ""
        for part in value.values:
            if not isinstance(part, ast.Constant):
                return text, part.value if isinstance(part, ast.FormattedValue) else part
            text += str(part.value)
        return text, None
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add):
        left, rest = _leading_text(value.left)
        if left is None or rest is not None:
            return left, rest
        right, rest = _leading_text(value.right)
        return (left, value.right) if right is None else (left + right, rest)
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "format":
        template, _ = _leading_text(value.func.value)
        if template is not None and "{" in template:
            return template.partition("{")[0], value.args[0] if value.args else value
        return template, None if template is not None else value
    return None, value


def _temporary(ctx: FileContext, node: ast.AST) -> bool:
    """A name of a temporary file: made by `tempfile`, or held in a name that says so (`temp_file.name`, `tmpdir`)."""
    for child in ast.walk(node):
        if isinstance(child, ast.Call) and (ctx.qualified_name(child.func, []) or "").startswith("tempfile."):
            return True
        name = _last_name(child)
        if name and _TEMPORARY_WORD.search(name):
            return True
    return False


def _host_kind(host: str) -> str:
    return _HERE if _LOOPBACK.fullmatch(host) else _ELSEWHERE


def _address_kind(ctx: FileContext, value: ast.AST, function: Function | None, depth: int = 0) -> str:
    """Where a rendezvous value (a URL, a host, a store's file) points, followed through local variables."""
    text, rest = _leading_text(value)
    if text is None:
        if isinstance(value, ast.Name) and depth < _MAX_DEPTH:
            assigned = local_value(value.id, function, value.lineno, ctx.tree)
            if assigned is not None:
                return _address_kind(ctx, assigned, function, depth + 1)
        return _UNKNOWN
    scheme, separator, place = text.partition("://")
    if not separator:  # a bare host (MASTER_ADDR, a TCPStore's) or a store's path
        if text.startswith(_HOST_FOLDERS) or (text in ("", "/") and rest is not None and _temporary(ctx, rest)):
            return _HERE
        return _host_kind(text) if rest is None else _UNKNOWN
    if scheme == "env":
        return _ENVIRONMENT
    if scheme == "file":
        per_host = place.startswith(_HOST_FOLDERS) or (place in ("", "/") and rest is not None and _temporary(ctx, rest))
        return _HERE if per_host else _UNKNOWN  # a shared file system can hold one store for several nodes
    host = place.rpartition("@")[2]
    if host.startswith("["):
        host = host.partition("]")[0] + "]"
        complete = True
    else:
        complete = ":" in host or "/" in host or rest is None
        host = host.partition(":")[0].partition("/")[0]
    return _host_kind(host) if complete else _UNKNOWN


def _rendezvous_name(node: ast.AST) -> bool:
    """A variable, attribute, dict key or command-line option named for a rendezvous address."""
    name = _last_name(node)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        name = node.value.lstrip("-").replace("-", "_")
    return bool(name) and _RENDEZVOUS_NAME.search(name) is not None


def _sets_master_address(target: ast.AST) -> bool:
    """`os.environ["MASTER_ADDR"] = ...`."""
    return (
        isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant) and target.slice.value == "MASTER_ADDR"
        and isinstance(target.value, (ast.Name, ast.Attribute)) and ast.unparse(target.value).endswith("environ")
    )


def _world_size(node: ast.AST) -> bool:
    """WORLD_SIZE, `dist.get_world_size()`, or a name of the number of processes."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "int" and len(node.args) == 1:
        node = node.args[0]
    if launcher_variable_read(node) == "WORLD_SIZE":
        return True
    name = _last_name(node.func if isinstance(node, ast.Call) else node)
    return bool(name) and _WORLD_SIZE.fullmatch(name) is not None


def _asserts_world_fits(ctx: FileContext, test: ast.expr, ancestors: Sequence[ast.AST]) -> bool:
    """`assert world_size <= torch.cuda.device_count()` (or `==`, or the other way round): every rank on this node."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    left, op, right = test.left, test.ops[0], test.comparators[0]
    if _world_size(right) and counts_node_processes(ctx, left, ancestors):
        return isinstance(op, (ast.Eq, ast.GtE, ast.Gt))
    return _world_size(left) and counts_node_processes(ctx, right, ancestors) and isinstance(op, (ast.Eq, ast.LtE, ast.Lt))


class OneNodeReader:
    """Gathers the facts during a walk of the file: the rules' own walk of it (one_node_facts), or the project
    summary's, which shares its one walk. Each handler reads `ctx.ancestors`."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.scopes: dict[str, _Scope] = {}
        self.paths: dict[int, str] = {}  # scope path by function id
        self.spawned: set[str] = set()  # functions started by mp.spawn, by name
        self.spawns = False
        self.ranks: list[tuple[ast.expr, list[ast.AST]]] = []  # init_process_group's ranks, where they are read
        self.sizes: list[tuple[ast.expr, list[ast.AST]]] = []  # and its world sizes

    def handlers(self) -> dict[type[ast.AST], list[Handler]]:
        """Nothing to look at in a file that spells none of the words."""
        if not any(word in self.ctx.text.data for word in _WORDS):
            return {}
        return {
            ast.ClassDef: [self.on_class],
            ast.FunctionDef: [self.on_function],
            ast.AsyncFunctionDef: [self.on_function],
            ast.Call: [self.on_call],
            ast.Assign: [self.on_assign],
            ast.AnnAssign: [self.on_assign],
            ast.Dict: [self.on_dict],
            ast.Assert: [self.on_assert],
        }

    def where(self) -> tuple[str, Function | None]:
        """The scope path of the function the walk is in ("" at module level), and that function."""
        ancestors = self.ctx.ancestors
        for index in range(len(ancestors) - 1, -1, -1):
            function = ancestors[index]
            if isinstance(function, FUNCTIONS):
                if id(function) not in self.paths:
                    self.paths[id(function)] = scope_path(ancestors[:index], function)
                return self.paths[id(function)], function
        return "", None

    def scope(self, name: str) -> _Scope:
        return self.scopes.setdefault(name, _Scope())

    def note(self, kind: str) -> None:
        self.scope(self.where()[0]).kinds.add(kind)

    def on_class(self, node: ast.AST) -> None:
        assert isinstance(node, ast.ClassDef)
        if any(_last_name(base) in _LOCAL_HARNESSES for base in node.bases):
            for method in node.body:
                if isinstance(method, FUNCTIONS):
                    self.scope(scope_path([*self.ctx.ancestors, node], method)).confined = True

    def on_function(self, node: ast.AST) -> None:
        assert isinstance(node, FUNCTIONS)
        if any("spawn" in name.lower() for name in decorator_names(node)):  # `@torch_spawn([2])`
            self.scope(scope_path(self.ctx.ancestors, node)).confined = True

    def on_assign(self, node: ast.AST) -> None:
        assert isinstance(node, (ast.Assign, ast.AnnAssign))
        if node.value is None:
            return
        for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
            if _sets_master_address(target):
                name, function = self.where()
                kind = _address_kind(self.ctx, node.value, function)
                self.scope(name).kinds.add(kind)
                self.scopes[name].master_here |= kind == _HERE
            elif _rendezvous_name(target):
                self.note(_address_kind(self.ctx, node.value, self.where()[1]))

    def on_dict(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Dict)
        for key, value in zip(node.keys, node.values):
            if key is not None and _rendezvous_name(key):
                self.note(_address_kind(self.ctx, value, self.where()[1]))

    def on_assert(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Assert)
        if _asserts_world_fits(self.ctx, node.test, self.ctx.ancestors):
            self.scope(self.where()[0]).confined = True

    def on_call(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Call)
        last = _last_name(node.func)
        if last == "init_process_group":
            self.on_init(node)
        elif last == "add_argument":
            if any(_rendezvous_name(argument) for argument in node.args):
                self.note(_ELSEWHERE)  # the user gives the address on the command line
            return
        elif last in _STORES:
            self.note(self.store_kind(node, self.where()[1]))
            return
        elif last in _ENVIRONMENT_WRITERS and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == "MASTER_ADDR":
            # `os.environ.setdefault("MASTER_ADDR", "localhost")`: the launcher's own value wins where there is one
            self.note(_ENVIRONMENT if last == "setdefault" else _address_kind(self.ctx, node.args[-1], self.where()[1]))
            return
        elif self.may_spawn(node.func) and self.ctx.qualified_name(node.func, self.ctx.ancestors) in SPAWNERS:
            self.spawns = True
            if node.args and isinstance(node.args[0], ast.Name):
                self.spawned.add(node.args[0].id)
        for keyword in node.keywords:
            if keyword.arg is not None and _RENDEZVOUS_NAME.search(keyword.arg):
                self.note(_address_kind(self.ctx, keyword.value, self.where()[1]))

    def may_spawn(self, func: ast.expr) -> bool:
        """`mp.spawn(...)`, or a name imported as another (`from torch.multiprocessing import spawn as launch`)."""
        if _last_name(func) in _SPAWN_NAMES:
            return True
        return isinstance(func, ast.Name) and self.ctx.resolver.is_imported(func.id, self.ctx.ancestors)

    def on_init(self, call: ast.Call) -> None:
        if self.ctx.qualified_name(call.func, self.ctx.ancestors) != "torch.distributed.init_process_group":
            return
        keywords = {k.arg: k.value for k in call.keywords}
        ancestors = list(self.ctx.ancestors)
        self.ranks += [(keywords["rank"], ancestors)] if "rank" in keywords else []
        self.sizes += [(keywords["world_size"], ancestors)] if "world_size" in keywords else []
        function = self.where()[1]
        if "init_method" in keywords:
            return  # read with the other keywords
        if len(call.args) > 1:
            self.note(_address_kind(self.ctx, call.args[1], function))
        elif "store" in keywords:
            self.note(self.store_kind(keywords["store"], function))
        else:
            self.note(_UNKNOWN if None in keywords else _ENVIRONMENT)  # `**options` may hold an address

    def store_kind(self, store: ast.AST, function: Function | None) -> str:
        """A store built here: a TCPStore on this machine's address, a FileStore in a temporary folder."""
        if isinstance(store, ast.Name):
            store = local_value(store.id, function, store.lineno, self.ctx.tree) or store
        if isinstance(store, ast.Call):
            kind = _last_name(store.func)
            place = next((k.value for k in store.keywords if k.arg in ("host_name", "file_name")), store.args[0] if store.args else None)
            if kind in _STORES and place is not None:
                return _address_kind(self.ctx, place, function)
            if kind == "HashStore":
                return _HERE  # one process's memory
        return _UNKNOWN

    def facts(self) -> OneNodeFacts:
        scopes = self.scopes
        functions = {name: verdict for name, scope in scopes.items() if name and (verdict := scope.verdict()) is not None}
        by_rendezvous = any(_HERE in s.kinds for s in scopes.values()) and all(
            not (s.kinds & {_ELSEWHERE, _UNKNOWN}) and (_ENVIRONMENT not in s.kinds or s.master_here) for s in scopes.values()
        )
        confined = scopes.get("", _Scope()).confined or by_rendezvous or self.confined_by_construction()
        return OneNodeFacts(confined, functions)

    def confined_by_construction(self) -> bool:
        """The file sizes the world by the machine's devices (`init_process_group(world_size=torch.cuda.device_count())`),
        or starts its processes with mp.spawn and ranks each by its index (or names no rank, and computes none from a
        node's rank as `node_rank * gpus + index` does)."""
        ctx = self.ctx
        if any(counts_node_processes(ctx, size, ancestors) for size, ancestors in self.sizes):
            return True
        if not self.spawns:
            return False
        spawned_functions(ctx, self.spawned)  # what origins() reads the index from, found by this walk
        if self.ranks:
            return all(origins(ctx, rank, ancestors) <= {"index"} for rank, ancestors in self.ranks)
        return not any(_computes_from_index(module_function(ctx.tree, name)) for name in self.spawned)


def _computes_from_index(function: Function | None) -> bool:
    """`rank = args.nr * args.gpus + gpu` in a spawned function: a global rank made of a node's rank and the index."""
    if function is None or not function.args.args:
        return False
    index = function.args.args[0].arg

    def holds_index(node: ast.AST) -> bool:
        return any(isinstance(n, ast.Name) and n.id == index for n in ast.walk(node))

    def is_product(node: ast.AST) -> bool:
        return isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult)

    return any(
        isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)
        and (holds_index(node.right) and is_product(node.left) or holds_index(node.left) and is_product(node.right))
        for node in ast.walk(function)
    )


def one_node_facts(ctx: FileContext) -> OneNodeFacts:
    """What the file's own code says about where its process groups can reach, once per file."""
    key = ("one-node-facts",)
    if key not in ctx.memo:
        walk = ctx.for_another_walk()
        reader = OneNodeReader(walk)
        handlers = reader.handlers()
        if handlers:
            traverse(walk, handlers)
        ctx.memo[key] = reader.facts()
    return ctx.memo[key]  # type: ignore[return-value]


def spans_one_node(ctx: FileContext, ancestors: Sequence[ast.AST]) -> bool:
    """Whether the code at this place runs only in process groups that span one node: the file says so, an
    enclosing function's own code does, or (for a function whose code tells nothing) every call of it in the
    project is made where one does."""
    facts = one_node_facts(ctx)
    if facts.whole_file:
        return True
    names: list[str] = []
    innermost: tuple[Function, list[ast.AST]] | None = None
    for index, node in enumerate(ancestors):
        if isinstance(node, (ast.ClassDef, *FUNCTIONS)):
            names.append(node.name)
        if isinstance(node, FUNCTIONS):
            innermost = node, list(ancestors[:index])
    for end in range(len(names), 0, -1):
        verdict = facts.functions.get(".".join(names[:end]))
        if verdict is not None:
            return verdict
    return innermost is not None and bool(ctx.project.runs_on_one_node(*innermost))
