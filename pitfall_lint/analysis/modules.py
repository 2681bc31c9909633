"""Which classes of a file are `torch.nn.Module`s, and which methods they define."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Literal

from pitfall_lint.analysis.evidence import Evidence, WrapperKind, cite
from pitfall_lint.analysis.scopes import FUNCTIONS, decorator_names
from pitfall_lint.context import FileContext
from pitfall_lint.diagnostic import Related

MethodKind = Literal["method", "static", "class", "property"]

_NOT_MODULES = {"Parameter", "UninitializedParameter", "UninitializedBuffer", "Buffer"}
_LIGHTNING_ROOTS = ("lightning.", "pytorch_lightning.", "lightning_fabric.")
# torch.nn modules that hold parameters as built by default; the rest (activations, dropout, pooling, losses,
# containers) hold none of their own. The keyword that, set to False, leaves a normalisation layer without any.
_PARAMETRISED = {
    **dict.fromkeys(
        (
            "Linear", "Bilinear", "LazyLinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
            "ConvTranspose3d", "LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d",
            "LazyConvTranspose3d", "Embedding", "EmbeddingBag", "RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell",
            "MultiheadAttention", "Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
            "TransformerDecoderLayer", "PReLU", "AdaptiveLogSoftmaxWithLoss",
        ),
        "",
    ),
    **dict.fromkeys(
        ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d", "SyncBatchNorm", "GroupNorm"),
        "affine",
    ),
    **dict.fromkeys(("LayerNorm", "RMSNorm"), "elementwise_affine"),
}
# Normalisation layers without parameters unless asked for them (`affine=True`).
_AFFINE_ON_REQUEST = frozenset({"InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d"})
_PARAMETER_CLASSES = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})


def is_torch_module_name(qualified: str) -> bool:
    """`torch.nn.Module`, its torch subclasses (`torch.nn.Linear`, ...) and Lightning's modules."""
    if qualified.startswith(_LIGHTNING_ROOTS):
        return qualified.endswith("LightningModule")
    parts = qualified.split(".")
    if parts[:2] != ["torch", "nn"] or not parts[-1][:1].isupper() or parts[-1] in _NOT_MODULES:
        return False
    # torch.nn.X, torch.nn.modules.<file>.X and torch.nn.parallel.X are modules; torch.nn.utils.* are not.
    return len(parts) == 3 or parts[2] in ("modules", "parallel")


def _is_literal(node: ast.expr | None, value: bool) -> bool:
    return isinstance(node, ast.Constant) and node.value is value


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def creates_parameters(qualified: str | None, call: ast.Call) -> bool | None:
    """Whether the call builds trainable parameters: True for `nn.Linear(...)` or `nn.Parameter(t)`, False for
    torch modules that hold none (`nn.ReLU()`, `nn.LayerNorm(d, elementwise_affine=False)`) and for frozen
    parameters (`requires_grad=False`), None when torch does not build it (a class of the project, a function)."""
    if qualified in _PARAMETER_CLASSES:
        return not _is_literal(_keyword(call, "requires_grad"), False) and not (len(call.args) > 1 and _is_literal(call.args[1], False))
    if qualified is None or not is_torch_module_name(qualified):
        return None
    name = qualified.rpartition(".")[2]
    if name in _AFFINE_ON_REQUEST:
        return _is_literal(_keyword(call, "affine"), True)
    switch = _PARAMETRISED.get(name)
    if switch is None:
        return False
    return not (switch and _is_literal(_keyword(call, switch), False))


def top_level_classes(ctx: FileContext) -> dict[str, ast.ClassDef]:
    """The classes defined at the top of the file, by name."""
    key = ("module-classes",)
    found = ctx.memo.get(key)
    if found is None:
        found = {node.name: node for node in ctx.tree.body if isinstance(node, ast.ClassDef)}
        ctx.memo[key] = found
    return found  # type: ignore[return-value]


def _same_file_bases(ctx: FileContext, cls: ast.ClassDef) -> list[ast.ClassDef]:
    classes = top_level_classes(ctx)
    return [classes[b.id] for b in cls.bases if isinstance(b, ast.Name) and b.id in classes and classes[b.id] is not cls]


def _imported_bases(ctx: FileContext, cls: ast.ClassDef) -> bool:
    """Whether a base comes from an import (not torch's, not this file's): only the project can tell what it is."""
    local = top_level_classes(ctx)
    for base in cls.bases:
        name = ctx.qualified_name(base, [])
        if name is None or is_torch_module_name(name) or (isinstance(base, ast.Name) and base.id in local):
            continue
        root = base
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name) and ctx.resolver.is_imported(root.id, []):
            return True
    return False


