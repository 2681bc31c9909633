"""The arguments of a constructor call in the training script, resolved without running it, so that verify builds a
model file's module as the script does: literals, names bound once, argparse defaults (`args.dim`), and the
classes and functions the script imports (`models.__dict__[args.arch]` with `--arch resnet50`)."""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pitfall_lint.analysis.processes import option_defaults
from pitfall_lint.context import FileContext

Spec = dict[str, Any]  # {"value": literal} | {"object": "pkg.mod.name"} | {"call": ..., "args", "kwargs"} | {"unknown": text}
_DEPTH = 4
_RECEIVERS_NOT_OPTIONS = frozenset({"self", "cls"})


@dataclass
class Resolution:
    """One call's arguments as specs, and the argparse defaults they were read from (`arch='resnet50'`)."""

    args: list[Spec]
    kwargs: dict[str, Spec]
    options: list[str] = field(default_factory=list)

    @property
    def unknown(self) -> int:
        return sum("unknown" in spec for spec in [*self.args, *self.kwargs.values()])


class ArgumentResolver:
    """Resolves the arguments of calls in one file; `other_options` gives the defaults of options the file reads but
    another file of the project declares (an imported `options.py`)."""

    def __init__(self, ctx: FileContext, other_options: Callable[[str], ast.expr | None], module: str | None = None) -> None:
        self.ctx = ctx
        self.other_options = other_options
        self.imported = _imported_names(ctx.tree)
        self.bound = _bound_once(ctx.tree)
        self.namespaces: set[str] | None = None
        # `ResNet(BasicBlock, ...)` beside `class BasicBlock`: the file's own classes and functions, by the name the
        # child imports the file under (None where importing it would run a program).
        self.module = module
        self.defined = {s.name for s in ctx.tree.body if isinstance(s, (ast.ClassDef, ast.FunctionDef))}

    def resolve(self, call: ast.Call) -> Resolution:
        options: list[str] = []
        args = [self._spec(a, options, 0) for a in call.args]
        kwargs = {k.arg: self._spec(k.value, options, 0) for k in call.keywords if k.arg is not None}
        return Resolution(args, kwargs, list(dict.fromkeys(options)))

    def _spec(self, node: ast.expr, options: list[str], depth: int) -> Spec:
        unknown = {"unknown": ast.unparse(node)}
        if depth > _DEPTH:
            return unknown
        try:
            value = ast.literal_eval(node)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            pass
        else:
            return {"value": value} if _as_json(value) else unknown
        configured = self._configured(node, options, depth) if isinstance(node, (ast.Name, ast.Attribute)) else None
        if configured is not None:
            return configured
        if isinstance(node, ast.Name) and node.id in self.defined and node.id not in self.bound and self.module:
            return {"object": f"{self.module}.{node.id}"}
        if isinstance(node, ast.Name) and node.id in self.bound and node.id not in self.imported:
            spec = self._spec(self.bound[node.id], options, depth + 1)
            return unknown if "unknown" in spec else spec  # named as the call spells it
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id not in _RECEIVERS_NOT_OPTIONS:
            default = self._option(node.attr)
            if default is not None:
                spec = self._spec(default, options, depth + 1)
                if "value" in spec:
                    options.append(f"{node.attr}={spec['value']!r}")
                return spec
            if node.value.id in self._namespaces():
                return unknown  # `opt.embed_dim`: set at run time on the options the script parsed
        found = self._object(node, options, depth)
        if found is not None:
            return found
        if isinstance(node, ast.Call) and not any(k.arg is None for k in node.keywords):
            callee = self._object(node.func, options, depth + 1)
            if callee is not None:
                inner = [self._spec(a, options, depth + 1) for a in node.args]
                named = {k.arg: self._spec(k.value, options, depth + 1) for k in node.keywords if k.arg is not None}
                if not any("unknown" in s for s in [*inner, *named.values()]):
                    return {"call": callee["object"], "args": inner, "kwargs": named}
        return unknown

    def _configured(self, node: ast.Name | ast.Attribute, options: list[str], depth: int) -> Spec | None:
        """`GPT(config.model)`: a config object made by a call (`GPT.get_default_config()`), then given attributes
        (`config.model.model_type = 'gpt-mini'`), perhaps in a function of the file that returns it (`config =
        get_config()`), as {"configured": the call's spec, "set": {attribute: spec}}."""
        path = ast.unparse(node)
        root, _, rest = path.partition(".")
        # Assigned once, as a plain name: `config = get_config()` (a parameter of the same name elsewhere aside).
        makers = [n.value for n in ast.walk(self.ctx.tree) if isinstance(n, ast.Assign) and len(n.targets) == 1
                  and isinstance(n.targets[0], ast.Name) and n.targets[0].id == root]
        maker = makers[0] if len(makers) == 1 else None
        scopes: list[tuple[ast.AST, str]] = [(self.ctx.tree, path)]
        if isinstance(maker, ast.Call) and isinstance(maker.func, ast.Name) and maker.func.id in self.defined:
            function = next(s for s in self.ctx.tree.body if getattr(s, "name", None) == maker.func.id)
            returned = [n.value for n in ast.walk(function) if isinstance(n, ast.Return)]
            if len(returned) == 1 and isinstance(returned[0], ast.Name):
                scopes.insert(0, (function, ".".join(filter(None, [returned[0].id, rest]))))
        base = maker if isinstance(node, ast.Name) and isinstance(maker, ast.Call) else None
        settings: dict[str, ast.expr] = {}
        for scope, alias in scopes:
            for statement in ast.walk(scope):
                if isinstance(statement, ast.Assign) and len(statement.targets) == 1 \
                        and isinstance(statement.targets[0], ast.Attribute):
                    target = ast.unparse(statement.targets[0])
                    if target == alias:
                        base = statement.value
                    elif target.startswith(f"{alias}.") and "." not in target[len(alias) + 1:]:
                        settings[target[len(alias) + 1:]] = statement.value
        made = self._spec(base, options, depth + 1) if base is not None and settings else {}
        if "call" not in made:
            return None
        return {"configured": made, "set": {name: self._spec(value, options, depth + 1) for name, value in settings.items()}}

    def _option(self, name: str) -> ast.expr | None:
        return option_defaults(self.ctx).get(name) or self.other_options(name)

    def _namespaces(self) -> set[str]:
        """Names the file reads options from (`args`, `opt`): one of their attributes is an option of the project."""
        if self.namespaces is None:
            self.namespaces = {
                node.value.id for node in ast.walk(self.ctx.tree)
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and self._option(node.attr) is not None
            }
        return self.namespaces

    def _object(self, node: ast.expr, options: list[str], depth: int) -> Spec | None:
        """An imported class or function: `ConvEncoder`, `models.resnet50`, `models.__dict__[args.arch]`,
        `getattr(models, args.arch)`."""
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "__dict__":
            owner, key = node.value.value, node.slice
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" \
                and len(node.args) == 2 and not node.keywords:
            owner, key = node.args
        else:
            root = node
            while isinstance(root, ast.Attribute):
                root = root.value
            if not (isinstance(root, ast.Name) and root.id in self.imported):
                return None
            name = self.ctx.qualified_name(node, [])
            return {"object": name} if name and not name.startswith(".") else None
        module = self._object(owner, options, depth + 1)
        attribute = self._spec(key, options, depth + 1)
        if module is None or not isinstance(attribute.get("value"), str):
            return None
        return {"object": f"{module['object']}.{attribute['value']}"}


