"""PFL201: every rank writing one checkpoint file corrupts it."""

from __future__ import annotations

import ast

from pitfall_lint.analysis.distributed import distributed_setups
from pitfall_lint.analysis.evidence import cite
from pitfall_lint.analysis.launch_modes import runs_outside_distributed_launch
from pitfall_lint.analysis.ranks import is_locally_restricted
from pitfall_lint.analysis.buffers import writes_per_process
from pitfall_lint.analysis.scopes import bindings, enclosing_function, parameter_branches, parameter_slots
from pitfall_lint.context import FileContext
from pitfall_lint.diagnostic import Related, RuleInfo
from pitfall_lint.rules.base import Rule

_PATH_POSITION = 1  # torch.save(obj, f, ...)


# Names and calls that hold the global rank; a local rank is 0 once per node, so it is no guard for a shared file.
_GLOBAL_RANK_NAMES = frozenset({"rank", "global_rank", "world_rank"})
_GLOBAL_RANK_CALLS = frozenset({"torch.distributed.get_rank", "torch.distributed.distributed_c10d.get_rank"})


class UnguardedTorchSave(Rule):
    info = RuleInfo(
        code="PFL201",
        name="unguarded-torch-save",
        summary="torch.save in distributed code that every rank runs: the ranks overwrite one file.",
        severity="error",
        hint='save on one rank (`if dist.get_rank() == 0:`) and `dist.barrier()` before others read it, or put the rank in the file name',
        verifiable=True,
        fix="unsafe",
        preview=True,  # below the first-run bar (bench/fresh): runs with --preview
    )
    # A call of torch.save; the file need not set up distributed training itself when its caller does.
    triggers = (("save(", "save (", "save as"), ("torch",))  # a call, or `from torch import save as tsave`
    subscriptions = (ast.Call,)

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._saves: list[tuple[ast.Call, list[ast.AST]]] = []

    def visit(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Call)
        if isinstance(node.func, ast.Attribute) and node.func.attr != "save":
            return  # the cheap look first: only `torch.save` and its aliases can be it
        if self.ctx.qualified_name(node.func) == "torch.save":
            self._saves.append((node, list(self.ctx.ancestors)))

    def finish(self) -> None:
        if not self._saves:
            return
        setup_lines = [line for _, line in distributed_setups(self.ctx)]
        for call, ancestors in self._saves:
            path = call.args[_PATH_POSITION] if len(call.args) > _PATH_POSITION else None
            path = next((k.value for k in call.keywords if k.arg == "f"), path)
            if path is not None and writes_per_process(self.ctx, path, ancestors):
                continue
            if is_locally_restricted(self.ctx, call, ancestors):
                continue
            if runs_outside_distributed_launch(self.ctx, call, ancestors, setup_lines):
                continue  # the single-process side of a launch-mode switch
            where = ""
            related: tuple[Related, ...] = ()
            function = enclosing_function(ancestors)
            if function is not None and self.ctx.project.has_callers(function, ancestors):
                # A helper runs where it is called: on every rank only if distributed code calls it unguarded (a
                # caller that passes a per-rank path into the parameter the path comes from is no collision).
                owner = ancestors[: ancestors.index(function)]
                slots = parameter_slots(path, function, owner) if path is not None else []
                branch = parameter_branches(function, call, ancestors)  # a call that passes a literal skipping it
                caller = self.ctx.project.every_rank_caller(function, ancestors, slots, branch)
                if caller is None:
                    continue
                where, related = cite(self.ctx, caller, "called on every rank")
            elif not setup_lines:
                continue  # module-level code, or a function nothing calls, of a file that sets up nothing
            self.report(
                call,
                f"`torch.save` runs on every rank{where}, which then overwrite one file; guard it with "
                "`if dist.get_rank() == 0:` or put the rank in the path",
                fix=self._rank_zero_guard(call, ancestors) if isinstance(ancestors[-1], ast.Expr) else None,
                related=related,
            )

    def _rank_zero_guard(self, call: ast.Call, ancestors: list[ast.AST]) -> dict[str, str]:
        """The test that keeps the save on rank 0, with the import it needs (empty when none)."""

        def holds_global_rank(name: str, value: ast.AST | None) -> bool:
            reads_rank = isinstance(value, ast.Call) and self.ctx.qualified_name(value.func, ancestors) in _GLOBAL_RANK_CALLS
            return name in _GLOBAL_RANK_NAMES or reads_rank

        scope = bindings(enclosing_function(ancestors), self.ctx.tree)
        name = scope.last_bound_where(call.lineno, "global-rank", holds_global_rank)
        if name is not None:
            return {"guard": f"{name} == 0", "import": ""}
        alias = self.ctx.resolver.module_alias("torch.distributed")
        if alias is not None:
            return {"guard": f"{alias}.get_rank() == 0", "import": ""}
        return {"guard": "torch.distributed.get_rank() == 0", "import": "torch.distributed"}