def is_module_class(
    ctx: FileContext, cls: ast.ClassDef, ancestors: Sequence[ast.AST] = (), _seen: frozenset[int] = frozenset()
) -> bool:
    """True when the class derives from a torch Module, directly, through classes of this file or through
    classes of the project (`ancestors`: the class's own, or those of a node inside it)."""
    key = ("is-module", id(cls))
    if key not in ctx.memo:
        seen = _seen | {id(cls)}
        result = any(
            is_torch_module_name(name)
            for name in (ctx.qualified_name(base, []) for base in cls.bases)
            if name is not None
        ) or any(is_module_class(ctx, base, (), seen) for base in _same_file_bases(ctx, cls) if id(base) not in seen)
        if not result and _imported_bases(ctx, cls):
            result = ctx.project.is_module_class(cls, ancestors)
        ctx.memo[key] = result
    return ctx.memo[key]  # type: ignore[return-value]


def data_parallel_reach(
    ctx: FileContext, cls: ast.ClassDef, ancestors: Sequence[ast.AST], wrapped_only: bool = False, told_only: bool = False
) -> Evidence | None:
    """Where nn.DataParallel wraps the module (or a module holding it), or where a library exposes it to its users
    (EXPORTED); [] when nothing in the project says but it may be wrapped (a model library that trains nothing, or
    `data-parallel = "always"`); None when DataParallel cannot reach it.
    `wrapped_only`: the module DataParallel calls itself, not a submodule; `told_only`: not where it is only assumed
    (a model library, a wrap whose model the source cannot tell)."""
    return ctx.project.data_parallel_reach(cls, ancestors, wrapped_only, told_only)


def wrapper_reach(ctx: FileContext, kind: WrapperKind, cls: ast.ClassDef, ancestors: Sequence[ast.AST]) -> list[Evidence]:
    """Every wrap of this kind in the project that can run the module, the wraps of the class itself first (see
    ProjectModel.wrapper_reach for the evidence's fields)."""
    return ctx.project.wrapper_reach(kind, cls, ancestors)


def wrap_option(evidence: Evidence, name: str) -> str:
    """A DistributedDataParallel option at the wrap the evidence names: "True", "False", "?" (computed) or ""."""
    return next((value for option, value in evidence[5] if option == name), "") if len(evidence) > 5 else ""


def same_file_hierarchy(ctx: FileContext, cls: ast.ClassDef) -> list[ast.ClassDef] | None:
    """The class and its base classes, nearest first, when every base is torch's or defined in this file (so that
    all the code the module runs is here); None when a base comes from elsewhere."""
    classes = top_level_classes(ctx)
    found: list[ast.ClassDef] = []
    todo = [cls]
    while todo:
        current = todo.pop(0)
        if current in found:
            continue
        found.append(current)
        for base in current.bases:
            if isinstance(base, ast.Name) and base.id in classes and classes[base.id] is not current:
                todo.append(classes[base.id])
                continue
            name = ctx.qualified_name(base, [])
            if name is None or not is_torch_module_name(name) or name.startswith(_LIGHTNING_ROOTS):
                return None
    return found


_WRAPPER_NAMES = {"DataParallel": "nn.DataParallel"}
# The kind of a reach's evidence that is no wrap but the place where a library exposes the module to its users
# (`__all__`, a registry, its package's `__init__.py`), who may wrap it.
EXPORTED = "exported"


def wrapped_at(ctx: FileContext, evidence: Evidence | None) -> tuple[str, tuple[Related, ...]]:
    """` (wrapped by nn.DataParallel at train.py:42)` when the wrap is in another file, and the wrap site; ` (of a
    model the library exports at models/__init__.py:3)` for a library's export."""
    if evidence and evidence[2] == EXPORTED:
        return cite(ctx, evidence, "of a model the library exports")
    what = f"wrapped by {_WRAPPER_NAMES.get(evidence[2], evidence[2])}" if evidence else ""
    return cite(ctx, evidence, what)


def method_kind(function: ast.FunctionDef | ast.AsyncFunctionDef) -> MethodKind:
    decorators = decorator_names(function)
    if "staticmethod" in decorators:
        return "static"
    if "classmethod" in decorators:
        return "class"
    if any(d == "property" or d.endswith((".setter", ".getter", "cached_property")) for d in decorators):
        return "property"
    return "method"


