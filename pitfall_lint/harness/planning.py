"""How to run a file: as a script, as N ranks of torch.distributed.run, through its example function, as a
model file, or as a notebook."""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, replace
from functools import partial

from pitfall_lint.analysis.collectives import TORCH_COLLECTIVES
from pitfall_lint.analysis.distributed import sets_up_distributed, starts_process_group
from pitfall_lint.analysis.processes import option_defaults
from pitfall_lint.analysis.scopes import is_main_guard
from pitfall_lint.context import FileContext
from pitfall_lint.harness.construction import ArgumentResolver, call_site_inputs
from pitfall_lint.harness.reasons import shown_path
from pitfall_lint.project.model import ProjectModel
from pitfall_lint.source import SourceText

DEFAULT_EXAMPLE = "pitfall_lint_example"
_SPAWNERS = frozenset({"torch.multiprocessing.spawn", "torch.multiprocessing.start_processes"})
_WORKERS = frozenset({
    "multiprocessing.Process", "multiprocessing.Pool", "torch.multiprocessing.Process", "torch.multiprocessing.Pool",
    "multiprocessing.get_context", "torch.multiprocessing.get_context", "concurrent.futures.ProcessPoolExecutor",
})
_DATA_PARALLEL = frozenset({"torch.nn.DataParallel", "torch.nn.parallel.DataParallel", "torch.nn.parallel.data_parallel"})
_DEFINITIONS = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign,
                ast.AnnAssign, ast.AugAssign, ast.Pass)
# Module-level calls of a model file that only configure things (sys.path.append, warnings.filterwarnings).
_SETUP_MODULES = frozenset({"sys", "os", "warnings", "logging", "torch", "np", "numpy", "random", "matplotlib"})
_LOCAL_RANK_OPTIONS = ("--local_rank", "--local-rank")
# init_process_group's keywords a script may fill from its own options, with the variable torch.distributed.run sets.
_RANK_KEYWORDS = {"rank": "RANK", "world_size": "WORLD_SIZE"}
_MAX_IMPORTED = 200  # project files followed from one script's imports


@dataclass(frozen=True)
class Plan:
    kind: str | None  # "script", "distributed", "example", "model", "notebook", or None when nothing can run it
    reason: str
    example: str | None = None
    local_rank_option: str | None = None  # the option each rank gets its local rank through, as launch passes it
    rank_options: tuple[tuple[str, str], ...] = ()  # (`--rank`, "RANK"): options each rank gets its own value through
    model: dict[str, object] | None = None  # for a model file: the constructor call found in the project
    starts: str | None = None  # for a script that starts processes itself: the call that starts them
    collective: str | None = None  # for a model file whose code calls one (`all_gather`, line 194): run as N DDP ranks


def _is_setup_call(statement: ast.stmt) -> bool:
    if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)):
        return False
    root = statement.value.func
    while isinstance(root, ast.Attribute):
        root = root.value
    return isinstance(root, ast.Name) and root.id in _SETUP_MODULES and root is not statement.value.func


def _only_definitions(body: list[ast.stmt]) -> bool:
    """Statements that define (imports, classes, constants, an optional-import `try`): a module, not a program."""
    for statement in body:
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
            continue  # a docstring
        if isinstance(statement, ast.Try):
            blocks = [statement.body, statement.orelse, statement.finalbody, *(h.body for h in statement.handlers)]
            if all(_only_definitions(block) for block in blocks):
                continue
            return False
        if isinstance(statement, ast.If) and not is_main_guard(statement.test):
            if _only_definitions(statement.body) and _only_definitions(statement.orelse):
                continue
            return False
        if not isinstance(statement, _DEFINITIONS) and not _is_setup_call(statement):
            return False
    return True


def _calls(ctx: FileContext, names: frozenset[str]) -> list[str]:
    return [
        qualified for node in ast.walk(ctx.tree)
        if isinstance(node, ast.Call) and (qualified := ctx.qualified_name(node.func, []) or "") in names
    ]