def _as_json(value: object) -> bool:
    """Whether the value travels to the child as JSON unchanged but for tuples becoming lists (no bytes, sets,
    complex numbers, non-string keys)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_as_json(v) for v in value)
    return isinstance(value, dict) and all(isinstance(k, str) and _as_json(v) for k, v in value.items())


def _imported_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).partition(".")[0] for a in node.names)
    return names


def _bound_once(tree: ast.Module) -> dict[str, ast.expr]:
    """Names the file assigns exactly once, by a plain assignment, and never takes as a parameter or loop target."""
    bound: dict[str, ast.expr | None] = {}
    targets: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            bound[name] = node.value if name not in bound else None
            targets.add(id(node.targets[0]))
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and id(node) not in targets:
            bound[node.id] = None
        elif isinstance(node, ast.arg):
            bound[node.arg] = None
    return {name: value for name, value in bound.items() if value is not None}


_TENSOR_FACTORIES = frozenset({"torch.randn", "torch.rand", "torch.zeros", "torch.ones", "torch.randint"})


def call_site_inputs(ctx: FileContext, built: ast.Call) -> tuple[list[Spec], int] | None:
    """The tensors the caller feeds the module it built (`v = ViT(...)`, `img = torch.randn(1, 3, 256, 256)`,
    `v(img)`), as specs ({"factory": "torch.randn", "shape": [1, 3, 256, 256]}, `high` for randint), with the line:
    a model whose first layer is not its input's shape (an einops Rearrange, a patch embedding) is fed as its caller
    feeds it."""
    names = {node.targets[0].id for node in ast.walk(ctx.tree) if isinstance(node, ast.Assign) and node.value is built
             and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)}
    bound = _bound_once(ctx.tree)
    for node in ast.walk(ctx.tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names \
                and node.args and not node.keywords:
            tensors = [_tensor(ctx, bound.get(a.id) if isinstance(a, ast.Name) else a) for a in node.args]
            if all(tensors):
                return tensors, node.lineno  # type: ignore[return-value]
    return None


def _tensor(ctx: FileContext, node: ast.expr | None) -> Spec | None:
    """`torch.randn(1, 3, 256, 256)`, `torch.randint(0, 100, (1, 16))`: a tensor of literal shape."""
    if not isinstance(node, ast.Call) or node.keywords:
        return None
    factory = ctx.qualified_name(node.func, []) or ""
    if factory not in _TENSOR_FACTORIES:
        return None
    try:
        values = [ast.literal_eval(a) for a in node.args]
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    high = values[-2] if factory == "torch.randint" and len(values) >= 2 else None
    dims = values[-1:] if factory == "torch.randint" else values
    shape = list(dims[0]) if len(dims) == 1 and isinstance(dims[0], (list, tuple)) else dims
    if not shape or not all(type(d) is int and d > 0 for d in shape) or (factory == "torch.randint" and type(high) is not int):
        return None
    return {"factory": factory, "shape": shape, **({"high": high} if high is not None else {})}
