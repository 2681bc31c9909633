"""The source of pitfall_lint/analysis/wrapper_api.py, introspected from the installed torch.

    python tests/wrapper_api_table.py > pitfall_lint/analysis/wrapper_api.py

The static checker never imports torch, so the names that nn.Module, nn.DataParallel and DistributedDataParallel
answer to are committed as a table; tests/test_wrapper_api.py checks that the table is what this produces.
A name is one the class (or a base) defines, or that its code sets on `self` (`self.device_ids = ...`,
`super().__setattr__("training", True)`), since instance attributes do not show in `dir()` of the class.
"""

from __future__ import annotations

import ast
import inspect
import textwrap

_WIDTH = 116
_SETTERS = frozenset({"__setattr__", "setattr"})


def _set_on_self(cls: type) -> set[str]:
    names: set[str] = set()
    for klass in cls.__mro__:
        if klass is object:
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                if isinstance(node.value, ast.Name) and node.value.id == "self":
                    names.add(node.attr)
            elif isinstance(node, ast.Call) and node.args:
                called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                names_arg = node.args[1] if called == "setattr" and len(node.args) > 1 else node.args[0]
                if called in _SETTERS and isinstance(names_arg, ast.Constant) and isinstance(names_arg.value, str):
                    names.add(names_arg.value)
    return names


def names_of(cls: type) -> frozenset[str]:
    return frozenset(dir(cls)) | frozenset(_set_on_self(cls))


def _frozenset(name: str, values: frozenset[str], doc: str) -> str:
    lines = [f"# {doc}", f"{name} = frozenset("]
    body = textwrap.fill(", ".join(f"\"{v}\"" for v in sorted(values)), width=_WIDTH - 4, break_on_hyphens=False)
    lines += ["    {", *(f"        {line}" for line in body.splitlines()), "    }", ")"]
    return "\n".join(lines)


def table() -> str:
    import torch
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel

    module = names_of(nn.Module)
    data_parallel = names_of(nn.DataParallel) - module
    distributed = names_of(DistributedDataParallel) - module
    version = torch.__version__.split("+")[0]
    return "\n\n".join(
        [
            f'"""The names that torch\'s wrappers answer to, as of torch {version} (generated: do not edit).\n\n'
            "Regenerate with `python tests/wrapper_api_table.py > pitfall_lint/analysis/wrapper_api.py`; the static\n"
            'checker never imports torch. An attribute outside these, used on a wrapper, is not the wrapped model\'s."""',
            f'TORCH_VERSION = "{version}"',
            _frozenset("MODULE", module, "nn.Module: methods, class attributes and what its code sets on self."),
            _frozenset("DATA_PARALLEL", data_parallel, "nn.DataParallel, beyond nn.Module."),
            _frozenset("DISTRIBUTED_DATA_PARALLEL", distributed, "DistributedDataParallel, beyond nn.Module."),
        ]
    ) + "\n"


if __name__ == "__main__":
    print(table(), end="")
