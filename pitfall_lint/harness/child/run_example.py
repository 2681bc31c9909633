"""`python -m pitfall_lint.harness.child.run_example FILE FUNCTION`: a model file without an entry point.

FUNCTION returns `(model, args)` or `(model, args, kwargs)`. With FUNCTION `-` there is none: the module
is built from the constructor call verify found in the project, or from its parameters (child/building.py),
and fed the tensors its caller feeds it, else a batch shaped for its first layer. The model is wrapped N-way in
nn.DataParallel (real or emulated), or, in each rank of torch.distributed.run for a module whose code calls
collectives, in DistributedDataParallel, and run forward and backward. The file is imported under its package's name, so
that its relative imports work.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import re
import sys
from typing import Any

from pitfall_lint.harness.child.building import MODEL, build
from pitfall_lint.harness.child.events import SCRIPT, VerifyLimit, emit
from pitfall_lint.harness.child.instrument import DEVICE
from pitfall_lint.harness.child.observe import observed

_BATCH = 8
_IMAGE_SIDES = (28, 32, 64, 224)
_SEQUENCE = 16
_VIEW_SUFFIX = re.compile(r"(_?\d+|_[a-z])$")  # x1, x2; view_1, view_2; im_q, im_k: one input's views


def import_by_package(path: str) -> Any:
    """The module of `path` as its package knows it (`models.net`), with its package folder's parent on sys.path."""
    folder, name = os.path.split(os.path.splitext(path)[0])
    parts = [name]
    while os.path.exists(os.path.join(folder, "__init__.py")):
        folder, package = os.path.split(folder)
        parts.insert(0, package)
    sys.path.insert(0, folder)
    return importlib.import_module(".".join(parts))


def _example(module: Any, function: str) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    factory = getattr(module, function, None)
    if not callable(factory):
        raise VerifyLimit(f"{module.__name__} has no function {function}()")
    made = factory()
    if not isinstance(made, tuple) or len(made) not in (2, 3):
        raise VerifyLimit(f"{function}() must return (model, args) or (model, args, kwargs), got {type(made).__name__}")
    model, args, *rest = made
    return model, tuple(args) if isinstance(args, (tuple, list)) else (args,), dict(rest[0]) if rest else {}


def _built(module: Any, on_device: bool) -> tuple[Any, tuple[Any, ...]]:
    import torch
    import torch.nn as nn

    wanted = json.loads(os.environ.get(MODEL) or "{}")
    classes = [v for v in vars(module).values()
               if isinstance(v, type) and issubclass(v, nn.Module) and v.__module__ == module.__name__]
    chosen = next((c for c in classes if c.__name__ == wanted.get("class")), classes[0] if classes else None)
    if chosen is None:
        raise VerifyLimit(f"{module.__name__} defines no nn.Module")
    model, how = build(chosen, wanted)
    if on_device and torch.cuda.is_available():
        model = model.cuda()  # the rank's device: its forward's own `.cuda()` tensors meet its parameters there
    if wanted.get("class") == chosen.__name__ and wanted.get("inputs"):
        inputs, fed = _as_fed(wanted, torch)
    else:
        inputs, fed = _inputs_for(model, torch, nn)
    emit("model-built", how=how, inputs=[list(t.shape) for t in inputs], fed=fed)
    return model, inputs


def _as_fed(call: dict[str, Any], torch: Any) -> tuple[tuple[Any, ...], str]:
    """The tensors the project's caller feeds the module, its batch raised to one sample for each replica, so that
    every replica runs."""
    replicas = max(torch.cuda.device_count(), 1)
    inputs, raised = [], []
    for spec in call["inputs"]:
        batch, *rest = spec["shape"]
        if batch < replicas:
            raised.append(f"batch {batch} raised to {replicas}, a sample for each replica")
        shape = (max(batch, replicas), *rest)
        factory = getattr(torch, spec["factory"].rpartition(".")[2])
        inputs.append(factory(spec["high"], shape) if "high" in spec else factory(*shape))
    return tuple(inputs), f"as {call['fed_at']} feeds it" + (f" ({raised[0]})" if raised else "")


