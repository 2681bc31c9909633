"""Phase 1 of the project model: what one file tells the others, read from its ast once and cached by content.

A summary holds no ast and no path, only names as the file spells them after alias resolution ("refs"):
`Net` for a definition of the file, `models.base.EncoderBase` or `.base.EncoderBase` for an import,
`Net.forward` for a method called through `self`, `*.save` for a call of a same-file function through any
other receiver. Phase 2 (project/model.py) resolves refs across files. The same content gives the same
summary wherever the file lives, which is what lets the cache key it by content alone.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from pitfall_lint.analysis.distributed import SETUP_NODES, SPAWNERS, may_set_up_distributed, setup_kind
from pitfall_lint.analysis.launch_modes import may_run_outside_distributed_launch, runs_outside_distributed_launch
from pitfall_lint.analysis.modules import creates_parameters, method_kind, same_module
from pitfall_lint.analysis.one_node import OneNodeReader
from pitfall_lint.analysis.ranks import depends_on_rank, is_locally_restricted
from pitfall_lint.analysis.scopes import FUNCTIONS, decorator_names, definition_name, enclosing_function, local_value, scope_path, self_name
from pitfall_lint.analysis.seeding import GLOBAL_SEEDERS, helper_seeding
from pitfall_lint.analysis.wrapper_backward import wrap_takes_part_in_backward
from pitfall_lint.analysis.wrappers import (
    checkpoint_key,
    loaded_checkpoint,
    restores_training_state,
    saved_wrapper_states,
    wrapper_receiving,
)
from pitfall_lint.context import FileContext
from pitfall_lint.project.store import SUMMARY_FORMAT
from pitfall_lint.traversal import Handler, traverse

UNKNOWN = "?"  # a wrapped or returned module whose class cannot be told from the source
_DATA_PARALLEL = frozenset({"torch.nn.DataParallel", "torch.nn.parallel.data_parallel"})
_OTHER_WRAPPERS = {
    "torch.nn.parallel.DistributedDataParallel": "DistributedDataParallel",
    "torch.distributed.fsdp.FullyShardedDataParallel": "FullyShardedDataParallel",
}
# Decorators that keep the signature of what they decorate.
_SIGNATURE_KEEPING = frozenset({"staticmethod", "classmethod", "record", "functools.wraps"})
# Functions that return a module running the code of the one they are given: `torch.compile(Net())` is still a Net's.
_RUNS_THE_MODULE = frozenset({"torch.compile"})
# Roots of refs that never name a project definition: not worth a place in the summary.
_EXTERNAL_ROOTS = frozenset(
    {
        "torch", "numpy", "np", "math", "os", "sys", "re", "json", "logging", "typing", "collections", "functools",
        "itertools", "time", "random", "pathlib", "warnings", "copy", "argparse", "subprocess", "shutil", "io",
        "dataclasses", "abc", "enum", "contextlib", "inspect", "types", "pickle", "glob", "tempfile", "datetime",
    }
)
_LIGHTNING_ROOTS = ("lightning.", "pytorch_lightning.", "lightning_fabric.")
_PATH_BUILDERS = frozenset({"join", "Path", "PurePath", "format", "str", "abspath", "realpath", "expanduser", "joinpath"})


def _last_name(node: ast.AST) -> str:
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
_MAX_TRACE = 3


@dataclass(frozen=True, slots=True)
class ClassFacts:
    name: str  # the scope path: `Net`, or `Outer.Inner`
    line: int
    bases: tuple[str, ...]  # refs
    methods: tuple[tuple[str, str], ...]  # (name, kind) of the methods defined in its body
    builds: tuple[str, ...]  # refs of what its methods call: the submodules it may hold
    parameters: bool  # its methods build trainable parameters of torch's (`nn.Linear(...)`, `nn.Parameter(t)`)
    reads: tuple[str, ...] = ()  # the names its methods read on the instance (`self.x`): what its code uses


@dataclass(frozen=True, slots=True)
class CallSite:
    caller: str  # the scope path of the calling function, "" at module level
    callee: str  # ref
    line: int
    guarded: bool  # restricted to one rank, or to a single-process run, by the caller's own code
    per_rank: tuple[str, ...] = ()  # the arguments (position or keyword) whose value differs from rank to rank
    # The arguments given as literals (`safe_serialization=True`), each with its truth: a branch of the callee on
    # that parameter that the literal does not take never runs for this call.
    constants: tuple[tuple[str, bool], ...] = ()
    # The refs of the functions handed over as arguments (`spawn_multi_process(2, "gloo", self._check)`): the callee
    # runs them, so they run where it does.
    handed: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class WrapSite:
    kind: str  # "DataParallel", "DistributedDataParallel", ..., or the framework that wraps ("transformers Trainer")
    line: int
    target: str  # ref of what builds the wrapped module, UNKNOWN when the source cannot tell
    caller: str
    splits_batch: bool  # DataParallel scatters along dim 0
    column: int  # of the call, which tells apart two wraps on one line (`DP(a()) if fast else DP(b())`)
    # DDP's find_unused_parameters / static_graph: "True", "False" or "?" (computed); and ("backward", "False") for a
    # wrapper that never takes part in a backward (frozen as a whole, or run without grad): DDP never waits for it.
    options: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Signature:
    """How a module-level function or a method of a module-level class takes its arguments."""

    name: str  # the scope path: `train`, or `Trainer.run`
    line: int
    kind: str  # "function", or the method kind: "method", "static", "class", "property"
    positional: tuple[str, ...]  # every positional parameter, `self` included
    defaults: int  # how many of them have a default
    varargs: bool
    keyword_only: tuple[str, ...]  # the keyword-only parameters without a default
    unread: tuple[str, ...]  # the positional parameters its body never reads
    decorated: bool  # by something that may change how it takes its arguments


@dataclass(frozen=True, slots=True)
class FileSummary:
    classes: tuple[ClassFacts, ...] = ()
    functions: tuple[tuple[str, int], ...] = ()  # (scope path, line) of every function and method
    imports: tuple[tuple[str, str], ...] = ()  # module-level (local name, ref): what the file re-exports
    returns: tuple[tuple[str, str], ...] = ()  # (function, ref) of the modules a function returns
    calls: tuple[CallSite, ...] = ()
    wraps: tuple[WrapSite, ...] = ()
    distributed: tuple[tuple[str, int], ...] = ()  # (what sets up distributed training, line)
    spawns: tuple[tuple[str, int], ...] = ()  # (ref of the spawned function, line)
    wrapper_saves: tuple[tuple[str, int], ...] = ()  # (checkpoint file name pattern, line)
    signatures: tuple[Signature, ...] = ()
    # (scope path, verdict) of the functions whose own code tells whether their process groups span one node only,
    # and ("", True) when the whole file's do (analysis/one_node.py)
    one_node: tuple[tuple[str, bool], ...] = ()
    bare_loads: tuple[tuple[str, int], ...] = ()  # (checkpoint file name pattern, line) loaded into no sure wrapper
    # (name, line, how) of what the module offers its importers: "__all__" (listed there), "imported" (a name a
    # module-level `from` import of the project binds, which an `__init__.py` re-exports), "star" (`from .x import *`:
    # the name is the module, as spelled).
    exports: tuple[tuple[str, int, str], ...] = ()
    # (function, how, parameter, position) of each module-level function that seeds torch's, numpy's or random's
    # global generator: "as-given" with that parameter, or "per-rank" (parameter "", position -1) with the rank added
    seeders: tuple[tuple[str, str, str, int], ...] = ()

    def to_row(self) -> list[object]:
        """Plain lists for the JSON cache."""
        return [SUMMARY_FORMAT, *([_plain(item) for item in field] for field in astuple_shallow(self))]

    @staticmethod
    def from_row(row: list) -> FileSummary:
        if row[0] != SUMMARY_FORMAT:
            raise ValueError("another summary format")
        classes, functions, imports, returns, calls, wraps, distributed, spawns, saves, signatures, one_node, bare_loads, exports, seeders = row[1:]

        def pairs(rows: list) -> tuple[tuple[Any, Any], ...]:
            return tuple((a, b) for a, b in rows)

        return FileSummary(
            classes=tuple(
                ClassFacts(name, line, tuple(bases), tuple((m, k) for m, k in methods), tuple(builds), parameters, tuple(reads))
                for name, line, bases, methods, builds, parameters, reads in classes
            ),
            functions=pairs(functions),
            imports=pairs(imports),
            returns=pairs(returns),
            calls=tuple(
                CallSite(caller, callee, line, guarded, tuple(per_rank), pairs(constants), tuple(handed))
                for caller, callee, line, guarded, per_rank, constants, handed in calls
            ),
            wraps=tuple(WrapSite(*w[:-1], pairs(w[-1])) for w in wraps),
            distributed=pairs(distributed),
            spawns=pairs(spawns),
            wrapper_saves=pairs(saves),
            signatures=tuple(
                Signature(name, line, kind, tuple(positional), defaults, varargs, tuple(keywords), tuple(unread), decorated)
                for name, line, kind, positional, defaults, varargs, keywords, unread, decorated in signatures
            ),
            one_node=pairs(one_node),
            bare_loads=pairs(bare_loads),
            exports=tuple((name, line, how) for name, line, how in exports),
            seeders=tuple((function, how, parameter, position) for function, how, parameter, position in seeders),
        )


def astuple_shallow(summary: FileSummary) -> list[tuple]:
    return [getattr(summary, f.name) for f in fields(summary)]


_FACT_FIELDS: dict[type, tuple[str, ...]] = {
    kind: tuple(f.name for f in fields(kind)) for kind in (ClassFacts, CallSite, WrapSite, Signature)
}


def _plain(item: object) -> list:
    """A fact as a list of its fields: they hold only strings, numbers and tuples of them, so no copy is made of
    those (dataclasses.astuple copied every nested tuple, a tenth of the cost of a summary)."""
    names = _FACT_FIELDS.get(type(item))
    return [getattr(item, name) for name in names] if names is not None else list(item)  # type: ignore[call-overload]


class _Reader:
    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        names = _DEFINITION.findall(ctx.text.data)
        self.definitions = {name.decode() for _, name in names}
        self.function_names = {name.decode() for kind, name in names if kind == b"def"}
        self.star_module = _star_module(ctx.tree) if b"import *" in ctx.text.data else None

    def callee_ref(self, func: ast.expr, ancestors: Sequence[ast.AST], qualified: str | None) -> str | None:
        """The ref of a called name (`qualified`: its name resolved), when it could name a project definition."""
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            method = enclosing_function(ancestors)
            owner = _owner_class(ancestors)
            if method is not None and owner is not None and func.value.id == self_name(method):
                return f"{scope_path(owner[0], owner[1])}.{func.attr}"
        if qualified is not None and qualified.partition(".")[0] not in _EXTERNAL_ROOTS:
            root = func
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and (root.id in self.definitions or self.ctx.resolver.is_imported(root.id, ancestors)):
                return qualified  # bound by an import, or a definition of this file
        if qualified is not None and qualified.partition(".")[0] in _EXTERNAL_ROOTS:
            return None  # `torch.save(...)` never calls the file's own `save`
        if isinstance(func, ast.Attribute) and func.attr in self.function_names:
            return f"*.{func.attr}"  # a same-file function through some other receiver
        module = self.star_module
        if module is not None and isinstance(func, ast.Name) and qualified == func.id and self.unbound(func.id):
            # a name only `from utils import *` (or `from . import *`) can bind
            return f"{module}{func.id}" if module.endswith(".") else f"{module}.{func.id}"
        return None

    def unbound(self, name: str) -> bool:
        """Neither defined in the file nor a builtin: a name the file can only have from a star import."""
        return name not in self.definitions and not hasattr(builtins, name)

    def built_ref(self, value: ast.AST | None, ancestors: Sequence[ast.AST], depth: int = 0) -> str:
        """The ref of the call that builds the module `value` holds, UNKNOWN when it cannot be told."""
        while isinstance(value, ast.Call):
            value = same_module(value)
            if isinstance(value, ast.Call) and value.args and self.ctx.qualified_name(value.func, ancestors) in _RUNS_THE_MODULE:
                value = value.args[0]
            else:
                break
        if isinstance(value, ast.Call):
            root = value.func
            while isinstance(root, ast.Attribute):
                root = root.value
            # Only a call through an import or a definition of this file says what it builds: `task.build_model(cfg)`
            # or a function held in a variable does not.
            if not (isinstance(root, ast.Name) and (root.id in self.definitions or self.ctx.resolver.is_imported(root.id, ancestors))):
                return UNKNOWN
            return self.ctx.qualified_name(value.func, ancestors) or UNKNOWN
        if isinstance(value, ast.Name) and depth < _MAX_TRACE:
            function = enclosing_function(ancestors)
            assigned = local_value(value.id, function, value.lineno, None if function else self.ctx.tree)
            if assigned is not None:
                return self.built_ref(assigned, ancestors, depth + 1)
        return UNKNOWN


_DEFINITION = re.compile(rb"\b(def|class)\s+([A-Za-z_]\w*)")


def _star_module(tree: ast.Module) -> str | None:
    """The module that the file's one `from <module> import *` of something not external names (`utils`): its
    names are then the file's unbound ones. With several, which binds a name cannot be told."""
    found = [
        "." * statement.level + (statement.module or "")
        for statement in tree.body
        if isinstance(statement, ast.ImportFrom) and any(alias.name == "*" for alias in statement.names)
    ]
    inside = [module for module in found if module.lstrip(".").partition(".")[0] not in _EXTERNAL_ROOTS]
    return inside[0] if len(found) == 1 and inside else None


