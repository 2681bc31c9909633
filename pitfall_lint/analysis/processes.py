"""Calls that start worker processes (torch's spawn, pools, process pool executors, DataLoader workers) or build
`Process` objects to start, and the start method each one uses.

The start method decides whether a child imports the main module again: `fork` copies the parent and imports
nothing; `spawn` starts a fresh interpreter that imports the main module to find its target; `forkserver` forks
children from a server process that also imports the main module. The default is `spawn` on macOS and Windows,
`fork` on Linux up to Python 3.13 and `forkserver` on Linux from Python 3.14.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

from pitfall_lint.analysis.ranks import ancestors_of
from pitfall_lint.analysis.samplers import DATA_LOADERS, call_argument
from pitfall_lint.analysis.scopes import FUNCTIONS, is_main_guard
from pitfall_lint.analysis.training import walk_same_scope
from pitfall_lint.context import FileContext
from pitfall_lint.traversal import nodes_of

LAUNCHERS = frozenset(
    {
        "torch.multiprocessing.spawn",
        "torch.multiprocessing.start_processes",
        "multiprocessing.Pool",
        "multiprocessing.pool.Pool",
        "torch.multiprocessing.Pool",
        "torch.multiprocessing.pool.Pool",
        "torch_xla.distributed.xla_multiprocessing.spawn",
    }
)
PROCESS_CLASSES = frozenset({"multiprocessing.Process", "torch.multiprocessing.Process"})
# Executors start their processes on the first `submit` or `map`, not when built.
EXECUTORS = frozenset({"concurrent.futures.ProcessPoolExecutor", "concurrent.futures.process.ProcessPoolExecutor"})
EXECUTOR_METHODS = frozenset({"submit", "map"})
_CONTEXT_FACTORIES = frozenset({"multiprocessing.get_context", "torch.multiprocessing.get_context"})
_STARTERS = LAUNCHERS | PROCESS_CLASSES
_SET_START_METHOD = frozenset({"multiprocessing.set_start_method", "torch.multiprocessing.set_start_method"})
START_METHODS = frozenset({"fork", "spawn", "forkserver"})
DEFAULT = "default"  # the platform's start method: what a call that names none gets
UNKNOWN = "unknown"  # a method chosen by a value this analysis cannot read
# torch's launchers ask for `spawn` themselves: mp.spawn always, the others unless their `start_method=` (given at
# this position, where it can be) says otherwise.
_ALWAYS_SPAWN = "torch.multiprocessing.spawn"
_START_METHOD_POSITIONS = {
    "torch.multiprocessing.start_processes": 5,
    "torch_xla.distributed.xla_multiprocessing.spawn": None,
}
# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, collate_fn, pin_memory, drop_last,
# timeout, worker_init_fn, multiprocessing_context, ...)
_NUM_WORKERS_POSITION = 5
_LOADER_CONTEXT_POSITION = 11
_EXECUTOR_CONTEXT_POSITION = 1  # ProcessPoolExecutor(max_workers, mp_context, ...)
_CPU_COUNT = re.compile(r"(^|\.)(cpu_count|process_cpu_count)$")


def process_call_name(ctx: FileContext, call: ast.Call, ancestors: Sequence[ast.AST] | None = None) -> str | None:
    """The qualified name of the call, in the scope being visited (or of the given ancestors); a context's
    `.Process`/`.Pool` reads as `multiprocessing.Process`/`multiprocessing.Pool`
    (`multiprocessing.get_context("spawn").Pool(2)`)."""
    func = call.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call):
        if ctx.qualified_name(func.value.func, ancestors) in _CONTEXT_FACTORIES:
            return f"multiprocessing.{func.attr}"
    return ctx.qualified_name(func, ancestors)


def launches_or_builds_processes(ctx: FileContext, call: ast.Call, ancestors: Sequence[ast.AST] | None = None) -> bool:
    return process_call_name(ctx, call, ancestors) in _STARTERS


def is_pool(qualified: str | None) -> bool:
    return qualified is not None and qualified.rpartition(".")[2] == "Pool" and qualified in LAUNCHERS


def _module_value(ctx: FileContext, node: ast.expr) -> ast.expr:
    """The value a name of the module is bound to when the module binds it once, by a plain assignment
    (`NUM_WORKERS = 4`, `CONTEXT = mp.get_context("spawn")`); the node itself otherwise."""
    if not isinstance(node, ast.Name) or _bound_in_function(ctx, node):
        return node
    key = ("processes-module-values",)
    if key not in ctx.memo:
        values: dict[str, ast.expr | None] = {}
        for statement in ctx.tree.body:
            targets = statement.targets if isinstance(statement, ast.Assign) else []
            for target in targets:
                if isinstance(target, ast.Name):
                    values[target.id] = statement.value if target.id not in values else None  # type: ignore[union-attr]
        ctx.memo[key] = values
    found = ctx.memo[key].get(node.id)  # type: ignore[attr-defined]
    return found if found is not None else node


def _bound_in_function(ctx: FileContext, name: ast.Name) -> bool:
    """Whether the function the name is read in binds it itself (a parameter, an assignment)."""
    function = next((a for a in reversed(ancestors_of(ctx, name)) if isinstance(a, FUNCTIONS)), None)
    if function is None:
        return False
    arguments = function.args
    every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg]
    stores = (n for n in walk_same_scope(function.body) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    return any(a is not None and a.arg == name.id for a in every) or any(n.id == name.id for n in stores)


def _method_named(ctx: FileContext, node: ast.expr | None, ancestors: Sequence[ast.AST] | None) -> str:
    """The start method a value names: a literal (`"spawn"`), an inline `get_context("spawn")`, or a module-level
    name bound to one of those; DEFAULT for None and `get_context()`, UNKNOWN for anything else."""
    if node is None or (isinstance(node, ast.Constant) and node.value is None):
        return DEFAULT
    node = _module_value(ctx, node)
    if isinstance(node, ast.Call) and ctx.qualified_name(node.func, ancestors) in _CONTEXT_FACTORIES:
        if not node.args and not node.keywords:
            return DEFAULT
        node = call_argument(node, "method", 0) or node
    if isinstance(node, ast.Constant) and node.value in START_METHODS:
        return node.value  # type: ignore[return-value]
    return UNKNOWN


def requested_start_method(
    ctx: FileContext, call: ast.Call, qualified: str | None, ancestors: Sequence[ast.AST] | None = None
) -> str:
    """The start method a call that starts processes asks for: `spawn` for torch's launchers (or the
    `start_method=` given to start_processes), the method of an inline `get_context(...)`, the
    `multiprocessing_context=` of a DataLoader, the `mp_context=` of an executor; else the file's own
    `set_start_method(...)` at import time, else DEFAULT."""
    if qualified == _ALWAYS_SPAWN:
        return "spawn"
    if qualified in _START_METHOD_POSITIONS:
        asked = call_argument(call, "start_method", _START_METHOD_POSITIONS[qualified])
        return "spawn" if asked is None else _method_named(ctx, asked, ancestors)
    func = call.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call):
        method = _method_named(ctx, func.value, ancestors)
    elif qualified in EXECUTORS:
        method = _method_named(ctx, call_argument(call, "mp_context", _EXECUTOR_CONTEXT_POSITION), ancestors)
    elif qualified in DATA_LOADERS:
        method = _method_named(ctx, call_argument(call, "multiprocessing_context", _LOADER_CONTEXT_POSITION), ancestors)
    else:
        method = DEFAULT
    return module_start_method(ctx) if method == DEFAULT else method


def module_start_method(ctx: FileContext) -> str:
    """The start method the module sets when imported (`multiprocessing.set_start_method("fork")` outside any function
    and any main guard), DEFAULT when it sets none."""
    key = ("processes-module-start-method",)
    if key not in ctx.memo:
        found = DEFAULT
        for node in _import_time_nodes(ctx.tree.body):
            if isinstance(node, ast.Call) and ctx.qualified_name(node.func, [ctx.tree]) in _SET_START_METHOD:
                found = _method_named(ctx, call_argument(node, "method", 0), [ctx.tree])
        ctx.memo[key] = found
    return ctx.memo[key]  # type: ignore[return-value]


def _import_time_nodes(body: list[ast.stmt]) -> list[ast.AST]:
    """The nodes of module-level code that run on import: not in functions, classes or the main guard."""
    found: list[ast.AST] = []
    stack: list[ast.AST] = list(reversed(body))
    while stack:
        node = stack.pop()
        if isinstance(node, (*FUNCTIONS, ast.ClassDef, ast.Lambda)):
            continue
        found.append(node)
        if isinstance(node, ast.If) and is_main_guard(node.test, equal=True):
            stack.append(node.test)
            stack.extend(reversed(node.orelse))
        elif isinstance(node, ast.If) and is_main_guard(node.test, equal=False):
            stack.append(node.test)
            stack.extend(reversed(node.body))
        else:
            stack.extend(reversed(list(ast.iter_child_nodes(node))))
    return found


def loader_workers(ctx: FileContext, call: ast.Call) -> str | None:
    """How a DataLoader call shows that it starts worker processes when iterated, as the source says it
    (`num_workers=4`); None where it has none, or where nothing in the file tells (`num_workers=cfg.workers`)."""
    given = call_argument(call, "num_workers", _NUM_WORKERS_POSITION)
    if given is None:
        return None  # 0 by default; one hidden in `**kwargs` is not seen
    value = _module_value(ctx, given)
    if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name):
        value = option_defaults(ctx).get(value.attr) or value  # `args.workers`: the default of `--workers`
    if isinstance(value, ast.Constant) and isinstance(value.value, int) and not isinstance(value.value, bool):
        return f"num_workers={ast.unparse(given)}" if value.value > 0 else None
    if isinstance(value, ast.Call) and _CPU_COUNT.search(ctx.qualified_name(value.func, []) or ""):
        return f"num_workers={ast.unparse(given)}"
    # DataLoader refuses both with num_workers=0: either one says there are workers.
    persistent = call_argument(call, "persistent_workers", None)
    if isinstance(persistent, ast.Constant) and persistent.value is True:
        return "persistent_workers=True"
    prefetch = call_argument(call, "prefetch_factor", None)
    if prefetch is not None and not (isinstance(prefetch, ast.Constant) and prefetch.value is None):
        return f"prefetch_factor={ast.unparse(prefetch)}"
    return None


def option_defaults(ctx: FileContext) -> dict[str, ast.expr]:
    """The `default=` of each command-line option the file declares, by the attribute it is read as
    (`parser.add_argument("--num-workers", default=4)` -> `num_workers`); an option declared twice is left out."""
    key = ("processes-option-defaults",)
    if key not in ctx.memo:
        found: dict[str, ast.expr | None] = {}
        # The calls alone (ast.walk's every node took twice as long, 4 % of a check of diffusers).
        for node in nodes_of(ctx.tree, (ast.Call,)) if b"add_argument" in ctx.text.data else ():
            assert isinstance(node, ast.Call)
            if isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
                dest = _option_dest(node)
                default = next((k.value for k in node.keywords if k.arg == "default"), None)
                if dest is not None:
                    found[dest] = default if dest not in found else None
        ctx.memo[key] = {dest: default for dest, default in found.items() if default is not None}
    return ctx.memo[key]  # type: ignore[return-value]


def _option_dest(call: ast.Call) -> str | None:
    """Where argparse stores an option: `dest=`, else its first long name, else its first name, dashes made
    underscores."""
    given = next((k.value for k in call.keywords if k.arg == "dest"), None)
    if isinstance(given, ast.Constant) and isinstance(given.value, str):
        return given.value
    names = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    if not names or len(names) != len(call.args):
        return None
    chosen = next((n for n in names if n.startswith("--")), names[0])
    return chosen.lstrip("-").replace("-", "_") or None
