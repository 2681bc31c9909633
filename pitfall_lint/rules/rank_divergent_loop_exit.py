"""PFL214: a loop left on some ranks only (`if rank == 0 and stop: break`) while the others go round again into a
collective."""

from __future__ import annotations

import ast

from pitfall_lint.analysis.collectives import CANDIDATE_METHODS, COLLECTIVE_WORDS, collective_call
from pitfall_lint.analysis.rank_splits import rank_restrictions
from pitfall_lint.analysis.ranks import ancestors_of, may_name_a_rank
from pitfall_lint.analysis.scopes import FUNCTIONS
from pitfall_lint.analysis.training import LOOPS, walk_same_scope
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.rules.base import Rule


class RankDivergentLoopExit(Rule):
    info = RuleInfo(
        code="PFL214",
        name="rank-divergent-loop-exit",
        summary="A loop left by `break` or `return` on some ranks only (early stopping decided on rank 0) while the loop runs a collective: the other ranks go round again and wait in it for ever.",
        severity="error",
        preview=True,
        hint="decide on one rank, broadcast the decision, and leave the loop on every rank",
    )
    triggers = (COLLECTIVE_WORDS, ("break", "return"))
    subscriptions = (ast.Break, ast.Return)

    @classmethod
    def may_apply(cls, data: bytes) -> bool:
        return may_name_a_rank(data)

    def visit(self, node: ast.AST) -> None:
        ancestors = list(self.ctx.ancestors)
        loop_index = next(
            (i for i in range(len(ancestors) - 1, -1, -1) if isinstance(ancestors[i], (*LOOPS, *FUNCTIONS, ast.Lambda, ast.ClassDef))),
            None,
        )
        if loop_index is None or not isinstance(ancestors[loop_index], LOOPS):
            return  # a `return` outside any loop, or a loop in an enclosing function
        loop = ancestors[loop_index]
        guards = [r for r in rank_restrictions(self.ctx, node, ancestors) if r.kind in ("guard", "else") and r.node in ancestors[loop_index + 1 :]]
        if not guards:
            return
        guard = guards[0].node
        collective = self._collective_before(loop, guard)
        if collective is None:
            return
        call, description = collective
        where = "holds" if guards[0].kind == "guard" else "is false"
        self.report(
            node,
            f"`{'break' if isinstance(node, ast.Break) else 'return'}` leaves the loop only where `{guards[0].text}` {where} "
            f"(line {guard.lineno}), but the loop runs {description} at line {call.lineno} on every rank: the other "  # type: ignore[attr-defined]
            "ranks go round again and wait in it until the process group times out; decide on one rank, broadcast the "
            "decision (`dist.broadcast_object_list`), and leave the loop on every rank",
        )

    def _collective_before(self, loop: ast.AST, guard: ast.AST) -> tuple[ast.Call, str] | None:
        """The first collective of the loop's body that stands before the guard (the others reach it on their next
        time round; one after the guard is PFL207's, which reports it there)."""
        for node in walk_same_scope(loop.body):  # type: ignore[attr-defined]
            if not isinstance(node, ast.Call) or node.lineno >= guard.lineno:  # type: ignore[attr-defined]
                continue
            if isinstance(node.func, ast.Attribute) and node.func.attr not in CANDIDATE_METHODS:
                continue
            found = collective_call(self.ctx, node, ancestors_of(self.ctx, node))
            if found is not None and not rank_restrictions(self.ctx, node, ancestors_of(self.ctx, node)):
                return node, found[1]
        return None