def _local_rank_option(tree: ast.Module) -> str | None:
    """`parser.add_argument("--local_rank", ...)`: the spelling the script accepts."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            for argument in node.args:
                if isinstance(argument, ast.Constant) and argument.value in _LOCAL_RANK_OPTIONS:
                    return argument.value
    return None


def _rank_options(ctx: FileContext) -> tuple[tuple[str, str], ...]:
    """`--rank` and `--world-size` options the parser declares and `init_process_group(rank=args.rank, ...)` takes,
    with the launcher's variable for each: started one process per rank by hand, each gets its own `--rank`."""
    passed = {
        keyword.arg for node in ast.walk(ctx.tree)
        if isinstance(node, ast.Call) and ctx.qualified_name(node.func, []) == "torch.distributed.init_process_group"
        for keyword in node.keywords
        if keyword.arg in _RANK_KEYWORDS and isinstance(keyword.value, ast.Attribute) and keyword.value.attr == keyword.arg
    }
    found: dict[str, str] = {}
    for node in ast.walk(ctx.tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"):
            continue
        spelled = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        long = [o for o in spelled if o.startswith("--")]
        dest = next((k.value.value for k in node.keywords if k.arg == "dest" and isinstance(k.value, ast.Constant)),
                    long[0][2:].replace("-", "_") if long else None)
        if long and dest in passed:
            found.setdefault(dest, long[0])
    return tuple((found[k], variable) for k, variable in _RANK_KEYWORDS.items() if k in found)


def _imported_names(tree: ast.Module) -> list[str]:
    """Each module or name the file imports, anywhere in its code, dotted as written (`options`, `.config.load`)."""
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            names += [f"{base}.{a.name}" if node.module else f"{base}{a.name}" for a in node.names if a.name != "*"]
            names += [base] if node.module else []
    return names


def imported_files(path: str, tree: ast.Module, model: ProjectModel) -> list[str]:
    """The project's files the script imports, directly or through one another, in the order met: where its launch
    contract may be written (an `options.py` declaring `--local_rank`)."""
    found: list[str] = []
    todo = [(path, tree)]
    while todo and len(found) < _MAX_IMPORTED:
        importer, imports = todo.pop(0)
        for name in _imported_names(imports):
            module = model.module_file(importer, name)
            if module is None or module in found or os.path.realpath(module) == os.path.realpath(path):
                continue
            found.append(module)
            try:
                with open(module, "rb") as handle:
                    todo.append((module, ast.parse(handle.read(), filename=module)))
            except (OSError, SyntaxError, ValueError):
                continue
    return found


def _imported_contexts(files: list[str]) -> list[FileContext]:
    contexts = []
    for path in files:
        try:
            with open(path, "rb") as handle:
                data = handle.read()
            contexts.append(_context(path, data, ast.parse(data, filename=path)))
        except (OSError, SyntaxError, ValueError):
            continue
    return contexts


def with_imported_contract(plan: Plan, path: str, data: bytes, tree: ast.Module, files: list[str]) -> Plan:
    """The plan with the launch contract of the modules the script imports: a plain script whose imported helper
    sets up the process group (reading LOCAL_RANK, calling init_process_group) runs as N ranks, as the helper expects;
    a distributed script with no `--local_rank` of its own takes the one an imported `options.py` declares, which each
    rank must get, or the script runs as a single process."""
    imported = _imported_contexts(files)
    ctx = _context(path, data, tree)
    if plan.kind == "script" and not _calls(ctx, _SPAWNERS | _WORKERS | _DATA_PARALLEL):
        setter = next((c for c in imported if starts_process_group(c) and not _calls(c, _SPAWNERS | _WORKERS)), None)
        if setter is not None:
            plan = Plan("distributed", f"it imports {shown_path(setter.path)}, which sets up distributed training, so it "
                        "runs as N ranks under torch.distributed.run", local_rank_option=_local_rank_option(tree))
    if plan.kind != "distributed" or plan.local_rank_option is not None:
        return plan
    option = next((o for c in imported if (o := _local_rank_option(c.tree)) is not None), None)
    return replace(plan, local_rank_option=option) if option else plan


def _int_constants(tree: ast.Module) -> dict[str, int]:
    """Names the file binds to one integer and nothing else (`WORLD_SIZE = 4`, `n_gpus = 4`)."""
    values: dict[str, set[object]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = node.value.value if isinstance(node.value, ast.Constant) and not isinstance(node, ast.AugAssign) else None
            for target in targets:
                if isinstance(target, ast.Name):
                    values.setdefault(target.id, set()).add(value)
    return {name: v for name, (v, *rest) in values.items() if not rest and type(v) is int}


def _int_list(value: ast.expr | None) -> list[int] | None:
    """`[0, 1, 2, 3]`: a list or tuple of integer literals, or None."""
    if not isinstance(value, (ast.List, ast.Tuple)) or not value.elts:
        return None
    ids = [e.value for e in value.elts if isinstance(e, ast.Constant) and type(e.value) is int]
    return ids if len(ids) == len(value.elts) else None


def _int_lists(tree: ast.Module) -> dict[str, list[int]]:
    """Names the file assigns once, to a list of integer literals (`gpus = [0, 1, 2, 3]`), and nothing else: a
    parameter of that name (`main_worker(gpus, args)`, called with `gpus=gpus`) is taken to carry it."""
    bound: dict[str, list[ast.expr | None]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    bound.setdefault(target.id, []).append(None if isinstance(node, ast.AugAssign) else node.value)
    return {name: ids for name, (value, *rest) in bound.items() if not rest and (ids := _int_list(value)) is not None}


def hard_coded_devices(path: str, data: bytes, tree: ast.Module) -> tuple[int, int] | None:
    """The CUDA devices the script was written for, where it spells them as constants (`mp.spawn(..., nprocs=4)`,
    `nprocs=WORLD_SIZE` with `WORLD_SIZE = 4`, `device_ids=[0, 1, 2, 3]`, `device_ids=gpus` with `gpus = [0, 1, 2, 3]`):
    the most it asks for, with the line. A run with fewer fails at the first device it lacks; one with that many runs
    it as written."""
    ctx = _context(path, data, tree)
    constants, lists = _int_constants(tree), _int_lists(tree)
    found: list[tuple[int, int]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        for keyword in node.keywords:
            value = keyword.value
            if keyword.arg == "nprocs" and (ctx.qualified_name(node.func, []) or "") in _SPAWNERS:
                count = value.value if isinstance(value, ast.Constant) else constants.get(getattr(value, "id", ""))
                if type(count) is int:
                    found.append((count, node.lineno))
            elif keyword.arg == "device_ids":
                ids = _int_list(value) if not isinstance(value, ast.Name) else lists.get(value.id)
                if ids:
                    found.append((max(ids) + 1, node.lineno))
    return max(found, key=lambda f: f[0]) if found else None


def _module_classes(ctx: FileContext) -> list[str]:
    """Classes of the file whose bases name a torch module (`nn.Module`, `torch.nn.Module`, an nn layer)."""
    found = []
    for statement in ctx.tree.body:
        if isinstance(statement, ast.ClassDef):
            for base in statement.bases:
                qualified = ctx.qualified_name(base, []) or ""
                if qualified.startswith("torch.nn.") or ast.unparse(base).endswith("Module"):
                    found.append(statement.name)
                    break
    return found


def _first_collective(ctx: FileContext, classes: list[str]) -> str | None:
    """The first torch.distributed collective the file's modules call, in their own code or in a function of the file
    they call (`torch.distributed.all_gather (line 194)`): a module meant for DistributedDataParallel, whose forward
    fails without a process group."""
    bodies = [s for s in ctx.tree.body if isinstance(s, ast.ClassDef) and s.name in classes]
    called = {node.func.id for body in bodies for node in ast.walk(body)
              if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    bodies += [s for s in ctx.tree.body if isinstance(s, ast.FunctionDef) and s.name in called]
    calls = sorted((node.lineno, qualified) for body in bodies for node in ast.walk(body) if isinstance(node, ast.Call)
                   and (qualified := ctx.qualified_name(node.func, []) or "").startswith("torch.distributed.")
                   and qualified.rpartition(".")[2] in TORCH_COLLECTIVES)
    return f"{calls[0][1]} (line {calls[0][0]})" if calls else None


def _context(path: str, data: bytes, tree: ast.Module) -> FileContext:
    """The file on its own: what it runs and defines is read from it alone."""
    return FileContext(path, tree, SourceText(data), ProjectModel.single_file(path, data).view(path))


def plan_run(path: str, data: bytes, tree: ast.Module, example: str | None) -> Plan:
    ctx = _context(path, data, tree)
    functions = {s.name for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
    if example is not None:
        if example not in functions:
            return Plan(None, f"there is no module-level function {example}() in {path}")
        return Plan("example", f"{example}() builds the model and its inputs", example)
    if path.endswith(".ipynb"):
        return Plan("notebook", "it is a notebook: its code cells run in order, in one fresh interpreter, as in Jupyter")
    if not _only_definitions(tree.body):
        spawners = _calls(ctx, _SPAWNERS)
        workers = _calls(ctx, _WORKERS)
        if sets_up_distributed(ctx) and not spawners and not workers:
            return Plan("distributed", "it sets up distributed training, so it runs as N ranks under torch.distributed.run",
                        local_rank_option=_local_rank_option(tree), rank_options=_rank_options(ctx))
        if sets_up_distributed(ctx) and workers and not spawners:
            started = workers[0].rpartition(".")[2]
            return Plan("script", f"it starts its own worker processes ({started}), so it runs once as `python FILE` "
                        "and its workers are the ranks", starts=started)
        return Plan("script", "it has an entry point, so it runs as `python FILE` would",
                    starts=spawners[0] if spawners else None)
    if DEFAULT_EXAMPLE in functions:
        return Plan("example", f"{DEFAULT_EXAMPLE}() builds the model and its inputs", DEFAULT_EXAMPLE)
    classes = _module_classes(ctx)
    collective = _first_collective(ctx, classes)
    if classes and collective is not None:
        return Plan("model", f"it defines modules ({', '.join(classes[:3])}) and no entry point, and its code calls "
                    f"{collective}, which needs a process group: verify builds one in each of N ranks under "
                    "torch.distributed.run and runs it in DistributedDataParallel", collective=collective)
    if classes:
        return Plan("model", f"it defines modules ({', '.join(classes[:3])}) and no entry point: verify builds one and "
                    "runs it N-way in nn.DataParallel", example=None)
    return Plan(None, "no entry point ran this module, and it defines no model")


def constructor_call(classes: list[str], paths: list[str], root: str) -> dict[str, object] | None:
    """The call in the project that builds one of `classes` with the fewest arguments left unresolved (the first of
    equals): how the training script builds the model, so that verify builds it the same way. Its arguments are specs
    for child/building.py; `folder`, the caller's folder under `root`, is where its imports are found; `inputs`, the
    tensors the caller feeds it, where it spells them (`fed_at`)."""
    wanted = set(classes)
    best: tuple[int, dict[str, object]] | None = None
    read: dict[str, dict[str, ast.expr]] = {}
    for path in paths:
        parsed = _parsed(path, wanted)
        if parsed is None:
            continue
        data, tree = parsed
        resolver = ArgumentResolver(_context(path, data, tree), partial(_declared_elsewhere, paths, read, path),
                                    _module_name(path) if _importable(tree) else None)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or any(k.arg is None for k in node.keywords) \
                    or any(isinstance(a, ast.Starred) for a in node.args):
                continue  # `Net(*sizes)`, `Net(**config)`: which parameter gets what is known at run time
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if name not in wanted:
                continue
            resolved = resolver.resolve(node)
            if best is None or resolved.unknown < best[0]:
                best = (resolved.unknown, {
                    "class": name, "args": resolved.args, "kwargs": resolved.kwargs, "options": resolved.options,
                    "source": f"{path}:{node.lineno}",
                    "folder": os.path.relpath(os.path.dirname(os.path.realpath(path)), os.path.realpath(root)),
                })
                fed = call_site_inputs(resolver.ctx, node)
                if fed is not None:
                    best[1].update(inputs=fed[0], fed_at=f"{path}:{fed[1]}")
    return best[1] if best is not None else None


def _importable(tree: ast.Module) -> bool:
    """Whether importing the file only defines things (its main guard aside): the child may import it for a class."""
    return _only_definitions([s for s in tree.body if not (isinstance(s, ast.If) and is_main_guard(s.test))])


def _module_name(path: str) -> str:
    """The dotted name the file is imported under from above its package (`models.resnet`), as the child does."""
    folder, name = os.path.split(os.path.splitext(os.path.realpath(path))[0])
    parts = [name]
    while os.path.exists(os.path.join(folder, "__init__.py")):
        folder, package = os.path.split(folder)
        parts.insert(0, package)
    return ".".join(parts)


def _parsed(path: str, names: set[str]) -> tuple[bytes, ast.Module] | None:
    """The file's bytes and tree, when it can be read and names one of `names`."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    if not any(name.encode() in data for name in names):
        return None
    try:
        return data, ast.parse(data)
    except (SyntaxError, ValueError):
        return None


def _declared_elsewhere(paths: list[str], read: dict[str, dict[str, ast.expr]], reader: str, option: str) -> ast.expr | None:
    """The default of the option `reader` reads, declared by another file of the project (an imported options.py);
    `read` keeps each file's defaults once read."""
    for path in paths:
        if path != reader and path not in read:
            parsed = _parsed(path, {"add_argument"})
            read[path] = option_defaults(_context(path, *parsed)) if parsed is not None else {}
        if path != reader and option in read[path]:
            return read[path][option]
    return None


def model_classes(path: str, data: bytes, tree: ast.Module) -> list[str]:
    """The file's modules, the whole model first: classes no other class of the file builds, the last defined first."""
    classes = _module_classes(_context(path, data, tree))
    bodies = {s.name: s for s in tree.body if isinstance(s, ast.ClassDef)}
    built = {
        node.func.id for name in classes for node in ast.walk(bodies[name])
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id != name
    }
    return [c for c in reversed(classes) if c not in built] + [c for c in classes if c in built]


def enclosing_class(path: str, line: int) -> str | None:
    """The module-level class whose body holds the line, if any."""
    try:
        with open(path, "rb") as handle:
            tree = ast.parse(handle.read())
    except (OSError, SyntaxError, ValueError):
        return None
    return next((s.name for s in tree.body if isinstance(s, ast.ClassDef) and s.lineno <= line <= (s.end_lineno or 0)),
                None)


def plan_through_callers(callers: list[tuple[str, int, str]]) -> tuple[Plan, str | None]:
    """For a module with no entry point (a helper): the first script of the project that calls one of its functions,
    planned as it would run, with its path; else no plan, and the reason names the callers found."""
    for caller, line, function in callers:
        try:
            with open(caller, "rb") as handle:
                data = handle.read()
            tree = ast.parse(data, filename=caller)
        except (OSError, SyntaxError, ValueError):
            continue
        plan = plan_run(caller, data, tree, None)
        if plan.kind in ("script", "distributed"):
            shown = shown_path(caller)
            return replace(plan, reason=f"it has no entry point: verify runs {shown}, which calls its {function}() at "
                           f"line {line} ({shown}: {plan.reason})"), caller
    if callers:
        caller, line, function = callers[0]
        return Plan(None, f"no entry point ran this module, nor {shown_path(caller)}, which calls its {function}() "
                    f"at line {line}: verify the script that runs them (pitfall-lint verify SCRIPT)"), None
    return Plan(None, "no entry point ran this module, and no file of the project calls it: verify the script that "
                "uses it (pitfall-lint verify SCRIPT)"), None