def _owner_class(ancestors: Sequence[ast.AST]) -> tuple[list[ast.AST], ast.ClassDef] | None:
    """The innermost class, with its own ancestors."""
    for index in range(len(ancestors) - 1, -1, -1):
        if isinstance(ancestors[index], ast.ClassDef):
            return list(ancestors[:index]), ancestors[index]  # type: ignore[return-value]
    return None


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


# The DistributedDataParallel options that decide what it tolerates: unused parameters, reentrant backward passes.
_DDP_OPTIONS = ("find_unused_parameters", "static_graph")


def wrap_options(call: ast.Call) -> tuple[tuple[str, str], ...]:
    """DDP's graph options as given: "True"/"False" for a literal, "?" for a computed value or `**kwargs`."""
    found = []
    spread = any(k.arg is None for k in call.keywords)
    for name in _DDP_OPTIONS:
        value = _keyword(call, name)
        if value is None:
            if spread:
                found.append((name, "?"))
        elif isinstance(value, ast.Constant) and isinstance(value.value, bool):
            found.append((name, str(value.value)))
        else:
            found.append((name, "?"))
    return tuple(found)


def _splits_batch(call: ast.Call, position: int) -> bool:
    dim = _keyword(call, "dim")
    if dim is None and len(call.args) > position:
        dim = call.args[position]
    return dim is None or (isinstance(dim, ast.Constant) and dim.value == 0)


