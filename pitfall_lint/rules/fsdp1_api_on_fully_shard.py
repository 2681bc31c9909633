"""PFL604: FSDP1's or DDP's API used on a module that FSDP2's `fully_shard` sharded."""

from __future__ import annotations

import ast

from pitfall_lint.analysis.fsdp import FSDP1, sharding_of
from pitfall_lint.analysis.training import dotted
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.rules.base import Rule

# Methods of FSDP1 and DDP modules that an FSDP2 module does not have (`AttributeError`), with what to use instead.
_METHODS = {
    "no_sync": "`model.set_requires_gradient_sync(False)` on the accumulation steps (and `True` on the last)",
    "summon_full_params": "`model.unshard()` and `model.reshard()`, or `full_tensor()` of a parameter",
    "clip_grad_norm_": "`torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)`, which handles DTensor",
}
# FSDP1's static functions, which look for FSDP1 modules under the one given: on an FSDP2 module they find none,
# and fail (`KeyError: None` from state_dict_type, `AttributeError: 'NoneType' object has no attribute
# 'optim_state_dict_config'`) or do nothing (summon_full_params leaves the parameters sharded). Measured on torch 2.13.
_STATIC = {
    **dict.fromkeys(
        ("state_dict_type", "set_state_dict_type"),
        "`torch.distributed.checkpoint.state_dict.get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))`",
    ),
    **dict.fromkeys(
        ("optim_state_dict", "full_optim_state_dict", "sharded_optim_state_dict", "optim_state_dict_to_load"),
        "`torch.distributed.checkpoint.state_dict.get_optimizer_state_dict(model, optimizer)`",
    ),
    "summon_full_params": "`model.unshard()` and `model.reshard()`, or `full_tensor()` of a parameter",
}
_STATIC_NAMES = {f"{fsdp}.{name}": name for fsdp in FSDP1 for name in _STATIC}


class Fsdp1ApiOnFullyShard(Rule):
    info = RuleInfo(
        code="PFL604",
        name="fsdp1-api-on-fully-shard",
        summary="FSDP1's or DDP's API (`no_sync()`, `FSDP.state_dict_type(...)`, `summon_full_params`) used on a module that `fully_shard` (FSDP2) sharded: an error, or nothing done.",
        severity="error",
        preview=True,
        verifiable=True,
        hint="use FSDP2's own API: `set_requires_gradient_sync`, `get_model_state_dict`, `unshard()`",
    )
    triggers = (("fully_shard",), (*_METHODS, *_STATIC))
    subscriptions = (ast.Call,)

    def visit(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Call)
        func = node.func
        if not isinstance(func, ast.Attribute) or (func.attr not in _METHODS and func.attr not in _STATIC):
            return
        static = _STATIC_NAMES.get(self.ctx.qualified_name(func) or "")
        if static is not None:
            module = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg in ("module", "model")), None)
            spelled, instead, parts = f"`{ast.unparse(func)}(...)`", _STATIC[static], True
        elif func.attr in _METHODS:
            module = func.value
            spelled, instead, parts = f"`{ast.unparse(func)}()`", _METHODS[func.attr], False
        else:
            return
        name = dotted(module) if module is not None else None
        site = sharding_of(self.ctx, name, self.ctx.ancestors, node.lineno, parts=parts, use=node) if name is not None else None
        if site is None:
            return
        self.report(
            node,
            f"{spelled} is FSDP1's or DDP's API, but `{name}` was sharded by FSDP2's `fully_shard` at line {site.line}, "
            f"which does not have it: it fails or does nothing; use {instead}",
        )
