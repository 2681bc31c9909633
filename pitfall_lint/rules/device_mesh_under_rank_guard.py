"""PFL607: a device mesh built on some ranks only; building one is a collective over the whole world."""

from __future__ import annotations

import ast

from pitfall_lint.analysis.fsdp import mesh_dimensions
from pitfall_lint.analysis.rank_splits import Restriction, rank_restrictions
from pitfall_lint.analysis.ranks import may_name_a_rank
from pitfall_lint.analysis.scopes import enclosing_function
from pitfall_lint.context import FileContext
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.rules.base import Rule


class DeviceMeshUnderRankGuard(Rule):
    info = RuleInfo(
        code="PFL607",
        name="device-mesh-under-rank-guard",
        summary="`init_device_mesh` of a mesh of two or more dimensions called on some ranks only (under a rank guard): it creates process groups, a collective over the whole world, so the job hangs.",
        severity="error",
        preview=True,
        hint="build the mesh on every rank, before any rank-0-only work",
    )
    triggers = (("init_device_mesh",),)
    subscriptions = (ast.Call,)

    @classmethod
    def may_apply(cls, data: bytes) -> bool:
        return may_name_a_rank(data)

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._meshes: list[tuple[ast.Call, ast.AST | None, tuple[Restriction, ...]]] = []

    def visit(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Call)
        dimensions = mesh_dimensions(self.ctx, node, self.ctx.ancestors)
        if dimensions is None or dimensions < 2:
            return  # a one-dimensional mesh over the world reuses the default group: no collective
        ancestors = list(self.ctx.ancestors)
        self._meshes.append((node, enclosing_function(ancestors), rank_restrictions(self.ctx, node, ancestors)))

    def finish(self) -> None:
        for call, function, restrictions in self._meshes:
            if not restrictions:
                continue
            # The other ranks build theirs in the same function under a guard of their own (`if rank == 0: ... else:`).
            mine = {r.key for r in restrictions}
            if any(
                other is not call and where is function and others and {r.key for r in others} != mine
                for other, where, others in self._meshes
            ):
                continue
            self.report(
                call,
                f"`{ast.unparse(call.func)}` runs only {restrictions[-1].where()}, but building a mesh of several dimensions is a collective "
                "over every rank of the world (it creates a process group per dimension with `new_group`): the other ranks "
                "never join, "
                "and the ranks that do wait until the process group times out; build the mesh on every rank",
            )
