"""PFL202: without map_location every rank restores a checkpoint onto the device it was saved from."""

from __future__ import annotations

import ast

from pitfall_lint.analysis.buffers import is_in_memory_buffer
from pitfall_lint.analysis.distributed import DISTRIBUTED_TRIGGERS, sets_up_distributed
from pitfall_lint.analysis.ranks import is_restricted_to_one_rank
from pitfall_lint.analysis.scopes import bindings, enclosing_function
from pitfall_lint.context import FileContext
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.rules.base import Rule

_MAP_LOCATION_POSITION = 1  # torch.load(f, map_location=None, ...)


class LoadWithoutMapLocation(Rule):
    info = RuleInfo(
        code="PFL202",
        name="load-without-map-location",
        summary="torch.load without map_location in distributed code: every rank loads onto the saving device (cuda:0).",
        severity="warning",
        enabled_by_default=False,
        fix="unsafe",
        hint='pass `map_location=f"cuda:{local_rank}"` (or `"cpu"`) so each rank loads onto its own device',
        verifiable=True,
    )
    triggers = (("load",), DISTRIBUTED_TRIGGERS)
    subscriptions = (ast.Call,)

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._loads: list[tuple[ast.Call, list[ast.AST]]] = []

    def visit(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Call)
        if self.ctx.qualified_name(node.func) != "torch.load":
            return
        keywords = {k.arg for k in node.keywords}
        if "map_location" in keywords or None in keywords or len(node.args) > _MAP_LOCATION_POSITION:
            return
        if any(isinstance(a, ast.Starred) for a in node.args):
            return
        self._loads.append((node, list(self.ctx.ancestors)))

    def finish(self) -> None:
        if not self._loads or not sets_up_distributed(self.ctx):
            return
        for call, ancestors in self._loads:
            if is_restricted_to_one_rank(self.ctx, call, ancestors):
                continue  # one rank loading onto its own device 0 is fine
            source = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "f"), None)
            if source is not None and is_in_memory_buffer(self.ctx, source, ancestors):
                continue  # bytes passed between processes, not a checkpoint saved from a device
            self.report(
                call,
                "`torch.load` without `map_location` on every rank: each restores the tensors onto the device they "
                "were saved from (cuda:0); pass `map_location=f\"cuda:{local_rank}\"` or `\"cpu\"`",
                fix={"map_location": self._local_device(call, ancestors) or '"cpu"'},
            )

    def _local_device(self, call: ast.Call, ancestors: list[ast.AST]) -> str | None:
        """A variable holding this rank's device (`device = torch.device(f"cuda:{rank}")`, a `device` parameter)."""

        def holds_device(name: str, value: ast.AST | None) -> bool:
            builds_device = isinstance(value, ast.Call) and self.ctx.qualified_name(value.func, ancestors) == "torch.device"
            return builds_device or name == "device" or name.endswith("_device")

        return bindings(enclosing_function(ancestors), self.ctx.tree).last_bound_where(call.lineno, "device", holds_device)
