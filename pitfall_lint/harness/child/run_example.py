"""`python -m pitfall_lint.harness.child.run_example FILE FUNCTION`: a model file without an entry point.

FUNCTION returns `(model, args)` or `(model, args, kwargs)`; the model is wrapped N-way in
nn.DataParallel (real or emulated) and run forward and backward.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any

from pitfall_lint.harness.child.events import SCRIPT, emit
from pitfall_lint.harness.child.observe import observed

MODULE_NAME = "pitfall_lint_user_module"


def _example(path: str, function: str) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    spec = importlib.util.spec_from_file_location(MODULE_NAME, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[MODULE_NAME] = module
    spec.loader.exec_module(module)
    factory = getattr(module, function, None)
    if not callable(factory):
        raise LookupError(f"{os.path.basename(path)} has no function {function}()")
    made = factory()
    if not isinstance(made, tuple) or len(made) not in (2, 3):
        raise TypeError(f"{function}() must return (model, args) or (model, args, kwargs), got {type(made).__name__}")
    model, args, *rest = made
    return model, tuple(args) if isinstance(args, (tuple, list)) else (args,), dict(rest[0]) if rest else {}


def main() -> int:
    path, function = os.path.abspath(sys.argv[1]), sys.argv[2]
    os.environ[SCRIPT] = path
    sys.path.insert(0, os.path.dirname(path))
    emit("start", mode="example", function=function)
    import torch
    from torch.utils._pytree import tree_flatten

    with observed(where="example"):
        model, args, kwargs = _example(path, function)
        output = torch.nn.DataParallel(model)(*args, **kwargs)
        floats = [t for t in tree_flatten(output)[0] if isinstance(t, torch.Tensor) and t.is_floating_point()]
        if floats and any(t.requires_grad for t in floats):
            sum(t.float().sum() for t in floats).backward()
    return 0


if __name__ == "__main__":
    sys.exit(main())