def _inputs_for(model: Any, torch: Any, nn: Any) -> tuple[tuple[Any, ...], str]:
    """A batch for the first layer that takes one, the first shape that a plain forward accepts; one for each input
    of a forward that takes views of one thing (`forward(self, x1, x2)`, `forward(self, im_q, im_k)`); with the words
    that say how."""
    required = [
        p.name for p in inspect.signature(model.forward).parameters.values()
        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    if len({_VIEW_SUFFIX.sub("", name) for name in required}) > 1:
        raise VerifyLimit(f"{type(model).__name__}.forward takes {len(required)} inputs ({', '.join(required)}): "
                          "verify can shape only one; add pitfall_lint_example() returning (model, args)")
    first = next((m for m in model.modules() if m is not model and isinstance(m, (
        nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Embedding, nn.EmbeddingBag, nn.RNNBase))), None)
    if first is None:
        raise VerifyLimit(f"{type(model).__name__} has no layer to shape an input from: add pitfall_lint_example()")
    if isinstance(first, nn.Linear):
        candidates = [(torch.randn(_BATCH, first.in_features),), (torch.randn(_BATCH, _SEQUENCE, first.in_features),)]
    elif isinstance(first, (nn.Embedding, nn.EmbeddingBag)):
        # The shorter sequence for a context as long as a size verify chose (`block_size` 8).
        candidates = [(torch.randint(0, first.num_embeddings, (_BATCH, length)),) for length in (_SEQUENCE, _SEQUENCE // 2)]
    elif isinstance(first, nn.RNNBase):
        shape = (_BATCH, _SEQUENCE, first.input_size) if first.batch_first else (_SEQUENCE, _BATCH, first.input_size)
        candidates = [(torch.randn(*shape),)]
    else:
        spatial = {nn.Conv1d: 1, nn.Conv2d: 2, nn.Conv3d: 3}[type(first)] if type(first) in (nn.Conv1d, nn.Conv2d, nn.Conv3d) else 2
        candidates = [(torch.randn(_BATCH, first.in_channels, *([side] * spatial)),) for side in _IMAGE_SIDES]
    candidates = [tuple(t.to(_device(model)) for t in inputs) * max(len(required), 1) for inputs in candidates]
    failure = None
    for inputs in candidates:
        try:
            with torch.no_grad():
                model(*(t[:2] for t in inputs))
            return inputs, f"made for its first layer {first!r}"
        except Exception as error:
            failure = failure or error
    # A shape verify made up: the first layer is not always the input's (an einops Rearrange before it, a patch
    # embedding), so the failure is verify's guess failing, not the code's.
    raise VerifyLimit(f"{type(model).__name__} does not take inputs made for its first layer {first!r} (shape "
                      f"{list(candidates[0][0].shape)}: {type(failure).__name__}: {failure}); the first layer is not "
                      "always the input's shape (an einops Rearrange, a patch embedding) and no call in the project "
                      "feeds it tensors of a literal shape: add pitfall_lint_example() returning (model, args)")


def main() -> int:
    path, function = os.path.abspath(sys.argv[1]), sys.argv[2]
    os.environ[SCRIPT] = path
    emit("start", mode="example", function=function)
    import torch
    from torch.utils._pytree import tree_flatten

    ranked = "LOCAL_RANK" in os.environ
    with observed(where="example"):
        if ranked:
            _join_group(torch)
        module = import_by_package(path)
        if function == "-":
            model, args = _built(module, on_device=ranked)
            kwargs: dict[str, Any] = {}
        else:
            model, args, kwargs = _example(module, function)
        if ranked:
            args = tuple(a.to(_device(model)) for a in args)
            devices = [torch.cuda.current_device()] if torch.cuda.is_available() else None
            wrapped = torch.nn.parallel.DistributedDataParallel(model, device_ids=devices)
        else:
            wrapped = torch.nn.DataParallel(model)
        output = wrapped(*args, **kwargs)
        floats = [t for t in tree_flatten(output)[0] if isinstance(t, torch.Tensor) and t.is_floating_point()]
        if floats and any(t.requires_grad for t in floats):
            sum(t.float().sum() for t in floats).backward()
        if ranked:
            torch.distributed.destroy_process_group()
    return 0


def _join_group(torch: Any) -> None:
    """A rank of torch.distributed.run (a module whose code calls collectives): in the process group, on its own
    device, as a DDP training script sets itself up."""
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    torch.distributed.init_process_group("nccl" if os.environ.get(DEVICE, "cuda") == "cuda" else "gloo")  # real GPUs


def _device(model: Any) -> Any:
    return next((p.device for p in model.parameters()), None) or "cpu"


if __name__ == "__main__":
    sys.exit(main())
