"""Which classes of a file are `torch.nn.Module`s, and which methods they define."""

from __future__ import annotations

import ast
from typing import Literal

from pitfall_lint.analysis.scopes import FUNCTIONS, decorator_names
from pitfall_lint.context import FileContext

MethodKind = Literal["method", "static", "class", "property"]

_NOT_MODULES = {"Parameter", "UninitializedParameter", "UninitializedBuffer", "Buffer"}
_LIGHTNING_ROOTS = ("lightning.", "pytorch_lightning.", "lightning_fabric.")


def is_torch_module_name(qualified: str) -> bool:
    """`torch.nn.Module`, its torch subclasses (`torch.nn.Linear`, ...) and Lightning's modules."""
    if qualified.startswith(_LIGHTNING_ROOTS):
        return qualified.endswith("LightningModule")
    parts = qualified.split(".")
    if parts[:2] != ["torch", "nn"] or not parts[-1][:1].isupper() or parts[-1] in _NOT_MODULES:
        return False
    # torch.nn.X, torch.nn.modules.<file>.X and torch.nn.parallel.X are modules; torch.nn.utils.* are not.
    return len(parts) == 3 or parts[2] in ("modules", "parallel")


def _module_classes(ctx: FileContext) -> dict[str, ast.ClassDef]:
    key = ("module-classes",)
    found = ctx.memo.get(key)
    if found is None:
        found = {node.name: node for node in ctx.tree.body if isinstance(node, ast.ClassDef)}
        ctx.memo[key] = found
    return found  # type: ignore[return-value]


def _same_file_bases(ctx: FileContext, cls: ast.ClassDef) -> list[ast.ClassDef]:
    classes = _module_classes(ctx)
    return [classes[b.id] for b in cls.bases if isinstance(b, ast.Name) and b.id in classes and classes[b.id] is not cls]


def is_module_class(ctx: FileContext, cls: ast.ClassDef, _seen: frozenset[int] = frozenset()) -> bool:
    """True when the class derives from a torch Module, directly or through classes of this file."""
    key = ("is-module", id(cls))
    if key not in ctx.memo:
        seen = _seen | {id(cls)}
        result = any(
            is_torch_module_name(name)
            for name in (ctx.qualified_name(base, []) for base in cls.bases)
            if name is not None
        ) or any(is_module_class(ctx, base, seen) for base in _same_file_bases(ctx, cls) if id(base) not in seen)
        ctx.memo[key] = result
    return ctx.memo[key]  # type: ignore[return-value]


def _kind(function: ast.FunctionDef | ast.AsyncFunctionDef) -> MethodKind:
    decorators = decorator_names(function)
    if "staticmethod" in decorators:
        return "static"
    if "classmethod" in decorators:
        return "class"
    if any(d == "property" or d.endswith((".setter", ".getter", "cached_property")) for d in decorators):
        return "property"
    return "method"


def class_methods(ctx: FileContext, cls: ast.ClassDef, _seen: frozenset[int] = frozenset()) -> dict[str, MethodKind]:
    """Methods by name, the class's own overriding those of its same-file bases."""
    key = ("methods", id(cls))
    if key not in ctx.memo:
        seen = _seen | {id(cls)}
        methods: dict[str, MethodKind] = {}
        for base in reversed(_same_file_bases(ctx, cls)):
            if id(base) not in seen:
                methods.update(class_methods(ctx, base, seen))
        methods.update({node.name: _kind(node) for node in cls.body if isinstance(node, FUNCTIONS)})
        ctx.memo[key] = methods
    return ctx.memo[key]  # type: ignore[return-value]
