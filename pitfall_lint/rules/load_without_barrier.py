"""PFL204: other ranks read the checkpoint while rank 0 is still writing it (or before it exists)."""

from __future__ import annotations

import ast

from pitfall_lint.analysis.distributed import DISTRIBUTED_TRIGGERS, barrier_call, sets_up_distributed
from pitfall_lint.analysis.buffers import is_in_memory_buffer
from pitfall_lint.analysis.ranks import is_rank_test, is_restricted_to_one_rank
from pitfall_lint.analysis.scopes import enclosing_function, position_in_block
from pitfall_lint.context import FileContext
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.rules.base import Rule

_BARRIERS = frozenset({"barrier", "monitored_barrier", "wait_for_everyone"})
_ANY_RANK_STEP = frozenset({"torch.save", "torch.load"})


def _saves_then_loads(steps: list[tuple[str, ast.Call, list[ast.AST]]]) -> bool:
    kinds = [kind for kind, _, _ in steps]
    return "save" in kinds and "load" in kinds[kinds.index("save") :]


class LoadWithoutBarrier(Rule):
    info = RuleInfo(
        code="PFL204",
        name="load-without-barrier",
        summary="A rank-0-guarded save followed by a load on every rank with no barrier between them.",
        severity="warning",
        hint="call `dist.barrier()` (or the barrier of the framework that starts the processes) between rank 0's save and the other ranks' load",
        verifiable=True,
    )
    triggers = (("save",), ("load",), DISTRIBUTED_TRIGGERS)
    subscriptions = (ast.Call,)

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        # In source order, per function: ("save"|"load"|"barrier", call, ancestors).
        self._steps: dict[int, list[tuple[str, ast.Call, list[ast.AST]]]] = {}

    def visit(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Call)
        name = self.ctx.qualified_name(node.func) or ""
        if name in _ANY_RANK_STEP:
            kind = name.rpartition(".")[2]
        elif name.rpartition(".")[2] in _BARRIERS or (isinstance(node.func, ast.Attribute) and node.func.attr in _BARRIERS):
            kind = "barrier"
        else:
            return
        function = enclosing_function(self.ctx.ancestors)
        self._steps.setdefault(id(function), []).append((kind, node, list(self.ctx.ancestors)))

    def finish(self) -> None:
        # Only a save followed by a load in the same function can race: the file's set-ups are looked for after.
        if not any(_saves_then_loads(steps) for steps in self._steps.values()) or not sets_up_distributed(self.ctx):
            return
        for steps in self._steps.values():
            guarded_save: tuple[ast.Call, list[ast.AST]] | None = None
            for kind, call, ancestors in steps:
                if kind != "barrier" and self._touches_no_file(call, ancestors):
                    continue
                if kind == "barrier":
                    guarded_save = None
                elif kind == "save" and is_restricted_to_one_rank(self.ctx, call, ancestors):
                    guarded_save = (call, ancestors)
                elif kind == "load" and guarded_save is not None and self._other_ranks_run(call, ancestors, *guarded_save):
                    self.report(
                        call,
                        f"every rank loads here, but only one rank saved at line {guarded_save[0].lineno} with no barrier "
                        f"between: the others can read a missing or half-written file; call `{barrier_call(self.ctx)}` after the save",
                    )
                    guarded_save = None

    def _touches_no_file(self, call: ast.Call, ancestors: list[ast.AST]) -> bool:
        """A save into or a load from an in-memory buffer has nothing to race on."""
        target = call.args[1] if len(call.args) > 1 and "save" in (self.ctx.qualified_name(call.func, ancestors) or "") else None
        if target is None and call.args:
            target = call.args[0] if (self.ctx.qualified_name(call.func, ancestors) or "").endswith("load") else None
        return target is not None and is_in_memory_buffer(self.ctx, target, ancestors)

    def _other_ranks_run(self, load: ast.Call, ancestors: list[ast.AST], save: ast.Call, save_ancestors: list[ast.AST]) -> bool:
        """The load is not restricted to one rank, or it sits in the `else` of the very guard of the save."""
        if not is_restricted_to_one_rank(self.ctx, load, ancestors):
            return True
        guards = [a for a in save_ancestors if isinstance(a, ast.If) and is_rank_test(self.ctx, a.test, save_ancestors)]
        chain = [*ancestors, load]
        return any(
            position_in_block(guard, "orelse", chain[chain.index(guard) + 1]) is not None
            for guard in guards
            if guard in ancestors
        )