# Calls that return the module they are called on: `Net().to(device)` is still a Net.
_SAME_MODULE_METHODS = frozenset(
    {"to", "cuda", "cpu", "float", "half", "double", "bfloat16", "train", "eval", "requires_grad_", "to_empty"}
)


def same_module(value: ast.AST) -> ast.AST:
    """`Net()` for `Net().to(device).eval()`: the expression whose module the calls return."""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in _SAME_MODULE_METHODS:
        value = value.func.value
    return value


# Model zoos build their modules on the CPU (pretrained weights are loaded there too) unless given a `device=`:
# their builders by name, and the modules whose entries are builders (`models.__dict__[arch]()`,
# `getattr(models, name)()`), with torchvision's functions that build nothing or wrap a module given to them.
# Not `torch.hub.load`: the repository's hubconf decides, and some place the model (ultralytics/yolov5's on CUDA).
_ZOO_BUILDERS = frozenset({"timm.create_model", "timm.models.create_model", "torchvision.models.get_model"})
_ZOOS = ("torchvision.models", "timm.models")
_ZOO_HELPERS = frozenset(
    {"get_weight", "get_model_weights", "get_model_builder", "list_models", "load_state_dict_from_url", "feature_extraction", "utils"}
)


def built_by_a_model_zoo(ctx: FileContext, call: ast.Call, ancestors: Sequence[ast.AST]) -> bool:
    """`torchvision.models.resnet50()`, `timm.create_model(...)`, `models.__dict__[arch]()`, `getattr(models, name)()`
    (`models` being torchvision's or timm's): a module built on the CPU, unlike what a function of the project
    returns, which may be placed."""
    func = call.func
    if isinstance(func, ast.Subscript) and isinstance(func.value, ast.Attribute) and func.value.attr == "__dict__":
        return _is_a_zoo(ctx.qualified_name(func.value.value, ancestors))
    if isinstance(func, ast.Call) and isinstance(func.func, ast.Name) and func.func.id == "getattr" and func.args:
        return ctx.qualified_name(func.func, ancestors) == "getattr" and _is_a_zoo(ctx.qualified_name(func.args[0], ancestors))
    qualified = ctx.qualified_name(func, ancestors) or ""
    if qualified in _ZOO_BUILDERS:
        return True
    module, _, name = qualified.rpartition(".")
    return module.startswith("torchvision.models") and _is_a_zoo(module) and name[:1].islower() and name not in _ZOO_HELPERS


def _is_a_zoo(qualified: str | None) -> bool:
    """torchvision.models or timm.models, or one of their public submodules (`torchvision.models.detection`)."""
    for zoo in _ZOOS:
        if qualified == zoo:
            return True
        if qualified is not None and qualified.startswith(zoo + "."):
            return not any(part.startswith("_") or part in _ZOO_HELPERS for part in qualified[len(zoo) + 1 :].split("."))
    return False


_REGISTRARS = frozenset({"register_buffer", "register_parameter", "register_module", "add_module"})


def registered_name(node: ast.AST, instance: str) -> str | None:
    """"x" for `self.register_buffer("x", ...)` (a parameter, submodule or buffer registered by name)."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _REGISTRARS
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == instance
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        return node.args[0].value
    return None


def inherited_methods(ctx: FileContext, cls: ast.ClassDef, ancestors: Sequence[ast.AST]) -> dict[str, MethodKind]:
    """class_methods() with those of its bases in other files of the project too."""
    methods: dict[str, MethodKind] = {}
    if _imported_bases(ctx, cls):
        methods.update(ctx.project.class_methods(cls, ancestors))  # type: ignore[arg-type]
    methods.update(class_methods(ctx, cls))
    return methods


def class_methods(ctx: FileContext, cls: ast.ClassDef, _seen: frozenset[int] = frozenset()) -> dict[str, MethodKind]:
    """Methods by name, the class's own overriding those of its bases in this file."""
    key = ("methods", id(cls))
    if key not in ctx.memo:
        seen = _seen | {id(cls)}
        methods: dict[str, MethodKind] = {}
        for base in reversed(_same_file_bases(ctx, cls)):
            if id(base) not in seen:
                methods.update(class_methods(ctx, base, seen))
        methods.update({node.name: method_kind(node) for node in cls.body if isinstance(node, FUNCTIONS)})
        ctx.memo[key] = methods
    return ctx.memo[key]  # type: ignore[return-value]