def _framework_wrap(qualified: str, call: ast.Call, reader: _Reader, ancestors: Sequence[ast.AST]) -> WrapSite | None:
    """Frameworks that wrap the model in nn.DataParallel themselves."""
    function = enclosing_function(ancestors)
    caller = definition_name(function, ancestors) if function is not None else ""
    if qualified.startswith("transformers.") and qualified.rpartition(".")[2] in ("Trainer", "Seq2SeqTrainer"):
        model = _keyword(call, "model") or (call.args[0] if call.args else None)
        # Trainer wraps its model in nn.DataParallel when it sees several GPUs and no distributed launch.
        return WrapSite("transformers Trainer", call.lineno, reader.built_ref(model, ancestors), caller, True, call.col_offset, ())
    # Lightning's Trainer lost its "dp" strategy in 2.0; Fabric keeps one, for the modules given to `setup`.
    if qualified.startswith(_LIGHTNING_ROOTS) and qualified.rpartition(".")[2] == "Fabric":
        value = _keyword(call, "strategy")
        if isinstance(value, ast.Constant) and value.value == "dp":
            return WrapSite('Lightning Fabric(strategy="dp")', call.lineno, UNKNOWN, caller, True, call.col_offset, ())
    return None


class _Builder:
    """Collects the summary during one walk of the file; each handler reads `ctx.ancestors`."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.reader = _Reader(ctx)
        self.classes: dict[int, tuple[str, ast.ClassDef, list[str]]] = {}
        self.parametrised: set[int] = set()  # ids of the classes that build parameters
        self.functions: list[tuple[str, int]] = []
        self.returns: list[tuple[str, str]] = []
        self.calls: list[CallSite] = []
        self.wraps: list[WrapSite] = []
        self.spawns: list[tuple[str, int]] = []
        self.saves: list[tuple[str, int]] = []
        self.bare_loads: list[tuple[str, int]] = []
        self.setups: list[tuple[str, int]] = []
        self.seeders: list[tuple[str, str, str, int]] = []
        # Calls on one side of an `if` that may be a launch-mode switch: (index in `calls`, call, ancestors).
        self.mode_switched: list[tuple[int, ast.Call, list[ast.AST]]] = []
        # A module-level function or a method of a module-level class (what can be started in a process), with
        # the names read anywhere in it (decorators and defaults included), gathered by the one walk.
        self.signed: dict[int, tuple[ast.FunctionDef | ast.AsyncFunctionDef, str, str, set[str]]] = {}
        self.callers: dict[int, str] = {}
        # Each method's instance (its first parameter) and class, and the names read on instances, by class: the
        # names any code inside one of its methods reads as `<instance>.x` or `getattr(<instance>, "x")`.
        self.instances: dict[int, tuple[str, int]] = {}
        self.instance_names: set[str] = set()
        self.instance_reads: dict[int, set[str]] = {}
        self.one_node = OneNodeReader(ctx)

    def handlers(self) -> dict[type[ast.AST], list[Handler]]:
        found: dict[type[ast.AST], list[Handler]] = {
            ast.ClassDef: [self.on_class],
            ast.FunctionDef: [self.on_function],
            ast.AsyncFunctionDef: [self.on_function],
            ast.Return: [self.on_return],
            ast.Call: [self.on_call],
            ast.Name: [self.on_name],
        }
        # Only a file with one of the set-up words can set up distributed training: the others need no look.
        if may_set_up_distributed(self.ctx.text.data):
            for node_type in SETUP_NODES:
                found.setdefault(node_type, []).append(self.on_setup)
        for node_type, handlers in self.one_node.handlers().items():
            found.setdefault(node_type, []).extend(handlers)
        return found

    def on_setup(self, node: ast.AST) -> None:
        kind = setup_kind(self.ctx, node)
        if kind is not None:
            self.setups.append((kind, getattr(node, "lineno", 1)))

    def on_class(self, node: ast.AST) -> None:
        assert isinstance(node, ast.ClassDef)
        self.classes[id(node)] = (scope_path(self.ctx.ancestors, node), node, [])

    def on_function(self, node: ast.AST) -> None:
        assert isinstance(node, FUNCTIONS)
        ancestors = self.ctx.ancestors
        self.functions.append((scope_path(ancestors, node), node.lineno))
        instance = self_name(node) if isinstance(ancestors[-1], ast.ClassDef) else None
        if instance is not None:
            self.instances[id(node)] = (instance, id(ancestors[-1]))
            self.instance_names.add(instance)
        scopes = [a for a in ancestors if isinstance(a, _SCOPES)]
        # Only these can be started in a process: spawn pickles the function by its qualified name.
        if not scopes or (len(scopes) == 1 and isinstance(scopes[0], ast.ClassDef)):
            self.signed[id(node)] = (node, scope_path(ancestors, node), "function" if not scopes else method_kind(node), set())

    def on_name(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Name)
        if not isinstance(node.ctx, ast.Load):
            return
        if node.id in self.instance_names:
            parent = self.ctx.ancestors[-1]
            if isinstance(parent, ast.Attribute) and parent.value is node and isinstance(parent.ctx, ast.Load):
                self.note_instance_read(node.id, parent.attr)
        # Only the first two scopes can be a signed function: a module-level one, or a method of a module-level class.
        scopes = 0
        for scope in self.ctx.ancestors:
            if isinstance(scope, _SCOPES):
                signed = self.signed.get(id(scope))
                if signed is not None:
                    signed[3].add(node.id)
                    return
                scopes += 1
                if scopes == 2:
                    return

    def on_return(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Return)
        ancestors = self.ctx.ancestors
        if node.value is not None and enclosing_function(ancestors) is not None:
            caller = self.caller(ancestors)
            value = same_module(node.value)
            if isinstance(value, ast.Call) and self.ctx.qualified_name(value.func, ancestors) in _RUNS_THE_MODULE:
                # `return torch.compile(Net())` returns both: a compiled module, and one that runs Net's code.
                self.returns.append((caller, self.ctx.qualified_name(value.func, ancestors) or UNKNOWN))
            self.returns.append((caller, self.reader.built_ref(node.value, ancestors)))

    def note_instance_read(self, instance: str, name: str) -> None:
        """`<instance>.name` read inside a method (at any depth) whose instance has that name: a read of its class."""
        for scope in self.ctx.ancestors:
            method = self.instances.get(id(scope))
            if method is not None and method[0] == instance:
                self.instance_reads.setdefault(method[1], set()).add(name)

    def on_call(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Call)
        ctx, reader, ancestors = self.ctx, self.reader, self.ctx.ancestors
        func, arguments = node.func, node.args
        if (
            isinstance(func, ast.Name) and func.id == "getattr" and len(arguments) > 1 and isinstance(arguments[0], ast.Name)
            and arguments[0].id in self.instance_names and isinstance(arguments[1], ast.Constant) and isinstance(arguments[1].value, str)
        ):
            self.note_instance_read(arguments[0].id, arguments[1].value)
        qualified = ctx.qualified_name(node.func, ancestors) or ""
        caller = self.caller(ancestors)
        if qualified in _DATA_PARALLEL:
            target = _keyword(node, "module") or (node.args[0] if node.args else None)
            position = 3 if qualified == "torch.nn.DataParallel" else 4
            built = reader.built_ref(target, ancestors)
            self.wraps.append(WrapSite("DataParallel", node.lineno, built, caller, _splits_batch(node, position), node.col_offset, ()))
        elif qualified in _OTHER_WRAPPERS:
            target = _keyword(node, "module") or (node.args[0] if node.args else None)
            kind = _OTHER_WRAPPERS[qualified]
            options = wrap_options(node) if kind == "DistributedDataParallel" else ()
            if kind == "DistributedDataParallel" and not wrap_takes_part_in_backward(ctx, node, ancestors):
                options += (("backward", "False"),)
            built = reader.built_ref(target, ancestors)
            self.wraps.append(WrapSite(kind, node.lineno, built, caller, False, node.col_offset, options))
        elif qualified in SPAWNERS and node.args:
            target = node.args[0]
            spawned = reader.callee_ref(target, ancestors, ctx.qualified_name(target, ancestors)) if isinstance(target, (ast.Name, ast.Attribute)) else None
            if spawned is not None:
                self.spawns.append((spawned, node.lineno))
        elif qualified == "torch.save" and len(node.args) > 1 and saved_wrapper_states(ctx, node, ancestors):
            key = checkpoint_key(ctx, node.args[1], ancestors)
            if key is not None:
                self.saves.append((key, node.lineno))
        elif isinstance(node.func, ast.Attribute) and node.func.attr == "load_state_dict" and node.args:
            key = loaded_checkpoint(ctx, node.args[0], ancestors, node.lineno)
            if key is not None and wrapper_receiving(ctx, node, ancestors) is None and not restores_training_state(ctx, node, ancestors):
                self.bare_loads.append((key, node.lineno))
        elif qualified in GLOBAL_SEEDERS:
            seeding = helper_seeding(ctx, node, ancestors)
            if seeding is not None:
                self.seeders.append((caller, *seeding))
        elif qualified:
            framework = _framework_wrap(qualified, node, reader, ancestors)
            if framework is not None:
                self.wraps.append(framework)
        if creates_parameters(qualified or None, node):
            owner = _owner_class(ancestors)
            if owner is not None:
                self.parametrised.add(id(owner[1]))
        callee = reader.callee_ref(node.func, ancestors, qualified or None) if isinstance(node.func, (ast.Name, ast.Attribute)) else None
        if callee is None:
            return
        passed: list[tuple[str, ast.expr]] = [
            *((str(i), a) for i, a in enumerate(node.args)), *((k.arg, k.value) for k in node.keywords if k.arg)
        ]
        per_rank = tuple(
            slot for slot, argument in passed if self._path_like(argument, ancestors) and depends_on_rank(ctx, argument, ancestors)
        )
        # Positions after a `*args` are not the parameters' own.
        spread = next((i for i, a in enumerate(node.args) if isinstance(a, ast.Starred)), len(node.args))
        constants = tuple(
            (slot, bool(argument.value))
            for slot, argument in passed
            if isinstance(argument, ast.Constant) and not (slot.isdigit() and int(slot) >= spread)
        )
        restricted = is_locally_restricted(ctx, node, ancestors)
        if not restricted and may_run_outside_distributed_launch(ancestors):
            # Told once every set-up of the file is known: at the end of the walk.
            self.mode_switched.append((len(self.calls), node, list(ancestors)))
        handed = tuple(
            ref
            for _, argument in passed
            if isinstance(argument, (ast.Name, ast.Attribute))
            and (ref := reader.callee_ref(argument, ancestors, ctx.qualified_name(argument, ancestors) or None)) is not None
        )
        self.calls.append(CallSite(caller, callee, node.lineno, restricted, per_rank, constants, handed))
        owner = _owner_class(ancestors)
        if owner is not None and not callee.startswith("*."):
            self.classes[id(owner[1])][2].append(callee)

    def _path_like(self, argument: ast.AST, ancestors: Sequence[ast.AST]) -> bool:
        """An argument that can be a file path (what a per-rank argument is about): an f-string, string or path
        arithmetic, a path-building call, or a variable last set to one of those."""
        if isinstance(argument, ast.Name):
            function = enclosing_function(ancestors)
            argument = local_value(argument.id, function, argument.lineno, None if function else self.ctx.tree) or argument
        if isinstance(argument, (ast.JoinedStr, ast.BinOp)):
            return True
        return isinstance(argument, ast.Call) and _last_name(argument.func) in _PATH_BUILDERS

    def caller(self, ancestors: Sequence[ast.AST]) -> str:
        """The scope path of the function the walk is in, "" at module level; once per function."""
        function = enclosing_function(ancestors)
        if function is None:
            return ""
        if id(function) not in self.callers:
            self.callers[id(function)] = definition_name(function, ancestors)
        return self.callers[id(function)]

    def _single_process_calls(self) -> tuple[CallSite, ...]:
        """The calls, those on the single-process side of a launch-mode switch counted as restricted."""
        calls = list(self.calls)
        setup_lines = [line for _, line in self.setups]
        for index, node, ancestors in self.mode_switched if setup_lines else ():
            if runs_outside_distributed_launch(self.ctx, node, ancestors, setup_lines):
                calls[index] = replace(calls[index], guarded=True)
        return tuple(calls)

    def summary(self) -> FileSummary:
        ctx = self.ctx
        one_node = self.one_node.facts()
        return FileSummary(
            classes=tuple(
                ClassFacts(
                    name,
                    cls.lineno,
                    tuple(ctx.qualified_name(base, []) or UNKNOWN for base in cls.bases),
                    tuple((f.name, method_kind(f)) for f in cls.body if isinstance(f, FUNCTIONS)),
                    tuple(dict.fromkeys(builds)),
                    id(cls) in self.parametrised,
                    tuple(sorted(self.instance_reads.get(id(cls), ()))),
                )
                for name, cls, builds in self.classes.values()
            ),
            functions=tuple(self.functions),
            imports=tuple(_module_imports(ctx)),
            returns=tuple(dict.fromkeys(self.returns)),
            calls=self._single_process_calls(),
            wraps=tuple(self.wraps),
            distributed=tuple(self.setups),
            spawns=tuple(self.spawns),
            wrapper_saves=tuple(self.saves),
            signatures=tuple(_signature(*signed) for signed in self.signed.values()),
            one_node=(("", True),) * one_node.whole_file + tuple(sorted(one_node.functions.items())),
            bare_loads=tuple(self.bare_loads),
            exports=tuple(_exports(ctx)),
            seeders=tuple(dict.fromkeys(self.seeders)),
        )


_SCOPES = (ast.ClassDef, *FUNCTIONS)


def _signature(function: ast.FunctionDef | ast.AsyncFunctionDef, name: str, kind: str, read: set[str]) -> Signature:
    arguments = function.args
    positional = tuple(a.arg for a in [*arguments.posonlyargs, *arguments.args])
    required_keywords = tuple(a.arg for a, default in zip(arguments.kwonlyargs, arguments.kw_defaults) if default is None)
    decorated = any(d not in _SIGNATURE_KEEPING and not d.endswith(".record") for d in decorator_names(function))
    return Signature(
        name, function.lineno, kind, positional, len(arguments.defaults), arguments.vararg is not None, required_keywords,
        tuple(p for p in positional if p not in read), decorated,
    )


def summarize(ctx: FileContext) -> FileSummary:
    walk = ctx.for_another_walk()
    # A summary is of this file alone (it is cached by this file's content): no question to the project, and no
    # fact shared with the rules' walk, where the project's answers may have shaped it.
    walk.project = ctx.project.offline()
    walk.memo = {}
    builder = _Builder(walk)
    traverse(walk, builder.handlers())
    return builder.summary()


def _exports(ctx: FileContext) -> list[tuple[str, int, str]]:
    """What the module offers its importers, read from its module-level statements alone."""
    found = []
    for statement in ctx.tree.body:
        if isinstance(statement, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and isinstance(statement.value, (ast.List, ast.Tuple)):
                found += [
                    (e.value, e.lineno, "__all__") for e in statement.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
                ]
        elif isinstance(statement, ast.ImportFrom) and (statement.level or (statement.module or "").partition(".")[0] not in _EXTERNAL_ROOTS):
            if any(a.name == "*" for a in statement.names):
                found.append(("." * statement.level + (statement.module or ""), statement.lineno, "star"))
            else:
                found += [(a.asname or a.name, statement.lineno, "imported") for a in statement.names]
    return found


def _module_imports(ctx: FileContext) -> list[tuple[str, str]]:
    found = []
    for statement in ctx.tree.body:
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            for alias in statement.names:
                local = alias.asname or alias.name.partition(".")[0]
                if alias.name != "*":
                    ref = ctx.resolver.qualified_name(ast.Name(local), [])
                    if ref is not None:
                        found.append((local, ref))
    return found
